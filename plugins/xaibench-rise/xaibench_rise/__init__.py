"""xaibench-rise: the RISE explainer (Petsiuk et al. 2018) as an xaibench plugin.

Registered through the ``xaibench`` entry point ``rise``. Needs only torch and numpy.
"""

from __future__ import annotations

from xaibench.kit import Register, hookimpl

__version__ = "0.1.0"


@hookimpl
def register_explainers(register: Register) -> None:
    from xaibench_rise.rise import EXPLAINERS

    for cls in EXPLAINERS:
        register(cls)
