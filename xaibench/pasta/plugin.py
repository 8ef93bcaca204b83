"""Built-in perceptual family (the PASTA score, DESIGN 5) and its encoders, registered through
the same hooks a third-party plugin implements."""

from __future__ import annotations

from xaibench.api import Metric, Register
from xaibench.pasta.encoders import ENCODERS
from xaibench.pasta.metrics import PastaQ1, PastaQ2, PastaQ3, PastaQ4, PastaQ5, PastaQ6
from xaibench.plugins.hookspecs import hookimpl

METRICS: list[type[Metric]] = [PastaQ1, PastaQ2, PastaQ3, PastaQ4, PastaQ5, PastaQ6]


@hookimpl
def register_metrics(register: Register) -> None:
    for cls in METRICS:
        register(cls)


@hookimpl
def register_encoders(register: Register) -> None:
    for cls in ENCODERS:
        register(cls)
