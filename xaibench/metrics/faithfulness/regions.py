"""The field's patch-wise faithfulness metrics (DESIGN 3b): region perturbation (Samek et al.
2017, AOPC) and selectivity (Montavon et al. 2018).

Patches are ``patch_size`` squares on a grid from the top-left corner (edge patches cut when the
size does not divide; Quantus pads the image around its centre instead), ranked by their
attribution sum, most relevant first, ties by patch index. Patches are removed cumulatively in all
colour channels; the images are built on the model's device from one per-pixel rank tensor.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

import numpy as np
import torch

from xaibench.api import MetricCost, MetricOutput
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
    step_masks,
)
from xaibench.metrics.faithfulness.perturbation import noise_field
from xaibench.params import Param
from xaibench.seeds import sample_rng


class _Patchwise(FieldFaithfulnessMetric):
    """Shared: each valid sample's per-pixel patch rank (on the device) and its number of patches."""

    def patch_ranks(self, ctx: FaithfulnessBatch) -> tuple[dict[int, torch.Tensor], int, list[str | None]]:
        h, w = ctx.saliency.shape[1:]
        ids = ff.patch_ids(h, w, int(self.params["patch_size"]))
        reasons: list[str | None] = list(ctx.valid)
        valid = [b for b in range(len(ctx.ids)) if not reasons[b]]
        absolute = bool(self.params["abs"])
        ranks: dict[int, torch.Tensor] = {}
        if valid:  # one copy to the device, before the forwards
            rows = [ff.patch_order(attribution(ctx, b, absolute), ids)[1] for b in valid]
            ranks = dict(zip(valid, torch.from_numpy(np.stack(rows)).to(ctx.device), strict=True))
        return ranks, int(ids.max()) + 1, reasons

    def fills(self, ctx: FaithfulnessBatch, samples: list[int]) -> dict[int, torch.Tensor]:
        """The replacement of each sample, on the device: a constant baseline, or the sample's seeded
        U(0, 1) pixel noise (drawn on the host; all samples' fields cross in one copy)."""
        if self.params["baseline"] != "uniform":
            fill = fill_value(ctx, self.params["baseline"])
            return dict.fromkeys(samples, fill)
        if not samples:
            return {}
        shape = tuple(ctx.inputs.shape[1:])
        fields = [
            noise_field("uniform", shape, sample_rng(ctx.seed, ctx.ids[b], f"{self.name}/uniform"), ctx.mean, ctx.std)
            for b in samples
        ]
        return dict(zip(samples, torch.stack(fields).to(ctx.device)[:, None], strict=True))


class RegionPerturbation(_Patchwise):
    """Region perturbation (Samek et al. 2017): replace the ``regions_evaluation`` most relevant
    ``patch_size`` patches one after another (cumulatively) and record the drop p(x) - p(x_k) after
    each; the value is the AOPC, ``sum_k drop_k / (L + 1)`` over the L regions (the clean image's
    drop, 0, counted as in the paper), in [-1, 1]. Higher is better.

    Parameters (Quantus's defaults): ``patch_size`` 8, ``regions_evaluation`` 100 (fewer when the
    image has fewer patches), ``abs`` False; ``baseline``: ``uniform`` (the paper's: U(0, 1) pixel
    noise, normalised, seeded per sample; one field per sample serves every step), ``zeros`` (the
    dataset mean) or ``black``. The drops are kept in ``curves`` (Quantus's output).
    """

    name = "region_perturbation"
    direction = "higher"
    unit = "AOPC: mean probability drop, in [-1, 1]"
    value_range = (-1.0, 1.0)
    cost = MetricCost(forward_passes="min(regions_evaluation, pixels // patch_size ** 2) + 1")
    description = (
        "Region perturbation (Samek 2017): area over the perturbation curve (mean drop of the target-class "
        "probability) when the most relevant patches are replaced one after another, in [-1, 1]. Higher is better."
    )
    default_params: ClassVar[Mapping[str, Any]] = {
        "patch_size": 8,
        "regions_evaluation": 100,
        "baseline": "uniform",
        "abs": False,
    }
    param_specs: ClassVar[Mapping[str, Param]] = {
        "patch_size": Param(int, low=1),
        "regions_evaluation": Param(int, low=1),
        "baseline": Param(str, choices=(*BASELINES, "uniform")),
        "abs": Param(bool),
    }

    def score_batch(self, ctx: FaithfulnessBatch) -> MetricOutput:
        values, reasons, curves = unscored(len(ctx.ids))
        ranks, patches, why = self.patch_ranks(ctx)
        k = min(patches, int(self.params["regions_evaluation"]))
        p0 = ctx.clean_probabilities() if ranks else np.zeros(0)
        fills = self.fills(ctx, list(ranks))

        def build(b: int, start: int, stop: int) -> torch.Tensor:
            steps = torch.arange(start, stop, device=ctx.device)
            return compose(ctx.device_inputs[b], step_masks(ranks[b], 1, steps, cumulative=True), fills[b])

        scored = score_steps(ctx, {b: k for b in ranks}, build)
        for b in range(len(ctx.ids)):
            reasons[b] = why[b]
            if b in scored:
                drops = p0[b] - scored[b]
                values[b] = float(ff.aopc(drops[None])[0])
                curves[b] = {"drop": drops.tolist(), "regions": k}
        return MetricOutput(values=values, reasons=reasons, curves=curves)


