"""Random logit (Sixt et al. 2020), DESIGN 3b: reported, flagged, never ranked."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import torch

from xaibench.api import ExplainContext, Metric, MetricCost, MetricInput, MetricOutput
from xaibench.metrics.faithfulness.context import faithfulness_batch, resize_maps
from xaibench.metrics.other.axiomatic import forward_logits
from xaibench.metrics.sanity import mprt_formulas as fm
from xaibench.metrics.sanity.mprt import explain_maps
from xaibench.metrics.sanity.randomisation import CONCEPTS_REASON
from xaibench.params import Param
from xaibench.seeds import sample_rng


def other_classes(seed: int, ids: list[str], targets: np.ndarray, classes: int) -> np.ndarray:
    """For each sample a class other than its target, uniform over the ``classes - 1`` others,
    drawn from the sample's seeded generator (independent of the batch)."""
    out = np.empty(len(ids), dtype=np.int64)
    for b, (sid, target) in enumerate(zip(ids, targets, strict=True)):
        draw = int(sample_rng(seed, sid, "random_logit").integers(0, classes - 1))
        out[b] = draw + 1 if draw >= int(target) else draw
    return out


class RandomLogit(Metric):
    """Random logit (Sixt et al. 2020, "When explanations lie: why many modified BP attributions
    fail"): the explanation for the target class compared with the explanation, re-run, for a
    random other class (uniform over the others, seeded per sample). Value: the structural
    similarity (SSIM, scikit-image's defaults, a 7 x 7 window) of the two maps, each divided by
    its maximum |value|, ``data_range`` their joint span. In [-1, 1]; lower is better (an
    explanation that does not change with the class does not explain the class); a mean above
    0.5 is flagged "insensitive to the model"; never ranked.

    Quantus 0.6 ``RandomLogit`` computes the SSIM of the maps flattened to 1-D signals (a 7-pixel
    window along rows), not of the images (the paper's SSIM); the test shows the difference and
    the equality of the 1-D variant. Cost: one explanation per sample (and one forward pass per
    batch when the model does not name its classes)."""

    name = "random_logit"
    family = "sanity"
    direction = "lower"
    ranking = False
    default = False
    needs = ("model",)
    licence = "Apache-2.0"
    version = "1.0.0"
    unit = "SSIM in [-1, 1]"
    value_range = (-1.0, 1.0)
    cost = MetricCost(explanations=1)  # the map of another class
    insensitive_flag: ClassVar[tuple[str, float]] = ("above", 0.5)
    default_params: ClassVar[Mapping[str, Any]] = {"window": 7}
    param_specs: ClassVar[Mapping[str, Param]] = {"window": Param(int, low=3)}
    description = (
        "Random logit (Sixt 2020): SSIM of the map for the target and the map for a random other class "
        "(explainer re-run); lower is better, mean > 0.5 flagged 'insensitive to the model'; not ranked."
    )

    def validate_params(self, params: dict[str, Any]) -> dict[str, Any]:
        if int(params["window"]) % 2 == 0:
            raise ValueError(f"random_logit: window must be odd, got {params['window']}")
        return params

    def score(self, batch: MetricInput) -> MetricOutput:
        size = len(batch.samples)
        if batch.saliency is None:
            return MetricOutput.not_applicable(size, CONCEPTS_REASON)
        if batch.explainer is None:
            return MetricOutput.not_applicable(size, "needs the explainer to re-run it for another class")
        ctx = faithfulness_batch(batch)
        if isinstance(ctx, str):
            return MetricOutput.not_applicable(size, ctx)
        assert batch.model is not None
        before = ctx.forwarded()
        classes = len(batch.model.label_names)
        if classes == 0:
            classes = int(forward_logits(ctx.forward, ctx.inputs[:1].to(ctx.device)).shape[1])
        if classes < 2:
            return MetricOutput.not_applicable(size, "the model has a single class")
        others = other_classes(ctx.seed, ctx.ids, ctx.targets, classes)
        context = ExplainContext(samples=list(batch.samples))
        maps = explain_maps(
            batch.explainer, batch.model, ctx.inputs.to(ctx.device), torch.as_tensor(others), ctx.seed, context
        )
        if isinstance(maps, str):
            return MetricOutput.not_applicable(size, maps)
        maps = resize_maps(maps, tuple(ctx.saliency.shape[1:]))
        finite = np.isfinite(maps).reshape(size, -1).all(axis=1)
        window = int(self.params["window"])
        ssim = fm.ssim_rows(fm.max_normalised(ctx.saliency), fm.max_normalised(np.nan_to_num(maps)), win_size=window)
        values = np.full(size, np.nan)
        reasons: list[str | None] = [None] * size
        extras: list[dict[str, Any] | None] = [None] * size
        for b in range(size):
            if ctx.valid[b]:
                reasons[b] = ctx.valid[b]
            elif not finite[b]:
                reasons[b] = "the explainer returned NaN or infinite values for the other class"
            elif min(ctx.saliency.shape[1:]) < window:
                reasons[b] = f"maps smaller than the {window} x {window} SSIM window"
            elif np.isnan(ssim[b]):
                reasons[b] = "both maps constant: SSIM undefined"
            else:
                values[b] = float(ssim[b])
                extras[b] = {"other_class": int(others[b])}
        forwards = ctx.forwarded() - before
        return MetricOutput(values=values, reasons=reasons, extras=extras, forward_passes=size + forwards)
