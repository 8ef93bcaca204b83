"""Smooth and efficient MPRT (Hedstrom et al. 2024, "Sanity checks revisited: an exploration to
repair the model parameter randomisation test"), DESIGN 3b: reported, flagged, never ranked.

Both re-run the explainer on the fully randomised copy of the track's model that
``model_randomisation`` explains last (:func:`xaibench.randomisation.randomised_model` with every
block re-initialised, the same seed and ``blocks``): the same identity, so the explanation cache
and the executors serve and rebuild it as they do for ``model_randomisation``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import torch

from xaibench.api import ExplainContext, Explainer, Metric, MetricCost, MetricInput, MetricOutput, Model
from xaibench.metrics.faithfulness.context import faithfulness_batch, resize_maps
from xaibench.metrics.sanity import mprt_formulas as fm
from xaibench.metrics.sanity.formulas import spearman_rows
from xaibench.metrics.sanity.randomisation import CONCEPTS_REASON, randomisation_seed
from xaibench.params import Param
from xaibench.randomisation import parameter_blocks, randomised_model
from xaibench.seeds import sample_rng

INSENSITIVE = "insensitive to the model"


def explain_maps(
    explainer: Explainer, model: Model, inputs: torch.Tensor, targets: torch.Tensor, seed: int, context: ExplainContext
) -> np.ndarray | str:
    """The explainer's ``(B, H, W)`` float64 maps (as the runner keeps them: float32 first), or
    the reason it gave none (failure, concept explanations, a wrong shape)."""
    size = int(inputs.shape[0])
    try:
        out = explainer.explain(model, inputs, targets, seed=seed, context=context)
    except Exception as exc:  # noqa: BLE001 - the explainer's failure is the batch's n/a reason
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"explainer failed when re-run: {text}"[:300]
    if isinstance(out, list) and out and isinstance(out[0], dict):
        return CONCEPTS_REASON
    maps = out.detach().cpu().numpy() if isinstance(out, torch.Tensor) else np.asarray(out)
    if maps.ndim != 3 or maps.shape[0] != size or 0 in maps.shape:
        return f"explainer returned maps of shape {maps.shape} for {size} inputs when re-run"
    return maps.astype(np.float32).astype(np.float64)


class _FullyRandomised(Metric):
    """Shared by smooth and efficient MPRT: the fully randomised copy of the batch's model."""

    family = "sanity"
    ranking = False
    default = False
    needs = ("model",)
    licence = "Apache-2.0"
    version = "1.0.0"

    insensitive_flag: ClassVar[tuple[str, float]] = ("above", 0.5)
    """When the mean flags the explainer "insensitive to the model": ``("above", t)`` for a mean
    above t, ``("at_most", t)`` for a mean at most t (read by the leaderboard)."""

    def randomised(self, model: Model, blocks: int, seed: int) -> Model:
        """The copy of ``model`` with all ``blocks`` re-initialised (kept for the next batches)."""
        kept: dict[tuple[str, int, int], Model] = self.__dict__.setdefault("_randomised", {})
        key = (model.identity, blocks, seed)
        if key not in kept:
            kept.clear()
            kept[key] = randomised_model(model, upto=blocks, blocks=blocks, seed=seed)
        return kept[key]

    def prepare(self, batch: MetricInput) -> tuple[Any, Model, int] | str:
        """The batch context, the fully randomised model and the number of blocks, or a reason."""
        if batch.saliency is None:
            return CONCEPTS_REASON
        if batch.explainer is None:
            return "needs the explainer to re-run it on a randomised model"
        ctx = faithfulness_batch(batch)
        if isinstance(ctx, str):
            return ctx
        model = batch.model
        assert model is not None
        groups = len(parameter_blocks(model.module, int(self.params["blocks"])))
        if groups == 0:
            return "the model has no parameters to randomise"
        return ctx, self.randomised(model, groups, randomisation_seed(ctx.seed)), groups


