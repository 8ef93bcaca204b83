"""Faithfulness correlation (Bhatt et al. 2020, DESIGN 3b): how well the attribution mass of
random pixel subsets predicts the probability drop when those pixels are removed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import torch

from xaibench.api import MetricOutput
from xaibench.metrics.faithfulness import field_formulas as ff
from xaibench.metrics.faithfulness.base import unscored
from xaibench.metrics.faithfulness.context import FaithfulnessBatch
from xaibench.metrics.faithfulness.field_base import (
    BASELINES,
    FieldFaithfulnessMetric,
    attribution,
    compose,
    fill_value,
    score_steps,
)
from xaibench.params import Param
from xaibench.seeds import sample_rng


class FaithfulnessCorrelation(FieldFaithfulnessMetric):
    """Faithfulness correlation (Bhatt et al. 2020): ``nr_runs`` times, draw ``subset_size`` distinct
    pixels uniformly (seeded by ``(seed, sample id)``), replace them by the baseline (``zeros``: the
    dataset mean, all channels) and record the drop p(x) - p(x_S); the value is the Pearson
    correlation between the subsets' attribution sums and their drops, in [-1, 1]. Higher is better;
    n/a where either series is constant or the subset is larger than the image.

    Parameters: Quantus's defaults ``nr_runs`` = 100, ``subset_size`` = 224; ``baseline``
    (``zeros``); ``abs`` (False).
    """

    name = "faithfulness_correlation"
    direction = "higher"
    unit = "Pearson correlation, in [-1, 1]"
    description = (
        "Faithfulness correlation (Bhatt 2020): Pearson correlation between the attribution sum of random pixel "
        "subsets and the probability drop when they are removed, in [-1, 1]. Higher is better."
    )
    default_params: ClassVar[Mapping[str, Any]] = {
        "nr_runs": 100,
        "subset_size": 224,
        "baseline": "zeros",
        "abs": False,
    }
    param_specs: ClassVar[Mapping[str, Param]] = {
        "nr_runs": Param(int, low=2),
        "subset_size": Param(int, low=1),
        "baseline": Param(str, choices=BASELINES),
        "abs": Param(bool),
    }

    def subsets(self, ctx: FaithfulnessBatch, b: int) -> np.ndarray:
        """``(nr_runs, subset_size)`` pixel indices of sample ``b`` (seeded per sample)."""
        rng = sample_rng(ctx.seed, ctx.ids[b], "faithfulness_correlation/subsets")
        return ff.random_subsets(rng, ctx.pixels, int(self.params["subset_size"]), int(self.params["nr_runs"]))

    def score_batch(self, ctx: FaithfulnessBatch) -> MetricOutput:
        values, reasons, curves = unscored(len(ctx.ids))
        n = ctx.pixels
        size = int(self.params["subset_size"])
        runs = int(self.params["nr_runs"])
        fill = fill_value(ctx, self.params["baseline"])
        todo: dict[int, np.ndarray] = {}
        for b in range(len(ctx.ids)):
            if ctx.valid[b]:
                reasons[b] = ctx.valid[b]
            elif size > n:
                reasons[b] = f"subset_size {size} exceeds the {n} pixels of the input"
            else:
                todo[b] = self.subsets(ctx, b)
        p0 = ctx.clean_probabilities() if todo else np.zeros(0)

        def build(b: int, start: int, stop: int) -> torch.Tensor:
            index = torch.from_numpy(todo[b][start:stop]).to(ctx.device)
            masks = torch.zeros(stop - start, n, dtype=torch.bool, device=ctx.device)
            masks.scatter_(1, index, True)
            return compose(ctx.device_inputs[b], masks, fill)

        scored = score_steps(ctx, {b: runs for b in todo}, build)
        for b, subsets in todo.items():
            flat = attribution(ctx, b, bool(self.params["abs"]))
            sums = flat[subsets].sum(axis=1)
            drops = p0[b] - scored[b]
            r = ff.pearson_rows(sums[None], drops[None])[0]
            curves[b] = {"drop": drops.tolist(), "attribution": sums.tolist()}
            if np.isnan(r):
                reasons[b] = "attribution sums or probability drops constant: correlation undefined"
            values[b] = r
        return MetricOutput(values=values, reasons=reasons, curves=curves)
