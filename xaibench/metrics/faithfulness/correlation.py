"""Faithfulness correlation (Bhatt et al. 2020, DESIGN 3b): how well the attribution mass of
random pixel subsets predicts the probability drop when those pixels are removed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import torch

from xaibench.api import MetricCost, MetricOutput
from xaibench.device_random import stream_key, subset_masks
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
from xaibench.metrics.faithfulness.perturbation import float64_device
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
    value_range = (-1.0, 1.0)
    cost = MetricCost(forward_passes="nr_runs + 1")
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

        # every subset crosses to the device in one copy, before the forwards start
        on_device = (
            dict(zip(todo, torch.from_numpy(np.stack(list(todo.values()))).to(ctx.device), strict=True)) if todo else {}
        )

        def build(b: int, start: int, stop: int) -> torch.Tensor:
            index = on_device[b][start:stop]
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


class SensitivityN(FieldFaithfulnessMetric):
    """Sensitivity-n (Ancona et al. 2018): for each subset size n in ``sizes`` values up to
    ``n_max_percentage`` of the pixels (``floor(H*W * n_max_percentage * i / sizes)``, i = 1..sizes),
    draw ``nr_runs`` random subsets of n pixels (seeded by ``(seed, sample id, n)``, drawn on the
    model's device: :mod:`xaibench.device_random`), remove them
    (baseline ``zeros``: the dataset mean, all channels) and take the Pearson correlation between the
    subsets' attribution sums and the probability drops; the value is the mean of those correlations
    over n (the curve is in ``curves``), in [-1, 1]. Higher is better; n/a where no size gives a
    defined correlation.

    The paper reads the output before the softmax; this metric reads p(target), like every
    faithfulness metric here (DESIGN 3). Quantus 0.6's ``SensitivityN`` removes pixels cumulatively
    in the map's order and correlates across the samples of a batch, one value per n, not per sample
    (``docs/metrics.md``). Parameters: ``sizes`` 10, ``nr_runs`` 20, ``n_max_percentage`` 0.8
    (Quantus's), ``baseline`` (``zeros``), ``abs`` False.
    """

    name = "sensitivity_n"
    direction = "higher"
    unit = "mean Pearson correlation over subset sizes, in [-1, 1]"
    value_range = (-1.0, 1.0)
    cost = MetricCost(forward_passes="sizes * nr_runs + 1")
    description = (
        "Sensitivity-n (Ancona 2018): Pearson correlation between random subsets' attribution sums and the "
        "probability drop when they are removed, averaged over subset sizes, in [-1, 1]. Higher is better."
    )
    default_params: ClassVar[Mapping[str, Any]] = {
        "sizes": 10,
        "nr_runs": 20,
        "n_max_percentage": 0.8,
        "baseline": "zeros",
        "abs": False,
    }
    param_specs: ClassVar[Mapping[str, Param]] = {
        "sizes": Param(int, low=1),
        "nr_runs": Param(int, low=2),
        "n_max_percentage": Param(float, low=0.0, high=1.0),
        "baseline": Param(str, choices=BASELINES),
        "abs": Param(bool),
    }

    version = "1.1.0"

    def masks(self, ctx: FaithfulnessBatch, b: int, size: int, runs: range) -> torch.Tensor:
        """``(len(runs), H*W)`` bool on the model's device: the random subsets of ``size`` pixels of
        sample ``b`` for the runs ``runs``, drawn from the stream ``(seed, sample id,
        "sensitivity_n/subsets/<size>")`` (:func:`xaibench.device_random.subset_masks`)."""
        key = stream_key(ctx.seed, ctx.ids[b], f"sensitivity_n/subsets/{size}")
        return subset_masks(key, runs, ctx.pixels, size, ctx.device)

    def score_batch(self, ctx: FaithfulnessBatch) -> MetricOutput:
        values, reasons, curves = unscored(len(ctx.ids))
        runs = int(self.params["nr_runs"])
        sizes = ff.subset_sizes(ctx.pixels, int(self.params["sizes"]), float(self.params["n_max_percentage"]))
        fill = fill_value(ctx, self.params["baseline"])
        valid = ctx.scorable
        p0 = ctx.clean_probabilities() if valid else np.zeros(0)
        home = float64_device(ctx.device)
        flat = torch.from_numpy(ctx.saliency.reshape(len(ctx.ids), -1)).to(home)
        maps = flat.abs() if self.params["abs"] else flat
        summed: dict[int, dict[int, torch.Tensor]] = {b: {} for b in valid}  # attribution sums, by first image

        def build(b: int, start: int, stop: int) -> torch.Tensor:
            parts = []
            for i in range(start // runs, -(-stop // runs)):  # image j: size j // runs, run j % runs
                first, last = max(start, i * runs) - i * runs, min(stop, (i + 1) * runs) - i * runs
                parts.append(self.masks(ctx, b, int(sizes[i]), range(first, last)))
            masks = parts[0] if len(parts) == 1 else torch.cat(parts)
            summed[b][start] = masks.to(home, torch.float64) @ maps[b]
            return compose(ctx.device_inputs[b], masks, fill)

        scored = score_steps(ctx, {b: len(sizes) * runs for b in valid}, build)
        sums: dict[int, np.ndarray] = {}
        if valid:  # one copy to the host
            rows = torch.stack([torch.cat([part for _, part in sorted(summed[b].items())]) for b in valid])
            sums = dict(zip(valid, rows.cpu().numpy().reshape(len(valid), len(sizes), runs), strict=True))
        for b in range(len(ctx.ids)):
            if ctx.valid[b]:
                reasons[b] = ctx.valid[b]
                continue
            drops = p0[b] - scored[b].reshape(len(sizes), runs)
            r = ff.pearson_rows(sums[b], drops)
            curves[b] = {"n": sizes.tolist(), "correlation": [None if np.isnan(v) else float(v) for v in r]}
            if np.isnan(r).all():
                reasons[b] = "attribution sums or probability drops constant at every n: correlation undefined"
            else:
                values[b] = float(np.nanmean(r))
        return MetricOutput(values=values, reasons=reasons, curves=curves)