class SmoothMPRT(_FullyRandomised):
    """Smooth MPRT (Hedstrom et al. 2024): model-parameter randomisation with explanations
    averaged over ``n`` noisy copies of the input (n - 1 draws of Gaussian noise of standard
    deviation ``noise`` x (max - min of the input), seeded per sample, plus the clean input),
    on the model and on its fully randomised copy (every one of ``blocks`` blocks re-initialised,
    as ``model_randomisation``'s last step). Value: the Spearman rank correlation of |smoothed
    E| on the model and on the randomised copy. In [-1, 1]; lower is better; a mean above 0.5
    is flagged "insensitive to the model" (DESIGN 4b's rule); never ranked.

    Quantus 0.6 ``SmoothMPRT`` draws its noise from numpy's global generator (unseeded) and
    scores every layer; here the noise is seeded and only the fully randomised model is scored
    (the value Quantus returns with ``return_last_correlation``). Default n = 10 (the paper and
    Quantus: 50) to bound the cost: 2 n - 1 explanations per sample (the clean input's map on the
    model is the batch's own), counted in ``forward_passes``; the noise draws of a batch are
    explained together, up to 64 images a call."""

    name = "smooth_mprt"
    direction = "lower"
    unit = "Spearman rank correlation in [-1, 1]"
    value_range = (-1.0, 1.0)
    cost = MetricCost(explanations="2 * n - 1")
    insensitive_flag = ("above", 0.5)
    default_params: ClassVar[Mapping[str, Any]] = {"blocks": 5, "n": 10, "noise": 0.1}
    param_specs: ClassVar[Mapping[str, Param]] = {
        "blocks": Param(int, low=1),
        "n": Param(int, low=1),
        "noise": Param(float, low=0.0),
    }
    description = (
        "Smooth MPRT (Hedstrom 2024): Spearman of |E| averaged over n = 10 noisy inputs, on the model and on its "
        "fully randomised copy; lower is better, mean > 0.5 flagged 'insensitive to the model'; not ranked."
    )

    def score(self, batch: MetricInput) -> MetricOutput:
        size = len(batch.samples)
        prepared = self.prepare(batch)
        if isinstance(prepared, str):
            return MetricOutput.not_applicable(size, prepared)
        ctx, randomised, _ = prepared
        assert batch.model is not None and batch.explainer is not None
        n, magnitude = int(self.params["n"]), float(self.params["noise"])
        images = ctx.inputs.numpy()
        noise = np.stack(
            [
                fm.smoothing_noise(sample_rng(ctx.seed, sid, "smooth_mprt"), images[b], n, magnitude)
                for b, sid in enumerate(ctx.ids)
            ]
        )  # (B, n, C, H, W)
        shape = tuple(ctx.saliency.shape[1:])
        per_call = max(1, 64 // size)  # noise draws explained per call (at most 64 images, or one draw)
        smoothed = {}
        for which, model in (("model", batch.model), ("randomised", randomised)):
            # on the model, the clean input's map (the last draw) is the batch's own: not re-run
            draws = n - 1 if which == "model" else n
            total = ctx.saliency.copy() if which == "model" else np.zeros(ctx.saliency.shape)
            for start in range(0, draws, per_call):
                stop = min(draws, start + per_call)
                noisy = ctx.inputs[None] + torch.from_numpy(noise[:, start:stop].swapaxes(0, 1).copy())
                noisy = noisy.reshape(-1, *ctx.inputs.shape[1:]).to(ctx.device)  # draw-major: (draw, sample)
                targets = torch.as_tensor(np.tile(ctx.targets, stop - start), dtype=torch.long)
                context = ExplainContext(samples=list(batch.samples) * (stop - start))
                maps = explain_maps(batch.explainer, model, noisy, targets, ctx.seed, context)
                if isinstance(maps, str):
                    return MetricOutput.not_applicable(size, maps)
                total += resize_maps(maps, shape).reshape(stop - start, size, *shape).sum(axis=0)
            smoothed[which] = total / n
        rho = spearman_rows(np.abs(smoothed["model"]), np.abs(smoothed["randomised"]))
        values = np.full(size, np.nan)
        reasons: list[str | None] = [None] * size
        for b in range(size):
            finite = np.isfinite(smoothed["model"][b]).all() and np.isfinite(smoothed["randomised"][b]).all()
            if ctx.valid[b]:
                reasons[b] = ctx.valid[b]
            elif not finite:
                reasons[b] = "the explainer returned NaN or infinite values when re-run"
            elif np.isnan(rho[b]):
                reasons[b] = "constant smoothed map: Spearman undefined"
            else:
                values[b] = float(rho[b])
        return MetricOutput(values=values, reasons=reasons, forward_passes=size * (2 * n - 1))


class EfficientMPRT(_FullyRandomised):
    """Efficient MPRT (Hedstrom et al. 2024): the relative rise of the explanation's complexity
    when the model is fully randomised (every one of ``blocks`` blocks re-initialised, as
    ``model_randomisation``'s last step). Value: H(E on the randomised copy) / H(E), H the
    discrete entropy (nats) of the map's histogram in ``bins`` bins over its own range (the
    paper's and Quantus's complexity). A ratio >= 0; higher is better (an explanation of a
    random model should be noisier); a mean of at most 1 (no rise) is flagged "insensitive to
    the model"; never ranked. Quantus 0.6 ``EfficientMPRT`` returns the ratio minus 1 ((b - a) /
    a). Cost: one explanation per sample (the map on the model is the batch's own; the
    randomised map is served from the cache when ``model_randomisation`` ran with the same
    ``blocks``)."""

    name = "efficient_mprt"
    direction = "higher"
    unit = "entropy ratio (randomised / original)"
    value_range = (0.0, math.inf)
    cost = MetricCost(explanations=1)
    insensitive_flag = ("at_most", 1.0)
    default_params: ClassVar[Mapping[str, Any]] = {"blocks": 5, "bins": 100}
    param_specs: ClassVar[Mapping[str, Param]] = {"blocks": Param(int, low=1), "bins": Param(int, low=2)}
    description = (
        "Efficient MPRT (Hedstrom 2024): histogram entropy of E on the fully randomised model / on the model; "
        "higher is better, mean <= 1 flagged 'insensitive to the model'; not ranked."
    )

    def score(self, batch: MetricInput) -> MetricOutput:
        size = len(batch.samples)
        prepared = self.prepare(batch)
        if isinstance(prepared, str):
            return MetricOutput.not_applicable(size, prepared)
        ctx, randomised, _ = prepared
        assert batch.explainer is not None
        targets = torch.as_tensor(ctx.targets, dtype=torch.long)
        context = ExplainContext(samples=list(batch.samples))
        maps = explain_maps(batch.explainer, randomised, ctx.inputs.to(ctx.device), targets, ctx.seed, context)
        if isinstance(maps, str):
            return MetricOutput.not_applicable(size, maps)
        maps = resize_maps(maps, tuple(ctx.saliency.shape[1:]))
        finite = np.isfinite(maps).reshape(size, -1).all(axis=1)
        ratio = fm.complexity_ratio(ctx.saliency, np.nan_to_num(maps), int(self.params["bins"]))
        values = np.full(size, np.nan)
        reasons: list[str | None] = [None] * size
        for b in range(size):
            if ctx.valid[b]:
                reasons[b] = ctx.valid[b]
            elif not finite[b]:
                reasons[b] = "the explainer returned NaN or infinite values on the randomised model"
            elif np.isnan(ratio[b]):
                reasons[b] = "constant saliency map: its entropy is 0, the ratio undefined"
            else:
                values[b] = float(ratio[b])
        return MetricOutput(values=values, reasons=reasons, forward_passes=size)
