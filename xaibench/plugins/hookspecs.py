"""The hooks a plugin implements. Each receives a ``register`` callback and may
call it any number of times with component classes (see docs/writing-plugins.md).

A plugin module marks its functions with ``xaibench.hookimpl``::

    from xaibench import hookimpl

    @hookimpl
    def register_explainers(register):
        register(MyExplainer)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:  # `import xaibench` stays free of numpy, whose BLAS starts threads: the metric
    # worker (runner/isolation/metric_child.py) must be single-threaded when it enters its sandbox
    from xaibench.api import Register

PROJECT = "xaibench"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def register_explainers(register: Register) -> None:
    """Register :class:`xaibench.api.Explainer` subclasses."""


@hookspec
def register_datasets(register: Register) -> None:
    """Register :class:`xaibench.api.Dataset` subclasses."""


@hookspec
def register_models(register: Register) -> None:
    """Register :class:`xaibench.api.Model` subclasses."""


@hookspec
def register_metrics(register: Register) -> None:
    """Register :class:`xaibench.api.Metric` subclasses."""


@hookspec
def register_suites(register: Register) -> None:
    """Register :class:`xaibench.api.Suite` subclasses."""


@hookspec
def register_encoders(register: Register) -> None:
    """Register :class:`xaibench.api.Encoder` subclasses (embeddings for the PASTA score)."""


HOOK_KINDS: dict[str, str] = {
    "register_explainers": "explainer",
    "register_datasets": "dataset",
    "register_models": "model",
    "register_metrics": "metric",
    "register_suites": "suite",
    "register_encoders": "encoder",
}
