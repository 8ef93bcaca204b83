"""xaibench-quantus: Quantus metrics as xaibench metrics (ids ``quantus_*``), through one adapter.

Registered through the ``xaibench`` entry point ``quantus``. Quantus itself is imported only
when a metric scores (it takes seconds to import), so listing metrics stays fast.
"""

from __future__ import annotations

from xaibench.kit import Register, hookimpl

__version__ = "0.1.0"


@hookimpl
def register_metrics(register: Register) -> None:
    from xaibench_quantus.metrics import METRICS

    for cls in METRICS:
        register(cls)
