"""Max-sensitivity (Yeh et al. 2019): how far the explanation moves under small input noise."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import torch

from xaibench.api import ExplainContext, Metric, MetricInput, MetricOutput
from xaibench.metrics.faithfulness.context import faithfulness_batch, resize_maps
from xaibench.metrics.other import formulas as fo
from xaibench.params import Param
from xaibench.seeds import sample_rng


class MaxSensitivity(Metric):
    """Max-sensitivity (Yeh et al. 2019): max over ``n`` inputs perturbed by uniform noise of radius ``radius`` in
    normalised space (seeded per sample) of ||E - E'||_2 / ||E||_2, re-running the explainer.
    Relative L2 distance, lower is better; not ranked."""

    name = "max_sensitivity"
    family = "other"
    direction = "lower"
    ranking = False
    needs = ("model",)
    licence = "Apache-2.0"
    version = "1.1.0"  # 1.1: the explainer gets the samples (per-sample seeds keyed by id, not batch position)
    unit = "relative L2 distance"
    default_params: ClassVar[Mapping[str, Any]] = {"n": 10, "radius": 0.02}
    param_specs: ClassVar[Mapping[str, Param]] = {"n": Param(int, low=1), "radius": Param(float, low=0.0)}
    description = (
        "Max-sensitivity: max over n = 10 uniformly perturbed inputs (radius 0.02, normalised space) of "
        "||E - E'|| / ||E||, explainer re-run; relative L2 distance, lower is better."
    )

    def score(self, batch: MetricInput) -> MetricOutput:
        size = len(batch.samples)
        if batch.explainer is None:
            return MetricOutput.not_applicable(size, "needs the explainer to re-run it on perturbed inputs")
        ctx = faithfulness_batch(batch)
        if isinstance(ctx, str):
            return MetricOutput.not_applicable(size, ctx)
        n, radius = int(self.params["n"]), float(self.params["radius"])
        shape = tuple(ctx.inputs.shape[1:])
        noise = np.stack(
            [
                sample_rng(ctx.seed, sid, "max_sensitivity").uniform(-radius, radius, (n, *shape)).astype(np.float32)
                for sid in ctx.ids
            ]
        )
        targets = torch.as_tensor(ctx.targets, dtype=torch.long)
        context = ExplainContext(samples=list(batch.samples))  # a sample's map must not depend on its batch
        ratios = np.full((size, n), np.nan)
        for j in range(n):
            perturbed = (ctx.inputs + torch.from_numpy(noise[:, j])).to(ctx.device)
            out = batch.explainer.explain(batch.model, perturbed, targets, seed=ctx.seed, context=context)
            if isinstance(out, list):
                return MetricOutput.not_applicable(size, "the explainer returned concept explanations")
            maps = out.detach().cpu().numpy() if isinstance(out, torch.Tensor) else np.asarray(out)
            maps = resize_maps(maps.astype(np.float64), ctx.saliency.shape[1:])
            for b in range(size):
                ratios[b, j] = fo.relative_distance(ctx.saliency[b], maps[b : b + 1])[0]
        values = np.full(size, np.nan)
        reasons: list[str | None] = [None] * size
        curves: list[dict[str, Any] | None] = [None] * size
        for b in range(size):
            if ctx.valid[b]:
                reasons[b] = ctx.valid[b]
            elif not np.linalg.norm(ctx.saliency[b]) > 0:
                reasons[b] = "all-zero saliency map: relative distance undefined"
            elif not np.isfinite(ratios[b]).all():
                reasons[b] = "the explainer returned NaN or infinite values on a perturbed input"
            else:
                values[b] = float(ratios[b].max())
                curves[b] = {"ratio": ratios[b].tolist()}
        return MetricOutput(values=values, reasons=reasons, curves=curves, forward_passes=size * n)
