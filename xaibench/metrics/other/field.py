"""The ``other`` family's metrics of DESIGN 3b (complexity and axiomatic), in display order;
registered by :mod:`xaibench.metrics.plugin` after ``sparseness``."""

from __future__ import annotations

from xaibench.api import Metric
from xaibench.metrics.other.axiomatic import Completeness, NonSensitivity
from xaibench.metrics.other.complexity import Complexity, EffectiveComplexity

FIELD_OTHER_METRICS: list[type[Metric]] = [
    Complexity,
    EffectiveComplexity,
    Completeness,
    NonSensitivity,
]
"""Complexity, effective complexity, completeness and non-sensitivity (never ranked)."""