class Selectivity(_Patchwise):
    """Selectivity (Montavon et al. 2018): remove every ``patch_size`` patch, most relevant first,
    cumulatively (baseline ``zeros``: the dataset mean) and read p(target) after each removal; the
    value is the area under that curve over equally spaced points on [0, 1] (Quantus's AUC,
    ``np.trapz(curve, dx=1)``, divided by the number of patches - 1), in [0, 1]. Lower is better.

    Parameters: ``patch_size`` 16 (Quantus's default, 8, gives 784 forwards per 224 px image; 16
    gives 196), ``baseline`` (``zeros``), ``abs`` False (Quantus's default).
    """

    name = "selectivity"
    direction = "lower"
    unit = "area under p(target) over the removed patches, in [0, 1]"
    value_range = (0.0, 1.0)
    cost = MetricCost(forward_passes="pixels // patch_size ** 2")  # one per patch
    description = (
        "Selectivity (Montavon 2018): remove patches most-relevant-first; area under the target-class "
        "probability curve, in [0, 1]. Lower is better."
    )
    default_params: ClassVar[Mapping[str, Any]] = {"patch_size": 16, "baseline": "zeros", "abs": False}
    param_specs: ClassVar[Mapping[str, Param]] = {
        "patch_size": Param(int, low=1),
        "baseline": Param(str, choices=BASELINES),
        "abs": Param(bool),
    }

    def score_batch(self, ctx: FaithfulnessBatch) -> MetricOutput:
        values, reasons, curves = unscored(len(ctx.ids))
        ranks, patches, why = self.patch_ranks(ctx)
        fill = fill_value(ctx, self.params["baseline"])

        def build(b: int, start: int, stop: int) -> torch.Tensor:
            steps = torch.arange(start, stop, device=ctx.device)
            return compose(ctx.device_inputs[b], step_masks(ranks[b], 1, steps, cumulative=True), fill)

        scored = score_steps(ctx, {b: patches for b in ranks} if patches >= 2 else {}, build)
        for b in range(len(ctx.ids)):
            reasons[b] = why[b] or (None if patches >= 2 else "one patch only: patch_size must be below the size")
            if b in scored:
                values[b] = float(ff.unit_auc(scored[b][None])[0])
                curves[b] = {"probability": scored[b].tolist(), "patches": patches}
        return MetricOutput(values=values, reasons=reasons, curves=curves)


SLIC_THREADS = 8
"""At most this many images are segmented at once (one thread each)."""


def superpixels(image: np.ndarray, n_segments: int, compactness: float) -> np.ndarray:
    """SLIC superpixels (scikit-image, ``start_label=0``) of a ``(H, W, C)`` float64 image."""
    from skimage.segmentation import slic

    return slic(image, n_segments=n_segments, compactness=compactness, start_label=0)


