"""xaibench-vit: vision transformers in xaibench, as a plugin.

Registered through the ``xaibench`` entry point ``vit``: the ``attention-rollout`` explainer
(:mod:`xaibench_vit.rollout`) and the offline ``vit`` suite (:mod:`xaibench_vit.suite`).
"""

from __future__ import annotations

from xaibench.kit import Register, hookimpl

__version__ = "0.1.0"


@hookimpl
def register_explainers(register: Register) -> None:
    from xaibench_vit.rollout import AttentionRollout

    register(AttentionRollout)


@hookimpl
def register_suites(register: Register) -> None:
    from xaibench_vit.suite import VitSuite

    register(VitSuite)
