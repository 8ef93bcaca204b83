"""The base class of the faithfulness family (DESIGN 3 and 4; ids of DESIGN 8)."""

from __future__ import annotations

from typing import Any

import numpy as np

from xaibench.api import Metric, MetricInput, MetricOutput
from xaibench.metrics.faithfulness.context import FaithfulnessBatch, faithfulness_batch


class FaithfulnessMetric(Metric):
    """A metric that perturbs the input and reads the model's target-class probability.

    Subclasses implement :meth:`score_batch`; this class builds (or reuses) the batch's
    :class:`~xaibench.metrics.faithfulness.context.FaithfulnessBatch`, answers n/a without a
    saliency map or a model, and counts the images the subclass forwarded.
    """

    family = "faithfulness"
    needs = ("model",)
    licence = "Apache-2.0"
    version = "1.0.0"

    def score(self, batch: MetricInput) -> MetricOutput:
        ctx = faithfulness_batch(batch)
        if isinstance(ctx, str):
            return MetricOutput.not_applicable(len(batch.samples), ctx)
        before = ctx.forwarded()
        out = self.score_batch(ctx)
        out.forward_passes = ctx.forwarded() - before
        return out

    def score_batch(self, ctx: FaithfulnessBatch) -> MetricOutput:
        raise NotImplementedError


def unscored(n: int) -> tuple[np.ndarray, list[str | None], list[dict[str, Any] | None]]:
    """Values (NaN), reasons and curves (``None``) for ``n`` samples, filled in by the metric."""
    return np.full(n, np.nan), [None] * n, [None] * n
