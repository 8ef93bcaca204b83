"""The alignment metrics (DESIGN 2 and 8): explanation vs human ground truth, one class per id.

Each computation family has a base class (top-k matched binarisation, fixed threshold,
threshold-averaged, human levels, error against M); a metric names the score it reads with
``result``. Metrics whose :meth:`AlignmentMetric.computation` is equal share one result per batch
through :class:`~xaibench.metrics.alignment.batch.AlignmentBatch` (so ``iou``, ``precision``,
``recall`` and ``f1`` cost one top-k pass together). Per-sample n/a reasons are listed in
:mod:`xaibench.metrics.alignment.batch`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from xaibench.api import Metric, MetricInput, MetricOutput
from xaibench.metrics.alignment import formulas as al
from xaibench.metrics.alignment.batch import AlignmentBatch, Computation, Group
from xaibench.params import Param


class AlignmentMetric(Metric):
    """Base of the alignment metrics: ``result`` names the score read from the shared
    computation, ``extra_fields`` the per-sample extras copied into the output."""

    family = "alignment"
    version = "1.0.0"
    licence = "Apache-2.0"
    needs = ("mask",)
    unit = "fraction in [0, 1]"
    result: ClassVar[str] = ""
    extra_fields: ClassVar[tuple[str, ...]] = ()

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


# ----------------------------------------------------------------------------- computation families


class TopKAlignment(AlignmentMetric):
    """Binary scores of B = the top-k pixels of E (k = |A|, ties by pixel index) vs the mask A."""

    def computation(self) -> Computation:
        return ("topk",)

    def compute(self, group: Group) -> dict[str, al.Scores]:
        return al.topk_scores(group.E, group.A, group.sorted_desc)


class ThresholdAlignment(AlignmentMetric):
    """Binary scores of B = E >= ``theta`` (in [0, 1], default 0.5) vs the mask A."""

    default_params: ClassVar[Mapping[str, Any]] = {"theta": 0.5}
    param_specs: ClassVar[Mapping[str, Param]] = {"theta": Param(float, low=0.0, high=1.0)}

    def computation(self) -> Computation:
        return ("threshold", float(self.params["theta"]))

    def compute(self, group: Group) -> dict[str, al.Scores]:
        return al.threshold_scores(group.E, group.A, float(self.params["theta"]))


class AveragedAlignment(AlignmentMetric):
    """Binary scores of B = E >= theta vs the mask A, averaged over theta = 0.05, ..., 0.95."""

    def computation(self) -> Computation:
        return ("average",)

    def compute(self, group: Group) -> dict[str, al.Scores]:
        return al.threshold_averaged_scores(group.E, group.A)


class HumanLevelAlignment(AlignmentMetric):
    """Binary scores of the top-k pixels of E vs the human level A = M >= ``tau`` (in [0, 1]);
    needs multi-level ground truth."""

    needs = ("levels",)
    param_specs: ClassVar[Mapping[str, Param]] = {"tau": Param(float, low=0.0, high=1.0)}

    def computation(self) -> Computation:
        return ("human", float(self.params["tau"]))

    def compute(self, group: Group) -> dict[str, al.Scores]:
        return al.human_level_scores(group.E, group.M, float(self.params["tau"]), group.sorted_desc)


class ErrorAlignment(AlignmentMetric):
    """Mean absolute errors between E and the multi-level map M. Lower is better."""

    direction = "lower"
    unit = "mean abs. difference in [0, 1]"

    def computation(self) -> Computation:
        return ("mae",)

    def compute(self, group: Group) -> dict[str, al.Scores]:
        return al.mae_scores(group.E, group.M)


# ----------------------------------------------------------------------------- top-k matched


class IouMetric(TopKAlignment):
    """IoU |B & A| / |B | A|, top-k matched. Fraction in [0, 1], higher is better; ranked."""

    name = "iou"
    result = "iou"
    ranking = True
    description = (
        "intersection over union |B & A| / |B | A| of the normalised saliency map vs the ground-truth mask, "
        "top-k matched binarisation (k = |A|, ties by pixel index) (higher is better; fraction in [0, 1])."
    )


class PrecisionMetric(TopKAlignment):
    """Precision |B & A| / |B|, top-k matched. Fraction in [0, 1], higher is better."""

    name = "precision"
    result = "precision"
    description = (
        "precision |B & A| / |B| of the normalised saliency map vs the ground-truth mask, top-k matched "
        "binarisation (k = |A|, ties by pixel index) (higher is better; fraction in [0, 1])."
    )


class RecallMetric(TopKAlignment):
    """Recall |B & A| / |A|, top-k matched. Fraction in [0, 1], higher is better."""

    name = "recall"
    result = "recall"
    description = (
        "recall |B & A| / |A| of the normalised saliency map vs the ground-truth mask, top-k matched "
        "binarisation (k = |A|, ties by pixel index) (higher is better; fraction in [0, 1])."
    )


class F1Metric(TopKAlignment):
    """F1 of precision and recall, top-k matched. Fraction in [0, 1], higher is better."""

    name = "f1"
    result = "f1"
    description = (
        "F1, harmonic mean of precision and recall of the normalised saliency map vs the ground-truth mask, "
        "top-k matched binarisation (k = |A|, ties by pixel index) (higher is better; fraction in [0, 1])."
    )


# ----------------------------------------------------------------------------- fixed threshold


class IouT50Metric(ThresholdAlignment):
    """IoU at B = E >= 0.5. Fraction in [0, 1], higher is better."""

    name = "iou_t50"
    result = "iou"
    description = (
        "intersection over union |B & A| / |B | A| of the normalised saliency map vs the ground-truth mask, "
        "fixed threshold B = E >= 0.5 (higher is better; fraction in [0, 1])."
    )


class PrecisionT50Metric(ThresholdAlignment):
    """Precision at B = E >= 0.5. Fraction in [0, 1], higher is better."""

    name = "precision_t50"
    result = "precision"
    description = (
        "precision |B & A| / |B| of the normalised saliency map vs the ground-truth mask, fixed threshold "
        "B = E >= 0.5 (higher is better; fraction in [0, 1])."
    )


class RecallT50Metric(ThresholdAlignment):
    """Recall at B = E >= 0.5. Fraction in [0, 1], higher is better."""

    name = "recall_t50"
    result = "recall"
    description = (
        "recall |B & A| / |A| of the normalised saliency map vs the ground-truth mask, fixed threshold "
        "B = E >= 0.5 (higher is better; fraction in [0, 1])."
    )


class F1T50Metric(ThresholdAlignment):
    """F1 at B = E >= 0.5. Fraction in [0, 1], higher is better."""

    name = "f1_t50"
    result = "f1"
    description = (
        "F1, harmonic mean of precision and recall of the normalised saliency map vs the ground-truth mask, "
        "fixed threshold B = E >= 0.5 (higher is better; fraction in [0, 1])."
    )


# ----------------------------------------------------------------------------- threshold-averaged


class IouAvgMetric(AveragedAlignment):
    """IoU averaged over thresholds 0.05 .. 0.95. Fraction in [0, 1], higher is better."""

    name = "iou_avg"
    result = "iou"
    description = (
        "intersection over union |B & A| / |B | A| of the normalised saliency map vs the ground-truth mask, "
        "mean over thresholds theta = 0.05, ..., 0.95 (B = E >= theta) (higher is better; fraction in [0, 1])."
    )


class PrecisionAvgMetric(AveragedAlignment):
    """Precision averaged over thresholds 0.05 .. 0.95. Fraction in [0, 1], higher is better."""

    name = "precision_avg"
    result = "precision"
    description = (
        "precision |B & A| / |B| of the normalised saliency map vs the ground-truth mask, mean over thresholds "
        "theta = 0.05, ..., 0.95 (B = E >= theta) (higher is better; fraction in [0, 1])."
    )


class RecallAvgMetric(AveragedAlignment):
    """Recall averaged over thresholds 0.05 .. 0.95. Fraction in [0, 1], higher is better."""

    name = "recall_avg"
    result = "recall"
    description = (
        "recall |B & A| / |A| of the normalised saliency map vs the ground-truth mask, mean over thresholds "
        "theta = 0.05, ..., 0.95 (B = E >= theta) (higher is better; fraction in [0, 1])."
    )


class F1AvgMetric(AveragedAlignment):
    """F1 averaged over thresholds 0.05 .. 0.95. Fraction in [0, 1], higher is better."""

    name = "f1_avg"
    result = "f1"
    description = (
        "F1, harmonic mean of precision and recall of the normalised saliency map vs the ground-truth mask, "
        "mean over thresholds theta = 0.05, ..., 0.95 (B = E >= theta) (higher is better; fraction in [0, 1])."
    )


# ----------------------------------------------------------------------------- human levels


class IouH25Metric(HumanLevelAlignment):
    """IoU vs the human level M >= 0.25, top-k matched. Fraction in [0, 1], higher is better."""

    name = "iou_h25"
    result = "iou"
    default_params: ClassVar[Mapping[str, Any]] = {"tau": 0.25}
    description = (
        "intersection over union |B & A| / |B | A| of the normalised saliency map vs the ground-truth mask, "
        "human level A = M >= 0.25, top-k matched (higher is better; fraction in [0, 1])."
    )


class PrecisionH25Metric(HumanLevelAlignment):
    """Precision vs the human level M >= 0.25, top-k matched. Fraction in [0, 1], higher is better."""

    name = "precision_h25"
    result = "precision"
    default_params: ClassVar[Mapping[str, Any]] = {"tau": 0.25}
    description = (
        "precision |B & A| / |B| of the normalised saliency map vs the ground-truth mask, human level "
        "A = M >= 0.25, top-k matched (higher is better; fraction in [0, 1])."
    )


class RecallH25Metric(HumanLevelAlignment):
    """Recall vs the human level M >= 0.25, top-k matched. Fraction in [0, 1], higher is better."""

    name = "recall_h25"
    result = "recall"
    default_params: ClassVar[Mapping[str, Any]] = {"tau": 0.25}
    description = (
        "recall |B & A| / |A| of the normalised saliency map vs the ground-truth mask, human level "
        "A = M >= 0.25, top-k matched (higher is better; fraction in [0, 1])."
    )


class F1H25Metric(HumanLevelAlignment):
    """F1 vs the human level M >= 0.25, top-k matched. Fraction in [0, 1], higher is better."""

    name = "f1_h25"
    result = "f1"
    default_params: ClassVar[Mapping[str, Any]] = {"tau": 0.25}
    description = (
        "F1, harmonic mean of precision and recall of the normalised saliency map vs the ground-truth mask, "
        "human level A = M >= 0.25, top-k matched (higher is better; fraction in [0, 1])."
    )


class IouH50Metric(HumanLevelAlignment):
    """IoU vs the human level M >= 0.5, top-k matched. Fraction in [0, 1], higher is better."""

    name = "iou_h50"
    result = "iou"
    default_params: ClassVar[Mapping[str, Any]] = {"tau": 0.5}
    description = (
        "intersection over union |B & A| / |B | A| of the normalised saliency map vs the ground-truth mask, "
        "human level A = M >= 0.5, top-k matched (higher is better; fraction in [0, 1])."
    )


class PrecisionH50Metric(HumanLevelAlignment):
    """Precision vs the human level M >= 0.5, top-k matched. Fraction in [0, 1], higher is better."""

    name = "precision_h50"
    result = "precision"
    default_params: ClassVar[Mapping[str, Any]] = {"tau": 0.5}
    description = (
        "precision |B & A| / |B| of the normalised saliency map vs the ground-truth mask, human level "
        "A = M >= 0.5, top-k matched (higher is better; fraction in [0, 1])."
    )


class RecallH50Metric(HumanLevelAlignment):
    """Recall vs the human level M >= 0.5, top-k matched. Fraction in [0, 1], higher is better."""

    name = "recall_h50"
    result = "recall"
    default_params: ClassVar[Mapping[str, Any]] = {"tau": 0.5}
    description = (
        "recall |B & A| / |A| of the normalised saliency map vs the ground-truth mask, human level "
        "A = M >= 0.5, top-k matched (higher is better; fraction in [0, 1])."
    )


class F1H50Metric(HumanLevelAlignment):
    """F1 vs the human level M >= 0.5, top-k matched. Fraction in [0, 1], higher is better."""

    name = "f1_h50"
    result = "f1"
    default_params: ClassVar[Mapping[str, Any]] = {"tau": 0.5}
    description = (
        "F1, harmonic mean of precision and recall of the normalised saliency map vs the ground-truth mask, "
        "human level A = M >= 0.5, top-k matched (higher is better; fraction in [0, 1])."
    )


class IouH75Metric(HumanLevelAlignment):
    """IoU vs the human level M >= 0.75, top-k matched. Fraction in [0, 1], higher is better."""

    name = "iou_h75"
    result = "iou"
    default_params: ClassVar[Mapping[str, Any]] = {"tau": 0.75}
    description = (
        "intersection over union |B & A| / |B | A| of the normalised saliency map vs the ground-truth mask, "
        "human level A = M >= 0.75, top-k matched (higher is better; fraction in [0, 1])."
    )


class PrecisionH75Metric(HumanLevelAlignment):
    """Precision vs the human level M >= 0.75, top-k matched. Fraction in [0, 1], higher is better."""

    name = "precision_h75"
    result = "precision"
    default_params: ClassVar[Mapping[str, Any]] = {"tau": 0.75}
    description = (
        "precision |B & A| / |B| of the normalised saliency map vs the ground-truth mask, human level "
        "A = M >= 0.75, top-k matched (higher is better; fraction in [0, 1])."
    )


class RecallH75Metric(HumanLevelAlignment):
    """Recall vs the human level M >= 0.75, top-k matched. Fraction in [0, 1], higher is better."""

    name = "recall_h75"
    result = "recall"
    default_params: ClassVar[Mapping[str, Any]] = {"tau": 0.75}
    description = (
        "recall |B & A| / |A| of the normalised saliency map vs the ground-truth mask, human level "
        "A = M >= 0.75, top-k matched (higher is better; fraction in [0, 1])."
    )


class F1H75Metric(HumanLevelAlignment):
    """F1 vs the human level M >= 0.75, top-k matched. Fraction in [0, 1], higher is better."""

    name = "f1_h75"
    result = "f1"
    default_params: ClassVar[Mapping[str, Any]] = {"tau": 0.75}
    description = (
        "F1, harmonic mean of precision and recall of the normalised saliency map vs the ground-truth mask, "
        "human level A = M >= 0.75, top-k matched (higher is better; fraction in [0, 1])."
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


class MaeMetric(ErrorAlignment):
    """MAE |E - M| over all pixels. Mean abs. difference in [0, 1], lower is better; ranked."""

    name = "mae"
    result = "mae"
    ranking = True
    description = (
        "mean absolute error |E - M| over all pixels against the multi-level human map "
        "(lower is better; mean abs. difference in [0, 1])."
    )


class FpMaeMetric(ErrorAlignment):
    """MAE over pixels where M = 0 (correctness; Mohseni et al. 2021). Mean abs. difference in
    [0, 1], lower is better."""

    name = "fp_mae"
    result = "fp_mae"
    description = (
        "MAE over pixels where M = 0 (correctness; Mohseni et al. 2021) (lower is better; mean abs. difference "
        "in [0, 1])."
    )


class FnMaeMetric(ErrorAlignment):
    """MAE over pixels where M > 0 (completeness; Mohseni et al. 2021). Mean abs. difference in
    [0, 1], lower is better."""

    name = "fn_mae"
    result = "fn_mae"
    description = (
        "MAE over pixels where M > 0 (completeness; Mohseni et al. 2021) (lower is better; mean abs. difference "
        "in [0, 1])."
    )
