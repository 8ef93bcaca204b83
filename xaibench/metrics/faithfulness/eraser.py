"""ERASER's comprehensiveness and sufficiency (DeYoung et al. 2020) on token sequences, as
ferret-xai defines them (DESIGN 12): AOPC over rationales of the top 1, 5, 10, 20 and 50 % of a
sample's tokens (:func:`~xaibench.metrics.faithfulness.formulas.eraser_rationales`).

A token is removed by replacing it with the padding token (zero in the
:class:`~xaibench.api.TextModel` input, the presence channel included); the real tokens are those
whose presence channel is 1. ``eraser_comprehensiveness``: the rationale removed, the drop
``p(x) - p(x without it)`` averaged, higher is better. ``eraser_sufficiency``: everything but the
rationale removed, ``p(x) - p(rationale only)`` averaged, lower is better. Text only.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch

from xaibench.api import MetricCost, MetricOutput
from xaibench.metrics.faithfulness import formulas as fm
from xaibench.metrics.faithfulness.base import FaithfulnessMetric, unscored
from xaibench.metrics.faithfulness.context import BatchedScorer, FaithfulnessBatch

__all__ = ["EraserComprehensiveness", "EraserSufficiency"]


class EraserMetric(FaithfulnessMetric):
    """Shared by the two ERASER metrics: ``keep_rationale`` says which tokens survive."""

    modalities: ClassVar[tuple[str, ...]] = ("text",)
    version = "1.0.0"
    unit = "mean drop of the target probability (AOPC), in [-1, 1]"
    value_range = (-1.0, 1.0)
    cost = MetricCost(forward_passes=len(fm.ERASER_FRACTIONS) + 1)  # at most: fractions may coincide
    keep_rationale: ClassVar[bool] = False
    empty: ClassVar[float] = 0.0

    def score_batch(self, ctx: FaithfulnessBatch) -> MetricOutput:
        values, reasons, curves = unscored(len(ctx.ids))
        for b in range(len(ctx.ids)):
            reasons[b] = ctx.valid[b]
        p0 = ctx.clean_probabilities()
        scorer = BatchedScorer(ctx, builders=0)
        plans: dict[int, list[np.ndarray]] = {}
        for b in ctx.scorable:
            present = np.flatnonzero(ctx.inputs[b, -1].reshape(-1).numpy() > 0)  # the real tokens
            rationales = fm.eraser_rationales(ctx.saliency[b].reshape(-1)[present])
            plans[b] = [present[r] for r in rationales]
            if not plans[b]:
                continue
            x = ctx.device_inputs[b]
            images = x.expand(len(plans[b]), *x.shape).clone()
            for i, tokens in enumerate(plans[b]):
                removed = np.setdiff1d(present, tokens) if self.keep_rationale else tokens
                images[i, :, :, torch.as_tensor(removed, dtype=torch.long, device=images.device)] = 0.0
            scorer.add(b, images, int(ctx.targets[b]))
        scored = scorer.finish()
        for b, rationales in plans.items():
            probs = scored.get(b, np.zeros(0))
            values[b] = fm.aopc(float(p0[b]), probs, self.empty)
            curves[b] = {"sizes": [int(r.size) for r in rationales], "probability": [float(p) for p in probs]}
        return MetricOutput(values=values, reasons=reasons, curves=curves)


class EraserComprehensiveness(EraserMetric):
    """ERASER comprehensiveness (DeYoung et al. 2020, as ferret-xai): the target probability's mean
    drop when the rationale (the top 1, 5, 10, 20, 50 % of tokens, positive scores only) is
    removed; 0 when no rationale applies. Higher is better."""

    name = "eraser_comprehensiveness"
    direction = "higher"
    ranking = True
    description = (
        "ERASER comprehensiveness (AOPC, as ferret-xai): mean drop of the target probability when the top "
        "1/5/10/20/50 % of tokens are removed (replaced by padding). Text only; higher is better."
    )


class EraserSufficiency(EraserMetric):
    """ERASER sufficiency (DeYoung et al. 2020, as ferret-xai): the target probability's mean drop
    when only the rationale is kept (every other token removed); 1 when no rationale applies.
    Lower is better."""

    name = "eraser_sufficiency"
    direction = "lower"
    ranking = True
    keep_rationale = True
    empty = 1.0
    description = (
        "ERASER sufficiency (AOPC, as ferret-xai): mean drop of the target probability when only the top "
        "1/5/10/20/50 % of tokens are kept (the rest replaced by padding). Text only; lower is better."
    )
