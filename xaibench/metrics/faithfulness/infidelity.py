"""Infidelity (Yeh et al. 2019, DESIGN 3b): how well the map, projected on random input
perturbations, predicts the change of the model's output."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import torch

from xaibench.api import MetricOutput
from xaibench.metrics.faithfulness import field_formulas as ff
from xaibench.metrics.faithfulness.base import unscored
from xaibench.metrics.faithfulness.context import FaithfulnessBatch
from xaibench.metrics.faithfulness.field_base import FieldFaithfulnessMetric, score_steps
from xaibench.params import Param
from xaibench.seeds import sample_rng


class Infidelity(FieldFaithfulnessMetric):
    """Infidelity (Yeh et al. 2019): ``E_I[(I . phi - (p(x) - p(x - I)))^2]`` over ``n_perturb_samples``
    Gaussian perturbations I ~ N(0, ``noise``^2) of every pixel and channel in normalised space
    (seeded by ``(seed, sample id)``), the map phi (one value per pixel) applied to every channel:
    ``I . phi = sum_{c,h,w} I_chw phi_hw``. With ``optimal_scale`` (default, as Yeh et al.'s released
    code) the map is first scaled by the least-squares factor, so the score does not depend on the
    map's scale (saliency maps have none). Unit: squared probability, >= 0. Lower is better.

    Quantus 0.6's ``Infidelity`` is another computation: it removes ``perturb_patch_sizes`` squares
    one after another, cumulatively, with a fixed baseline, so its ``n_perturb_samples`` repeats one
    deterministic value (``docs/metrics.md``). Parameters: ``n_perturb_samples`` 50, ``noise`` 0.2,
    ``optimal_scale`` True.
    """

    name = "infidelity"
    direction = "lower"
    unit = "squared probability, >= 0"
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

    def perturbations(self, ctx: FaithfulnessBatch, b: int) -> np.ndarray:
        """``(S, C, H, W)`` float32 Gaussian perturbations I of sample ``b`` (seeded)."""
        rng = sample_rng(ctx.seed, ctx.ids[b], "infidelity/gaussian")
        shape = (int(self.params["n_perturb_samples"]), *ctx.inputs.shape[1:])
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(self.params["noise"])

    def score_batch(self, ctx: FaithfulnessBatch) -> MetricOutput:
        values, reasons, curves = unscored(len(ctx.ids))
        draws = int(self.params["n_perturb_samples"])
        valid = [b for b in range(len(ctx.ids)) if not ctx.valid[b]]
        p0 = ctx.clean_probabilities() if valid else np.zeros(0)
        noise: dict[int, torch.Tensor] = {}
        projections: dict[int, np.ndarray] = {}  # (1, S): I . phi of each perturbation

        def build(b: int, start: int, stop: int) -> torch.Tensor:
            if b not in noise:  # drawn once per sample: the forwards and the projections share it
                noise.clear()
                drawn = self.perturbations(ctx, b)
                flat = drawn.sum(axis=1, dtype=np.float64).reshape(draws, -1)  # channels share phi
                projections[b] = (flat @ ctx.saliency[b].reshape(-1))[None]
                noise[b] = torch.from_numpy(drawn).to(ctx.device)
            return ctx.device_inputs[b][None] - noise[b][start:stop]

        scored = score_steps(ctx, {b: draws for b in valid}, build)
        for b in range(len(ctx.ids)):
            if ctx.valid[b]:
                reasons[b] = ctx.valid[b]
                continue
            drops = (p0[b] - scored[b])[None]
            values[b] = float(ff.infidelity(projections[b], drops, bool(self.params["optimal_scale"]))[0])
            curves[b] = {"projection": projections[b][0].tolist(), "drop": drops[0].tolist()}
        return MetricOutput(values=values, reasons=reasons, curves=curves)
