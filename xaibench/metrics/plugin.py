"""Built-in metrics (alignment, faithfulness, the other axes and sanity), registered through the same
hook a third-party plugin implements. The perceptual family registers from ``xaibench.pasta``."""

from __future__ import annotations

from xaibench.api import Metric, Register
from xaibench.metrics.alignment.metrics import (
    F1AvgMetric,
    F1H25Metric,
    F1H50Metric,
    F1H75Metric,
    F1Metric,
    F1T50Metric,
    FnMaeMetric,
    FpMaeMetric,
    IouAvgMetric,
    IouH25Metric,
    IouH50Metric,
    IouH75Metric,
    IouMetric,
    IouT50Metric,
    MaeMetric,
    MassAccuracyMetric,
    PointingGameMetric,
    PrecisionAvgMetric,
    PrecisionH25Metric,
    PrecisionH50Metric,
    PrecisionH75Metric,
    PrecisionMetric,
    PrecisionT50Metric,
    RecallAvgMetric,
    RecallH25Metric,
    RecallH50Metric,
    RecallH75Metric,
    RecallMetric,
    RecallT50Metric,
)
from xaibench.metrics.faithfulness.average_drop import AverageDrop
from xaibench.metrics.faithfulness.curves import Deletion, Insertion
from xaibench.metrics.faithfulness.road import (
    RoadFaithfulness,
    RoadFaithfulnessBlack,
    RoadFaithfulnessGaussian,
    RoadFaithfulnessUniform,
    RoadNecessity,
    RoadNecessityBlack,
    RoadNecessityGaussian,
    RoadNecessityUniform,
    RoadSufficiency,
    RoadSufficiencyBlack,
    RoadSufficiencyGaussian,
    RoadSufficiencyUniform,
)
from xaibench.metrics.other.sensitivity import MaxSensitivity
from xaibench.metrics.other.sparseness import Sparseness
from xaibench.metrics.sanity.randomisation import ModelRandomisation
from xaibench.plugins.hookspecs import hookimpl

METRICS: list[type[Metric]] = [
    # alignment (DESIGN 2): top-k matched, fixed threshold, threshold-averaged, human levels
    IouMetric,
    PrecisionMetric,
    RecallMetric,
    F1Metric,
    IouT50Metric,
    PrecisionT50Metric,
    RecallT50Metric,
    F1T50Metric,
    IouAvgMetric,
    PrecisionAvgMetric,
    RecallAvgMetric,
    F1AvgMetric,
    IouH25Metric,
    PrecisionH25Metric,
    RecallH25Metric,
    F1H25Metric,
    IouH50Metric,
    PrecisionH50Metric,
    RecallH50Metric,
    F1H50Metric,
    IouH75Metric,
    PrecisionH75Metric,
    RecallH75Metric,
    F1H75Metric,
    PointingGameMetric,
    MassAccuracyMetric,
    MaeMetric,
    FpMaeMetric,
    FnMaeMetric,
    # faithfulness (DESIGN 3 and 4)
    Deletion,
    Insertion,
    RoadSufficiency,
    RoadNecessity,
    RoadFaithfulness,
    RoadSufficiencyBlack,
    RoadNecessityBlack,
    RoadFaithfulnessBlack,
    RoadSufficiencyUniform,
    RoadNecessityUniform,
    RoadFaithfulnessUniform,
    RoadSufficiencyGaussian,
    RoadNecessityGaussian,
    RoadFaithfulnessGaussian,
    AverageDrop,
    # other axes (not ranked)
    MaxSensitivity,
    Sparseness,
    # sanity (DESIGN 4b; never ranked, flagged)
    ModelRandomisation,
]
"""Every built-in metric class outside the perceptual family, one per DESIGN 8 id."""


@hookimpl
def register_metrics(register: Register) -> None:
    for cls in METRICS:
        register(cls)
