"""xaibench-zennit: layer-wise relevance propagation (zennit) as an xaibench plugin.

Registered through the ``xaibench`` entry point ``zennit``; the explainer classes live in
:mod:`xaibench_zennit.lrp` and import zennit only when they run.
"""

from __future__ import annotations

from xaibench.kit import Register, hookimpl

__version__ = "0.1.0"


@hookimpl
def register_explainers(register: Register) -> None:
    from xaibench_zennit.lrp import EXPLAINERS

    for cls in EXPLAINERS:
        register(cls)
