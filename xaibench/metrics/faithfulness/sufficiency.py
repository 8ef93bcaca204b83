"""Sufficiency (Dasgupta, Frost & Moshkovitz 2022, DESIGN 3b): do samples with similar explanations
get the same prediction?"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from xaibench.api import MetricCost, MetricOutput
from xaibench.metrics.faithfulness import field_formulas as ff
from xaibench.metrics.faithfulness.base import unscored
from xaibench.metrics.faithfulness.context import OWNER, FaithfulnessBatch
from xaibench.metrics.faithfulness.field_base import FieldFaithfulnessMetric
from xaibench.params import Param


class Sufficiency(FieldFaithfulnessMetric):
    """Sufficiency (Dasgupta et al. 2022): a sample's explanation "applies to" another sample of the
    batch when the standardised Euclidean distance between their maps (|map| when ``abs``, each map
    divided by its largest |value|), divided by the largest such distance in the batch, is at most
    ``threshold``; local sufficiency is the fraction of those other samples that the model predicts
    as this one (argmax class). In [0, 1]; higher is better.

    A neighbourhood-based metric: a sample's value depends on the other samples of its batch (the
    runner's batch), which Quantus takes as its batch too. A sample whose explanation applies to no
    other sample of the batch scores 0, as in Quantus (the paper leaves it undefined; its curve says
    ``"neighbours": 0``); n/a only where the batch has fewer than two valid samples.
    Parameters: Quantus's defaults ``threshold`` 0.6 and ``abs`` True. Forward passes: one per sample
    (its predicted class).
    """

    name = "sufficiency"
    version = "1.1.0"  # 1.1: no neighbour scores 0 (Quantus), not n/a
    direction = "higher"
    unit = "fraction of explanation neighbours with the same prediction, in [0, 1]"
    value_range = (0.0, 1.0)
    cost = MetricCost(forward_passes=1)
    description = (
        "Sufficiency (Dasgupta 2022): fraction of the batch's samples with a similar explanation (normalised "
        "standardised distance <= threshold) that get the same predicted class, in [0, 1]. Higher is better."
    )
    default_params: ClassVar[Mapping[str, Any]] = {"threshold": 0.6, "abs": True}
    param_specs: ClassVar[Mapping[str, Param]] = {"threshold": Param(float, low=0.0, high=1.0), "abs": Param(bool)}

    def predicted(self, ctx: FaithfulnessBatch) -> np.ndarray:
        """The model's argmax class of every clean input, memoised per sample."""
        keys = [(OWNER, "predicted", sid) for sid in ctx.ids]
        missing = [i for i, k in enumerate(keys) if k not in ctx.memo]
        if missing:
            classes = ctx.forward(ctx.inputs[missing].to(ctx.device)).argmax(dim=1).tolist()  # one copy
            for row, i in enumerate(missing):
                ctx.memo.put(keys[i], int(classes[row]))
        return np.array([ctx.memo.lookup(k) for k in keys])

    def score_batch(self, ctx: FaithfulnessBatch) -> MetricOutput:
        values, reasons, curves = unscored(len(ctx.ids))
        valid = ctx.scorable
        for b in range(len(ctx.ids)):
            reasons[b] = ctx.valid[b]
        if len(valid) < 2:
            for b in valid:
                reasons[b] = "needs at least two samples with valid maps in the batch"
            return MetricOutput(values=values, reasons=reasons, curves=curves)
        maps = ctx.saliency[valid].reshape(len(valid), -1)
        maps = np.abs(maps) if self.params["abs"] else maps
        top = np.abs(maps).max(axis=1, keepdims=True)
        maps = maps / np.where(top > 0, top, 1.0)
        predicted = self.predicted(ctx)[valid]
        distances = ff.standardised_distances(maps)
        threshold = float(self.params["threshold"])
        local = ff.local_sufficiency(distances, predicted, threshold)
        neighbours = ff.neighbours(distances, threshold).sum(axis=1)
        for row, b in enumerate(valid):
            values[b] = local[row]
            curves[b] = {"predicted": int(predicted[row]), "batch": len(valid), "neighbours": int(neighbours[row])}
        return MetricOutput(values=values, reasons=reasons, curves=curves)
