"""The alignment metrics (DESIGN 2 and 8): explanation vs human ground truth, one class per metric
kind and a table of its variants.

The kinds: :class:`BinaryAlignment` (IoU, precision, recall and F1 of a binary map, one variant
per score and binarisation: top-k matched, fixed threshold, threshold-averaged, human levels),
:class:`PointingGameMetric`, :class:`MassAccuracyMetric` and :class:`ErrorAlignment` (errors
against M, one variant per error). Each variant of the tables :data:`BINARISATIONS`,
:data:`BINARY_SCORES` and :data:`ERRORS` is a subclass made by
:func:`~xaibench.metrics.variants.variant` (ids, versions and parameters as class data);
:data:`ALIGNMENT_METRICS` lists every metric in registration order. A metric names the score it
reads with ``result``. Metrics whose :meth:`AlignmentMetric.computation` is equal share one result
per batch through :class:`~xaibench.metrics.alignment.batch.AlignmentBatch` (so ``iou``,
``precision``, ``recall`` and ``f1`` cost one top-k pass together). Per-sample n/a reasons are
listed in :mod:`xaibench.metrics.alignment.batch`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from xaibench.api import Metric, MetricCost, MetricInput, MetricOutput
from xaibench.metrics.alignment import formulas as al
from xaibench.metrics.alignment.batch import AlignmentBatch, Computation, Group
from xaibench.metrics.variants import former_names, variant
from xaibench.params import Param

Method = Literal["topk", "threshold", "average", "human"]
"""How the binary scores make B (and A): top-k matched, fixed threshold, threshold-averaged, human level."""


class AlignmentMetric(Metric):
    """Base of the alignment metrics: ``result`` names the score read from the shared
    computation, ``extra_fields`` the per-sample extras copied into the output."""

    family = "alignment"
    version = "1.0.0"
    licence = "Apache-2.0"
    needs = ("mask",)
    modalities = ("image", "text")  # a token mask is a (1, L) mask (DESIGN 12)
    unit = "fraction in [0, 1]"
    value_range = (0.0, 1.0)  # every alignment score and error lies in [0, 1]
    cost = MetricCost()  # the map against the mask: no forward pass
    result: ClassVar[str] = ""
    extra_fields: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def describe(cls, summary: str) -> str:
        """A variant's description: ``summary`` followed by the kind's direction and unit."""
        return f"{summary} ({cls.direction} is better; {cls.unit})."

    def computation(self) -> Computation:
        """Names the shared computation and its parameters: equal tuples share one result."""
        raise NotImplementedError

    def compute(self, group: Group) -> dict[str, al.Scores]:
        """Every score of the computation for one group of same-sized samples."""
        raise NotImplementedError

    def score(self, batch: MetricInput) -> MetricOutput:
        ctx = AlignmentBatch.of(batch)
        needs_levels = "levels" in self.needs
        if not ctx.groups:
            return ctx.output(None, needs_levels=needs_levels)
        scores = ctx.results(self.computation(), self.compute)[self.result]
        return ctx.output(scores, needs_levels=needs_levels, extras=self.extra_fields)


# ----------------------------------------------------------------------------- binary scores


class BinaryAlignment(AlignmentMetric):
    """Binary scores (``result``: ``iou``, ``precision``, ``recall`` or ``f1``) of a binary map B
    vs a binary ground truth A; ``method`` says how B and A are made:

    - ``topk``: B = the top-k pixels of E (k = |A|, ties by pixel index), A = the mask;
    - ``threshold``: B = E >= ``theta`` (in [0, 1]), A = the mask;
    - ``average``: B = E >= theta vs the mask, scores averaged over theta = 0.05, ..., 0.95;
    - ``human``: the top-k pixels of E vs the human level A = M >= ``tau`` (in [0, 1]); needs
      multi-level ground truth.

    Fraction in [0, 1], higher is better.
    """

    method: ClassVar[Method] = "topk"

    def computation(self) -> Computation:
        match self.method:
            case "threshold":
                return ("threshold", float(self.params["theta"]))
            case "human":
                return ("human", float(self.params["tau"]))
            case _:
                return (self.method,)

    def compute(self, group: Group) -> dict[str, al.Scores]:
        match self.computation():
            case ("threshold", theta):
                return al.threshold_scores(group.E, group.A, theta)
            case ("human", tau):
                return al.human_level_scores(group.E, group.M, tau, group.sorted_desc)
            case ("average",):
                return al.threshold_averaged_scores(group.E, group.A)
            case _:
                return al.topk_scores(group.E, group.A, group.sorted_desc)


@dataclass(frozen=True)
class Binarisation:
    """One binarisation of the binary scores: the suffix of its ids, the ``method``, its
    parameters (``theta`` or ``tau``, each in [0, 1]) with their defaults, and the phrase that
    describes it."""

    suffix: str
    method: Method
    phrase: str
    params: Mapping[str, float] = field(default_factory=dict)


BINARISATIONS: tuple[Binarisation, ...] = (
    Binarisation("", "topk", "top-k matched binarisation (k = |A|, ties by pixel index)"),
    Binarisation("_t50", "threshold", "fixed threshold B = E >= 0.5", {"theta": 0.5}),
    Binarisation("_avg", "average", "mean over thresholds theta = 0.05, ..., 0.95 (B = E >= theta)"),
    Binarisation("_h25", "human", "human level A = M >= 0.25, top-k matched", {"tau": 0.25}),
    Binarisation("_h50", "human", "human level A = M >= 0.5, top-k matched", {"tau": 0.5}),
    Binarisation("_h75", "human", "human level A = M >= 0.75, top-k matched", {"tau": 0.75}),
)
"""Every binarisation, in registration order; each gives one variant per score."""

BINARY_SCORES: Mapping[str, str] = {
    "iou": "intersection over union |B & A| / |B | A|",
    "precision": "precision |B & A| / |B|",
    "recall": "recall |B & A| / |A|",
    "f1": "F1, harmonic mean of precision and recall",
}
"""Every binary score (the ``result``, also the id's stem) and the phrase that describes it."""

RANKED_BINARY = "iou"
"""The one ranked binary variant (DESIGN 8): IoU, top-k matched."""


def binary_variant(score: str, binarisation: Binarisation) -> type[BinaryAlignment]:
    """The metric ``<score><suffix>``: one score under one binarisation."""
    metric_id = score + binarisation.suffix
    summary = f"{BINARY_SCORES[score]} of the normalised saliency map vs the ground-truth mask, {binarisation.phrase}"
    return variant(
        BinaryAlignment,
        metric_id,
        suffix="Metric",
        result=score,
        method=binarisation.method,
        ranking=metric_id == RANKED_BINARY,
        needs=("levels",) if binarisation.method == "human" else ("mask",),
        default_params=dict(binarisation.params),
        param_specs={name: Param(float, low=0.0, high=1.0) for name in binarisation.params},
        description=BinaryAlignment.describe(summary),
    )


# ----------------------------------------------------------------------------- pointing game and mass


class PointingGameMetric(AlignmentMetric):
    """Pointing game (Zhang et al. 2018): 1 if the first maximum of E lies within ``tolerance``
    px (measured in a ``reference_size`` square frame) of the mask, else 0; the extras record
    tied maxima. Hit (0 or 1), mean = hit rate, higher is better; ranked."""

    name = "pointing_game"
    result = "pointing_game"
    ranking = True
    unit = "hit (0 or 1); mean = hit rate"
    extra_fields = ("tied_maxima",)
    default_params: ClassVar[Mapping[str, Any]] = {"tolerance": 15.0, "reference_size": 224}
    param_specs: ClassVar[Mapping[str, Param]] = {
        "tolerance": Param(float, low=0.0),
        "reference_size": Param(int, low=1),
    }
    description = (
        "1 if the first maximum-saliency pixel lies within 15 px (in the 224 x 224 frame) of the mask, else 0 "
        "(Zhang et al. 2018); the mean is the hit rate (higher is better; hit (0 or 1); mean = hit rate)."
    )

    def computation(self) -> Computation:
        return ("pointing", float(self.params["tolerance"]), int(self.params["reference_size"]))

    def compute(self, group: Group) -> dict[str, al.Scores]:
        tolerance, reference = float(self.params["tolerance"]), int(self.params["reference_size"])
        return {"pointing_game": al.pointing_game(group.E, group.A, tolerance, reference)}


class MassAccuracyMetric(AlignmentMetric):
    """Relevance mass accuracy (Arras et al.): share of the normalised saliency inside the mask.
    Fraction in [0, 1], higher is better; ranked."""

    name = "mass_accuracy"
    result = "mass_accuracy"
    ranking = True
    description = (
        "relevance mass accuracy: normalised saliency inside the mask / total (Arras et al.) "
        "(higher is better; fraction in [0, 1])."
    )

    def computation(self) -> Computation:
        return ("mass",)

    def compute(self, group: Group) -> dict[str, al.Scores]:
        return {"mass_accuracy": al.mass_accuracy(group.E, group.A)}


# ----------------------------------------------------------------------------- errors against M


class ErrorAlignment(AlignmentMetric):
    """Mean absolute errors between E and the multi-level map M (``result``: ``mae`` over all
    pixels, ``fp_mae`` where M = 0, ``fn_mae`` where M > 0). Mean abs. difference in [0, 1],
    lower is better."""

    direction = "lower"
    unit = "mean abs. difference in [0, 1]"

    def computation(self) -> Computation:
        return ("mae",)

    def compute(self, group: Group) -> dict[str, al.Scores]:
        return al.mae_scores(group.E, group.M)


ERRORS: Mapping[str, tuple[str, bool]] = {
    "mae": ("mean absolute error |E - M| over all pixels against the multi-level human map", True),
    "fp_mae": ("MAE over pixels where M = 0 (correctness; Mohseni et al. 2021)", False),
    "fn_mae": ("MAE over pixels where M > 0 (completeness; Mohseni et al. 2021)", False),
}
"""Every error variant: id (also the ``result``) -> (the phrase that describes it, ranked)."""


def error_variant(metric_id: str) -> type[ErrorAlignment]:
    """The error metric ``metric_id`` of :data:`ERRORS`."""
    summary, ranked = ERRORS[metric_id]
    return variant(
        ErrorAlignment,
        metric_id,
        suffix="Metric",
        result=metric_id,
        ranking=ranked,
        description=ErrorAlignment.describe(summary),
    )


# ----------------------------------------------------------------------------- every metric

ALIGNMENT_METRICS: tuple[type[AlignmentMetric], ...] = (
    *(binary_variant(score, b) for b in BINARISATIONS for score in BINARY_SCORES),
    PointingGameMetric,
    MassAccuracyMetric,
    *(error_variant(metric_id) for metric_id in ERRORS),
)
"""Every alignment metric, one class per id, in registration order."""

__getattr__ = former_names(__name__, ALIGNMENT_METRICS)
