"""Infidelity (Yeh et al. 2019, DESIGN 3b): how well the map, projected on random input
perturbations, predicts the change of the model's output."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import torch

from xaibench.api import MetricCost, MetricOutput
from xaibench.device_random import normal, stream_key
from xaibench.metrics.faithfulness import field_formulas as ff
from xaibench.metrics.faithfulness.base import unscored
from xaibench.metrics.faithfulness.context import FaithfulnessBatch
from xaibench.metrics.faithfulness.field_base import FieldFaithfulnessMetric, score_steps
from xaibench.metrics.faithfulness.perturbation import float64_device
from xaibench.params import Param


class Infidelity(FieldFaithfulnessMetric):
    """Infidelity (Yeh et al. 2019): ``E_I[(I . phi - (p(x) - p(x - I)))^2]`` over ``n_perturb_samples``
    Gaussian perturbations I ~ N(0, ``noise``^2) of every pixel and channel in normalised space
    (seeded by ``(seed, sample id)``), the map phi (one value per pixel) applied to every channel:
    ``I . phi = sum_{c,h,w} I_chw phi_hw``; the perturbations are drawn on the model's device
    (:mod:`xaibench.device_random`), slice by slice as they are forwarded. With ``optimal_scale``
    (default, as Yeh et al.'s released code) the map is first scaled by the least-squares factor, so
    the score does not depend on the map's scale (saliency maps have none). Unit: squared
    probability, >= 0. Lower is better.

    Quantus 0.6's ``Infidelity`` is another computation: it removes ``perturb_patch_sizes`` squares
    one after another, cumulatively, with a fixed baseline, so its ``n_perturb_samples`` repeats one
    deterministic value (``docs/metrics.md``). Parameters: ``n_perturb_samples`` 50, ``noise`` 0.2,
    ``optimal_scale`` True.
    """

    name = "infidelity"
    direction = "lower"
    unit = "squared probability, >= 0"
    value_range = (0.0, math.inf)
    cost = MetricCost(forward_passes="n_perturb_samples + 1")
    description = (
        "Infidelity (Yeh 2019): mean squared difference between the map's projection on Gaussian input "
        "perturbations and the resulting change of the target-class probability (map optimally scaled). "
        "Lower is better."
    )
    default_params: ClassVar[Mapping[str, Any]] = {"n_perturb_samples": 50, "noise": 0.2, "optimal_scale": True}
    param_specs: ClassVar[Mapping[str, Param]] = {
        "n_perturb_samples": Param(int, low=1),
        "noise": Param(float, low=0.0),
        "optimal_scale": Param(bool),
    }

    version = "1.1.0"

    def perturbations(self, ctx: FaithfulnessBatch, b: int, start: int, stop: int) -> torch.Tensor:
        """Perturbations ``start..stop-1`` of sample ``b`` (``(stop - start, C, H, W)`` float32 on the
        model's device): N(0, ``noise``^2) values of the stream ``(seed, sample id,
        "infidelity/gaussian")`` (:mod:`xaibench.device_random`), perturbation s holding its values
        ``s*C*H*W`` to ``(s+1)*C*H*W - 1``."""
        shape = tuple(ctx.inputs.shape[1:])
        size = math.prod(shape)
        key = stream_key(ctx.seed, ctx.ids[b], "infidelity/gaussian")
        drawn = normal(key, start * size, stop * size, ctx.device).view(stop - start, *shape)
        return drawn.mul_(float(self.params["noise"]))

    def score_batch(self, ctx: FaithfulnessBatch) -> MetricOutput:
        values, reasons, curves = unscored(len(ctx.ids))
        draws = int(self.params["n_perturb_samples"])
        valid = ctx.scorable
        p0 = ctx.clean_probabilities() if valid else np.zeros(0)
        home = float64_device(ctx.device)
        maps = torch.from_numpy(ctx.saliency.reshape(len(ctx.ids), -1)).to(home)
        projected: dict[int, dict[int, torch.Tensor]] = {b: {} for b in valid}  # I . phi, by first draw

        def build(b: int, start: int, stop: int) -> torch.Tensor:
            drawn = self.perturbations(ctx, b, start, stop)  # drawn once: forwards and projections share it
            flat = drawn.sum(dim=1).view(stop - start, -1).to(home, torch.float64)  # channels share phi
            projected[b][start] = flat @ maps[b]
            return ctx.device_inputs[b][None] - drawn

        scored = score_steps(ctx, {b: draws for b in valid}, build)
        projections: dict[int, np.ndarray] = {}
        if valid:  # one copy to the host
            rows = torch.stack([torch.cat([part for _, part in sorted(projected[b].items())]) for b in valid])
            projections = dict(zip(valid, rows.cpu().numpy(), strict=True))
        for b in range(len(ctx.ids)):
            if ctx.valid[b]:
                reasons[b] = ctx.valid[b]
                continue
            drops = (p0[b] - scored[b])[None]
            projection = projections[b][None]
            values[b] = float(ff.infidelity(projection, drops, bool(self.params["optimal_scale"]))[0])
            curves[b] = {"projection": projection[0].tolist(), "drop": drops[0].tolist()}
        return MetricOutput(values=values, reasons=reasons, curves=curves)
