"""The field's faithfulness metrics (DESIGN 3b), in one list for the plugin registry: reported,
never ranked, run only when named (``default = False``; the ``full`` suite runs them)."""

from __future__ import annotations

from xaibench.api import Metric
from xaibench.metrics.faithfulness.correlation import FaithfulnessCorrelation, SensitivityN
from xaibench.metrics.faithfulness.infidelity import Infidelity
from xaibench.metrics.faithfulness.regions import IROF, RegionPerturbation, Selectivity
from xaibench.metrics.faithfulness.stepwise import (
    FaithfulnessEstimate,
    Monotonicity,
    MonotonicityCorrelation,
    PixelFlipping,
)
from xaibench.metrics.faithfulness.sufficiency import Sufficiency

FIELD_FAITHFULNESS_METRICS: list[type[Metric]] = [
    FaithfulnessCorrelation,
    FaithfulnessEstimate,
    Monotonicity,
    MonotonicityCorrelation,
    PixelFlipping,
    RegionPerturbation,
    IROF,
    Infidelity,
    Sufficiency,
    SensitivityN,
    Selectivity,
]
"""DESIGN 3b's faithfulness metrics implemented natively, in the issue's order."""
