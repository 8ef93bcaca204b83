"""xaibench-gradcam: CAM explainers (pytorch-grad-cam) as an xaibench plugin.

Registered through the ``xaibench`` entry point ``gradcam``; the explainer classes live
in :mod:`xaibench_gradcam.cams` and import pytorch-grad-cam only when they run.
"""

from __future__ import annotations

from xaibench.kit import Register, hookimpl

__version__ = "0.1.0"


@hookimpl
def register_explainers(register: Register) -> None:
    from xaibench_gradcam.cams import EXPLAINERS

    for cls in EXPLAINERS:
        register(cls)
