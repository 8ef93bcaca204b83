"""The field's step-wise faithfulness metrics (DESIGN 3b): pixel flipping (Bach et al. 2015),
faithfulness estimate (Alvarez-Melis & Jaakkola 2018), monotonicity (Arya et al. 2019) and
monotonicity correlation (Nguyen & Martinez 2020).

Each splits the pixels, in the order of the map, into steps of ``features_in_step =
ceil(H*W / steps)`` pixels (Quantus's parameter of that name; the last step may hold fewer), builds
one perturbed image per step (per step and draw for monotonicity correlation) on the model's device
and forwards them in batches across the samples. A pixel is perturbed in all its colour channels
(Quantus issue 75 perturbs single channel values when the map is broadcast over channels).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import torch

from xaibench.api import MetricCost, MetricOutput
from xaibench.device_random import stream_key, uniform
from xaibench.metrics.faithfulness import field_formulas as ff
from xaibench.metrics.faithfulness.base import unscored
from xaibench.metrics.faithfulness.context import FaithfulnessBatch
from xaibench.metrics.faithfulness.field_base import (
    BASELINES,
    FieldFaithfulnessMetric,
    attribution,
    compose,
    fill_value,
    orders_from_ranks,
    pixel_ranks,
    score_steps,
    step_masks,
)
from xaibench.metrics.faithfulness.perturbation import Order
from xaibench.params import Param


class _Stepwise(FieldFaithfulnessMetric):
    """Shared set-up: the step size and the pixel ranks of each valid sample, on the device."""

    order: ClassVar[Order] = "descending"

    def plan(self, ctx: FaithfulnessBatch) -> tuple[int, int, dict[int, torch.Tensor], list[str | None]]:
        """``(features_in_step, steps, {b: (H*W,) pixel ranks on the device}, reasons)`` for the batch."""
        n = ctx.pixels
        fis = ff.features_in_step(n, int(self.params["steps"]))
        reasons: list[str | None] = list(ctx.valid)
        valid = [b for b in range(len(ctx.ids)) if not reasons[b]]
        ranks = pixel_ranks(ctx, valid, bool(self.params["abs"]), self.order)
        return fis, ff.step_count(n, fis), dict(zip(valid, ranks, strict=True)), reasons

    def sums(self, ctx: FaithfulnessBatch, ranks: dict[int, torch.Tensor], fis: int) -> dict[int, np.ndarray]:
        """``{b: (1, steps)}`` attribution sums of each step (one copy of the ranks to the host)."""
        if not ranks:
            return {}
        orders = orders_from_ranks(torch.stack(list(ranks.values())))
        absolute = bool(self.params["abs"])
        return {
            b: ff.step_sums(attribution(ctx, b, absolute)[None], order[None], fis)
            for b, order in zip(ranks, orders, strict=True)
        }


class PixelFlipping(_Stepwise):
    """Pixel flipping (Bach et al. 2015): replace the pixels most-relevant-first, ``features_in_step =
    ceil(H*W / steps)`` more at each step, by the baseline (``zeros``: the dataset mean, DESIGN 3;
    ``black``: pixel value 0), and read p(target) after every step. The curve (``curves``) has
    ``ceil(H*W / features_in_step)`` points, the first after one step (Quantus's curve); the value
    is its trapezoid area over equally spaced points on [0, 1] (Quantus's ``calculate_auc``, ``np.trapz(curve, dx=1)``,
    divided by the number of points - 1), in [0, 1]. Lower is better.

    Parameters: ``steps`` (default 100; Quantus's default is one pixel per step, ``H*W`` forward
    passes), ``baseline`` (``zeros``), ``abs`` (order by |map|, default False as in Quantus).
    """

    name = "pixel_flipping"
    direction = "lower"
    unit = "area under p(target) over the flipped fraction, in [0, 1]"
    value_range = (0.0, 1.0)
    cost = MetricCost(forward_passes="min(steps, pixels)")
    description = (
        "Pixel flipping (Bach 2015): replace pixels most-relevant-first by the baseline in steps; area under "
        "the target-class probability curve, in [0, 1]. Lower is better."
    )
    default_params: ClassVar[Mapping[str, Any]] = {"steps": 100, "baseline": "zeros", "abs": False}
    param_specs: ClassVar[Mapping[str, Param]] = {
        "steps": Param(int, low=1),
        "baseline": Param(str, choices=BASELINES),
        "abs": Param(bool),
    }

    def score_batch(self, ctx: FaithfulnessBatch) -> MetricOutput:
        values, reasons, curves = unscored(len(ctx.ids))
        fis, k, ranks, why = self.plan(ctx)
        fill = fill_value(ctx, self.params["baseline"])

        def build(b: int, start: int, stop: int) -> torch.Tensor:
            steps = torch.arange(start, stop, device=ctx.device)
            return compose(ctx.device_inputs[b], step_masks(ranks[b], fis, steps, cumulative=True), fill)

        scored = score_steps(ctx, {b: k for b in ranks}, build)
        for b in range(len(ctx.ids)):
            reasons[b] = why[b]
            if b not in scored:
                continue
            curve = scored[b]
            curves[b] = {"probability": curve.tolist(), "features_in_step": fis}
            if curve.size < 2:
                reasons[b] = "one step only: steps must split the pixels in at least two steps"
                continue
            values[b] = float(ff.unit_auc(curve[None])[0])
        return MetricOutput(values=values, reasons=reasons, curves=curves)


class FaithfulnessEstimate(_Stepwise):
    """Faithfulness estimate (Alvarez-Melis & Jaakkola 2018): for each step of ``features_in_step =
    ceil(H*W / steps)`` pixels, most relevant first, remove that step's pixels alone (baseline
    ``zeros``: the dataset mean) and record the drop p(x) - p(x without them); the value is the
    Pearson correlation between the steps' attribution sums and their drops, in [-1, 1]. Higher is
    better; n/a where either series is constant.

    Parameters: ``steps`` (default 224: one row of a 224 px image per step; Quantus's default is one
    pixel per step), ``baseline`` (``zeros``), ``abs`` (default False, as Quantus).
    """

    name = "faithfulness_estimate"
    direction = "higher"
    unit = "Pearson correlation, in [-1, 1]"
    value_range = (-1.0, 1.0)
    cost = MetricCost(forward_passes="min(steps, pixels) + 1")
    description = (
        "Faithfulness estimate (Alvarez-Melis 2018): Pearson correlation between each pixel group's attribution "
        "sum and the probability drop when that group alone is removed, in [-1, 1]. Higher is better."
    )
    default_params: ClassVar[Mapping[str, Any]] = {"steps": 224, "baseline": "zeros", "abs": False}
    param_specs: ClassVar[Mapping[str, Param]] = PixelFlipping.param_specs

    def score_batch(self, ctx: FaithfulnessBatch) -> MetricOutput:
        values, reasons, curves = unscored(len(ctx.ids))
        fis, k, ranks, why = self.plan(ctx)
        fill = fill_value(ctx, self.params["baseline"])
        p0 = ctx.clean_probabilities()

        def build(b: int, start: int, stop: int) -> torch.Tensor:
            steps = torch.arange(start, stop, device=ctx.device)
            return compose(ctx.device_inputs[b], step_masks(ranks[b], fis, steps, cumulative=False), fill)

        scored = score_steps(ctx, {b: k for b in ranks}, build)
        step_sums = self.sums(ctx, ranks, fis)
        for b in range(len(ctx.ids)):
            reasons[b] = why[b]
            if b not in scored:
                continue
            sums = step_sums[b]
            drops = p0[b] - scored[b][None]
            r = ff.pearson_rows(sums, drops)[0]
            curves[b] = {"drop": drops[0].tolist(), "attribution": sums[0].tolist(), "features_in_step": fis}
            if np.isnan(r):
                reasons[b] = "attribution sums or probability drops constant: correlation undefined"
            values[b] = r
        return MetricOutput(values=values, reasons=reasons, curves=curves)


class Monotonicity(_Stepwise):
    """Monotonicity (Arya et al. 2019, AIX360's ``monotonicity_metric``): start from the baseline
    image (``zeros``: the dataset mean) and insert the original pixels in increasing order of
    attribution, ``features_in_step = ceil(H*W / steps)`` at a time; the value is 1 when p(target)
    never decreases from one step to the next, else 0. Higher is better (mean = fraction of
    monotonic samples).

    Parameters: ``steps`` (default 224; Quantus's default is one pixel per step), ``baseline``
    (``zeros``), ``abs`` (default True, as Quantus). Quantus 0.6's ``Monotonicity`` writes the
    baseline over the baseline image, never inserts a pixel, and so scores every map 1
    (``docs/metrics.md``).
    """

    name = "monotonicity"
    direction = "higher"
    unit = "1 if monotonic else 0"
    value_range = (0.0, 1.0)
    cost = MetricCost(forward_passes="min(steps, pixels)")
    order = "ascending"
    description = (
        "Monotonicity (Arya 2019): insert pixels into the baseline least-relevant-first; 1 when the target-class "
        "probability never decreases, else 0. Higher is better."
    )
    default_params: ClassVar[Mapping[str, Any]] = {"steps": 224, "baseline": "zeros", "abs": True}
    param_specs: ClassVar[Mapping[str, Param]] = PixelFlipping.param_specs

    def score_batch(self, ctx: FaithfulnessBatch) -> MetricOutput:
        values, reasons, curves = unscored(len(ctx.ids))
        fis, k, ranks, why = self.plan(ctx)
        start_image = fill_value(ctx, self.params["baseline"]).expand(ctx.inputs.shape[1:])

        def build(b: int, start: int, stop: int) -> torch.Tensor:
            steps = torch.arange(start, stop, device=ctx.device)
            masks = step_masks(ranks[b], fis, steps, cumulative=True)
            return compose(start_image, masks, ctx.device_inputs[b][None])

        scored = score_steps(ctx, {b: k for b in ranks}, build)
        for b in range(len(ctx.ids)):
            reasons[b] = why[b]
            if b not in scored:
                continue
            values[b] = float(ff.non_decreasing(scored[b][None])[0])
            curves[b] = {"probability": scored[b].tolist(), "features_in_step": fis}
        return MetricOutput(values=values, reasons=reasons, curves=curves)


class MonotonicityCorrelation(_Stepwise):
    """Monotonicity correlation (Nguyen & Martinez 2020): for each step of ``features_in_step =
    ceil(H*W / steps)`` pixels (ascending |attribution|), replace that step's pixels alone by uniform
    noise ``nr_samples`` times and take the variance of p(target) around p(x) relative to p(x)^2
    (``1 / p(x)^2`` replaced by 1 below ``eps``, as Quantus); the value is the Spearman correlation
    between the steps' attribution sums and those variances, in [-1, 1]. Higher is better; n/a where
    either series is constant.

    Noise: U(0, 1) in pixel space, normalised, drawn per pixel and channel, one field per draw and
    sample (seeded by ``(seed, sample id)``, drawn on the model's device: :mod:`xaibench.device_random`)
    used for every step. Parameters: ``steps`` (default 32),
    ``nr_samples`` (default 10; Quantus: one pixel per step, 100 draws: ``100 H*W`` forwards),
    ``eps`` (1e-5), ``abs`` (default True, as Quantus).
    """

    name = "monotonicity_correlation"
    direction = "higher"
    unit = "Spearman correlation, in [-1, 1]"
    value_range = (-1.0, 1.0)
    cost = MetricCost(forward_passes="min(steps, pixels) * nr_samples + 1")
    description = (
        "Monotonicity correlation (Nguyen 2020): Spearman correlation between pixel groups' |attribution| sums "
        "and the variance of the target-class probability when the group is noised, in [-1, 1]. Higher is better."
    )
    default_params: ClassVar[Mapping[str, Any]] = {"steps": 32, "nr_samples": 10, "eps": 1e-5, "abs": True}
    param_specs: ClassVar[Mapping[str, Param]] = {
        "steps": Param(int, low=1),
        "nr_samples": Param(int, low=1),
        "eps": Param(float, low=0.0),
        "abs": Param(bool),
    }
    order = "ascending"

    version = "1.1.0"

    def noise(self, ctx: FaithfulnessBatch, b: int) -> torch.Tensor:
        """``(nr_samples, C, H*W)`` normalised U(0, 1) pixel noise of sample ``b`` on the model's device:
        the stream ``(seed, sample id, "monotonicity_correlation/uniform")`` of
        :func:`xaibench.device_random.uniform`, draw by draw."""
        c, h, w = ctx.inputs.shape[1:]
        draws = int(self.params["nr_samples"])
        key = stream_key(ctx.seed, ctx.ids[b], "monotonicity_correlation/uniform")
        u = uniform(key, 0, draws * c * h * w, ctx.device).view(draws, c, h * w)
        for channel, (m, s) in enumerate(zip(ctx.mean, ctx.std, strict=True)):  # no tensor from the host
            u[:, channel].sub_(float(m)).div_(float(s))
        return u

    def score_batch(self, ctx: FaithfulnessBatch) -> MetricOutput:
        values, reasons, curves = unscored(len(ctx.ids))
        fis, k, ranks, why = self.plan(ctx)
        draws = int(self.params["nr_samples"])
        fields: dict[int, torch.Tensor] = {}
        p0 = ctx.clean_probabilities()
        shape = ctx.inputs.shape[1:]

        def build(b: int, start: int, stop: int) -> torch.Tensor:
            if b not in fields:
                fields.clear()  # samples arrive in order: one field alive at a time
                fields[b] = self.noise(ctx, b)
            index = torch.arange(start, stop, device=ctx.device)
            masks = step_masks(ranks[b], fis, index // draws, cumulative=False)
            fill = fields[b][index % draws].view(-1, *shape)
            return compose(ctx.device_inputs[b], masks, fill)

        scored = score_steps(ctx, {b: k * draws for b in ranks}, build)
        step_sums = self.sums(ctx, ranks, fis)
        for b in range(len(ctx.ids)):
            reasons[b] = why[b]
            if b not in scored:
                continue
            var = ff.relative_variance(scored[b].reshape(1, k, draws), p0[b : b + 1], float(self.params["eps"]))
            sums = step_sums[b]
            r = ff.spearman_rows(sums, var)[0]
            curves[b] = {"variance": var[0].tolist(), "attribution": sums[0].tolist(), "features_in_step": fis}
            if np.isnan(r):
                reasons[b] = "attribution sums or prediction variances constant: correlation undefined"
            values[b] = r
        return MetricOutput(values=values, reasons=reasons, curves=curves)
