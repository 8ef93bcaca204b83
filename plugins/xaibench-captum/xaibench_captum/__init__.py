"""xaibench-captum: attribution explainers (Captum) as an xaibench plugin.

Registered through the ``xaibench`` entry point ``captum``; the explainer classes live
in :mod:`xaibench_captum.attributions` and import Captum only when they run.
"""

from __future__ import annotations

from xaibench.kit import Register, hookimpl

__version__ = "0.1.0"


@hookimpl
def register_explainers(register: Register) -> None:
    from xaibench_captum.attributions import EXPLAINERS

    for cls in EXPLAINERS:
        register(cls)
