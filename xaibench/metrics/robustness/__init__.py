"""The robustness family (DESIGN 3b): explanation stability under small input perturbations.

Ranked within the family, never in the overall rank; lower is better for every member."""

from __future__ import annotations

from xaibench.api import Metric
from xaibench.metrics.robustness.metrics import (
    AvgSensitivity,
    Continuity,
    LocalLipschitzEstimate,
    MaxSensitivity,
    RelativeInputStability,
    RelativeOutputStability,
    RelativeRepresentationStability,
)

ROBUSTNESS_METRICS: list[type[Metric]] = [
    LocalLipschitzEstimate,
    MaxSensitivity,
    AvgSensitivity,
    Continuity,
    RelativeInputStability,
    RelativeOutputStability,
    RelativeRepresentationStability,
]
"""Every robustness metric, one per DESIGN 8 id; ``max_sensitivity``, ``avg_sensitivity`` and
``local_lipschitz_estimate`` have ``default = True`` (the default suite runs them: one shared
perturbation pass); the others run when named (``full`` and ``--metric``)."""

__all__ = [
    "ROBUSTNESS_METRICS",
    "AvgSensitivity",
    "Continuity",
    "LocalLipschitzEstimate",
    "MaxSensitivity",
    "RelativeInputStability",
    "RelativeOutputStability",
    "RelativeRepresentationStability",
]
