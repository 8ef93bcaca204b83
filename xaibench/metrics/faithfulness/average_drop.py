"""Average drop % (Chattopadhay et al. 2018): how much p(target) falls when the input is
multiplied by the normalised map."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from xaibench.api import MetricCost, MetricOutput
from xaibench.metrics.faithfulness import formulas as fm
from xaibench.metrics.faithfulness.base import FaithfulnessMetric, unscored
from xaibench.metrics.faithfulness.context import BatchedScorer, FaithfulnessBatch
from xaibench.metrics.normalise import normalise_saliency


class AverageDrop(FaithfulnessMetric):
    """Average drop % (Chattopadhay et al. 2018): max(0, p(x) - p(x * E)) / p(x) x 100 with E the
    normalised map (positive part, min-max to [0, 1]) multiplying the normalised input (masked-out
    regions tend to the dataset mean). Percent, lower is better; n/a where p(x) = 0."""

    name = "average_drop"
    direction = "lower"
    unit = "percent"
    value_range = (0.0, 100.0)
    cost = MetricCost(forward_passes=2)  # the clean image and the masked one
    description = (
        "Average drop: max(0, p(x) - p(x * E)) / p(x) x 100 with E the min-max normalised positive map "
        "multiplying the normalised input; percent, lower is better."
    )

    def score_batch(self, ctx: FaithfulnessBatch) -> MetricOutput:
        p0 = ctx.clean_probabilities()
        values, reasons, curves = unscored(len(ctx.ids))
        extras: list[dict[str, Any] | None] = [None] * len(ctx.ids)
        scorer = BatchedScorer(ctx)
        normalised = normalise_saliency(ctx.saliency)
        for b in range(len(ctx.ids)):
            if ctx.valid[b]:
                reasons[b] = ctx.valid[b]
                continue
            extras[b] = {"degenerate": bool(normalised.degenerate[b])}
            emap = torch.from_numpy(normalised.maps[b]).float()
            scorer.add(b, (ctx.inputs[b] * emap[None])[None], int(ctx.targets[b]))
        scored = scorer.finish()
        for b, p in scored.items():
            values[b] = float(fm.average_drop(p0[b], p[0]))
            if np.isnan(values[b]):
                reasons[b] = "p(x) is 0: average drop undefined"
            curves[b] = {"p_clean": float(p0[b]), "p_masked": float(p[0])}
        return MetricOutput(values=values, reasons=reasons, curves=curves, extras=extras)