class IROF(FieldFaithfulnessMetric):
    """Iterative removal of features, IROF (Rieger & Hansen 2020): segment the image into SLIC
    superpixels (scikit-image, ``n_segments`` 100, ``compactness`` 10: its defaults, as Quantus),
    order them by their mean attribution, highest first, and remove them one after another,
    cumulatively (baseline ``zeros``: the dataset mean, all channels); the value is the area over
    the curve of p(x_k) / p(x), k = 1..L, i.e. Quantus's ``L - np.trapz(curve, dx=1)`` divided by
    the number of segments L. Higher is better (1 - the mean relative probability, roughly).

    SLIC runs on the image in pixel space (Quantus runs it on the normalised input; the same with
    mean 0 and std 1). n/a where p(x) = 0 or the image yields fewer than two segments.
    """

    name = "irof"
    direction = "higher"
    unit = "area over the relative probability curve, per segment"
    value_range = (-math.inf, 1.0)  # 1 - the mean of p(x_k) / p(x) >= 0
    cost = MetricCost(forward_passes="n_segments + 1")  # about one per superpixel, and the clean image
    description = (
        "IROF (Rieger 2020): remove SLIC superpixels by mean attribution, highest first; area over the curve "
        "of p(x_k) / p(x), divided by the number of segments. Higher is better."
    )
    default_params: ClassVar[Mapping[str, Any]] = {
        "n_segments": 100,
        "compactness": 10.0,
        "baseline": "zeros",
        "abs": False,
    }
    param_specs: ClassVar[Mapping[str, Param]] = {
        "n_segments": Param(int, low=2),
        "compactness": Param(float, low=0.0),
        "baseline": Param(str, choices=BASELINES),
        "abs": Param(bool),
    }

    def segments(self, ctx: FaithfulnessBatch, samples: list[int]) -> dict[int, np.ndarray]:
        """``{b: (H, W) SLIC labels}`` of the samples' images in pixel space, segmented in parallel
        threads (scikit-image releases the GIL for much of SLIC)."""
        n_segments, compactness = int(self.params["n_segments"]), float(self.params["compactness"])
        m = torch.tensor(ctx.mean, dtype=torch.float32).view(-1, 1, 1)
        s = torch.tensor(ctx.std, dtype=torch.float32).view(-1, 1, 1)

        def segment(b: int) -> np.ndarray:
            pixels = (ctx.inputs[b] * s + m).permute(1, 2, 0).double().numpy()
            return superpixels(pixels, n_segments, compactness)

        workers = min(len(samples), os.cpu_count() or 1, SLIC_THREADS)
        if workers < 2:
            return {b: segment(b) for b in samples}
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return dict(zip(samples, pool.map(segment, samples), strict=True))

    def score_batch(self, ctx: FaithfulnessBatch) -> MetricOutput:
        values, reasons, curves = unscored(len(ctx.ids))
        fill = fill_value(ctx, self.params["baseline"])
        todo = ctx.scorable
        for b in range(len(ctx.ids)):
            reasons[b] = ctx.valid[b]
        segmented = self.segments(ctx, todo)
        host_ranks: dict[int, np.ndarray] = {}
        counts: dict[int, int] = {}
        for b in todo:
            rank, count = ff.segment_ranks(attribution(ctx, b, bool(self.params["abs"])), segmented[b])
            if count < 2:
                reasons[b] = "fewer than two superpixels"
                continue
            host_ranks[b], counts[b] = rank, count
        ranks: dict[int, torch.Tensor] = {}
        if host_ranks:  # one copy to the device
            stacked = torch.from_numpy(np.stack(list(host_ranks.values()))).to(ctx.device)
            ranks = dict(zip(host_ranks, stacked, strict=True))
        p0 = ctx.clean_probabilities() if ranks else np.zeros(0)

        def build(b: int, start: int, stop: int) -> torch.Tensor:
            steps = torch.arange(start, stop, device=ctx.device)
            return compose(ctx.device_inputs[b], step_masks(ranks[b], 1, steps, cumulative=True), fill)

        scored = score_steps(ctx, counts, build)
        for b, probs in scored.items():
            if not p0[b] > 0:
                reasons[b] = "p(x) is 0: the relative curve is undefined"
                continue
            ratios = probs / p0[b]
            values[b] = float(ff.aoc(ratios[None])[0])
            curves[b] = {"relative_probability": ratios.tolist(), "segments": counts[b]}
        return MetricOutput(values=values, reasons=reasons, curves=curves)
