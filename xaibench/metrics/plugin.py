"""Built-in metrics (alignment, faithfulness and the other axes), registered through the same
hook a third-party plugin implements. The perceptual family registers from ``xaibench.pasta``."""

from __future__ import annotations

from xaibench.api import Metric, Register
from xaibench.metrics.alignment.metrics import ALIGNMENT_METRICS
from xaibench.metrics.faithfulness.metrics import FAITHFULNESS_METRICS
from xaibench.plugins.hookspecs import hookimpl

METRICS: list[type[Metric]] = [*ALIGNMENT_METRICS, *FAITHFULNESS_METRICS]


@hookimpl
def register_metrics(register: Register) -> None:
    for cls in METRICS:
        register(cls)
