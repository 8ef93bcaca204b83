"""Built-in metrics (alignment, faithfulness, ground truth, the other axes and sanity), registered
through the same hook a third-party plugin implements. The perceptual family registers from
``xaibench.pasta``.

Metric kinds with variants (alignment's binary scores and errors, ROAD) list their variants in
their own module's table; this module only puts the families in order."""

from __future__ import annotations

from xaibench.api import Metric, Register
from xaibench.metrics.alignment.metrics import ALIGNMENT_METRICS
from xaibench.metrics.faithfulness.average_drop import AverageDrop
from xaibench.metrics.faithfulness.curves import Deletion, Insertion
from xaibench.metrics.faithfulness.eraser import EraserComprehensiveness, EraserSufficiency
from xaibench.metrics.faithfulness.field import FIELD_FAITHFULNESS_METRICS
from xaibench.metrics.faithfulness.road import ROAD_METRICS
from xaibench.metrics.ground_truth.metrics import GROUND_TRUTH_METRICS
from xaibench.metrics.other.axiomatic import InputInvariance
from xaibench.metrics.other.field import FIELD_OTHER_METRICS
from xaibench.metrics.other.sparseness import Sparseness
from xaibench.metrics.robustness import ROBUSTNESS_METRICS
from xaibench.metrics.sanity.field import FIELD_SANITY_METRICS
from xaibench.metrics.sanity.randomisation import ModelRandomisation
from xaibench.plugins.hookspecs import hookimpl

METRICS: list[type[Metric]] = [
    # alignment (DESIGN 2): top-k matched, fixed threshold, threshold-averaged, human levels, pointing game,
    # mass accuracy, errors against M
    *ALIGNMENT_METRICS,
    # faithfulness (DESIGN 3 and 4)
    Deletion,
    Insertion,
    EraserComprehensiveness,
    EraserSufficiency,
    *ROAD_METRICS,
    AverageDrop,
    *FIELD_FAITHFULNESS_METRICS,
    # faithfulness with a known answer (DESIGN 11): mass inside A*, pointing, rank correlation, sign agreement
    *GROUND_TRUTH_METRICS,
    # robustness (DESIGN 3b)
    *ROBUSTNESS_METRICS,
    # other axes (not ranked)
    Sparseness,
    *FIELD_OTHER_METRICS,
    InputInvariance,  # re-runs the explainer on a shifted model (its worker rebuilds it)
    # sanity (DESIGN 4b; never ranked, flagged)
    ModelRandomisation,
    *FIELD_SANITY_METRICS,
]
"""Every built-in metric class outside the perceptual family, one per DESIGN 8 id."""


@hookimpl
def register_metrics(register: Register) -> None:
    for cls in METRICS:
        register(cls)
