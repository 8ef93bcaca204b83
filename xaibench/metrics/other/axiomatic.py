"""Axiomatic metrics (DESIGN 3b, family ``other``, never ranked): completeness (Sundararajan et
al. 2017), non-sensitivity (Nguyen and Rodriguez Martinez 2020) and input invariance (Kindermans
et al. 2017; its shifted model, :func:`~xaibench.randomisation.shift_absorbed`, lives with the
randomised copies in :mod:`xaibench.randomisation`, where the runner's executors rebuild it).

Both forward through the batch's :class:`~xaibench.api.ForwardCounter` (in batches, each
distinct image once, counted in ``forward_passes``). Completeness reads logits (the function an
attribution method such as integrated gradients decomposes), so it runs the counter's model
itself with the counter's batching and device rules and adds the images to its count.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import torch

from xaibench.api import ExplainContext, ForwardCounter, Metric, MetricCost, MetricInput, MetricOutput
from xaibench.metrics.faithfulness.context import (
    OWNER,
    BatchedScorer,
    FaithfulnessBatch,
    faithfulness_batch,
    resize_maps,
)
from xaibench.metrics.other import complexity_formulas as fc
from xaibench.params import Param
from xaibench.randomisation import SurgeryUnsupported, shift_absorbed

BASELINES = ("zero", "black")


def forward_logits(counter: ForwardCounter, x: torch.Tensor) -> torch.Tensor:
    """The model's logits for ``x`` (float32, on ``x``'s device), forwarded like the counter
    forwards probabilities (its batch size, device and memory format) and counted in it."""
    outs = []
    device = None if counter.device is None else torch.device(counter.device)
    with torch.inference_mode():
        for start in range(0, int(x.shape[0]), counter.batch_size):
            chunk = x[start : start + counter.batch_size]
            home = chunk.device
            if device is not None and chunk.device != device:
                chunk = chunk.to(device)
            if counter.channels_last and chunk.dim() == 4:
                chunk = chunk.contiguous(memory_format=torch.channels_last)
            outs.append(counter.fn(chunk).float().to(home))
            counter.images += int(chunk.shape[0])
            counter.calls += 1
    return torch.cat(outs) if outs else torch.empty(0)


def baseline_value(ctx: FaithfulnessBatch, baseline: str) -> torch.Tensor:
    """``(C, 1, 1)`` fill in normalised space: ``zero`` is the normalised zero (the dataset mean
    colour, the deletion baseline); ``black`` is the pixel value 0, (0 - mean) / std."""
    channels = int(ctx.inputs.shape[1])
    if baseline == "zero":
        return torch.zeros(channels, 1, 1)
    mean = torch.as_tensor(ctx.mean, dtype=torch.float32)[:channels]
    std = torch.as_tensor(ctx.std, dtype=torch.float32)[:channels]
    return (-mean / std).view(-1, 1, 1)


class Completeness(Metric):
    """Completeness (Sundararajan et al. 2017, "Axiomatic attribution for deep networks"): an
    attribution is complete when it sums to the change of the model's output between the input
    and a baseline x'. Value: |sum_i E_i - (f_t(x) - f_t(x'))|, f_t the target class's logit,
    x' the image filled with ``baseline`` (``zero``: the normalised zero, i.e. the dataset mean
    colour; ``black``: pixel value 0). In logit units, >= 0; lower is better (0: complete);
    not ranked. On a linear model without bias, gradient x input with the zero baseline scores 0.

    Quantus 0.6 ``Completeness`` differs from the paper: it returns a boolean (exact float
    equality of the sum with the output difference, almost never true in float32), and by
    default normalises the attribution by its maximum before summing, which breaks the
    axiom's scale. Cost: B + 1 forward passes per batch (each input, and the baseline image
    once)."""

    name = "completeness"
    family = "other"
    direction = "lower"
    ranking = False
    default = False
    needs = ("model",)
    licence = "Apache-2.0"
    version = "1.0.0"
    unit = "absolute logit difference"
    value_range = (0.0, math.inf)
    cost = MetricCost(forward_passes=1)  # the clean image (and the baseline once per batch)
    default_params: ClassVar[Mapping[str, Any]] = {"baseline": "zero"}
    param_specs: ClassVar[Mapping[str, Param]] = {"baseline": Param(str, choices=BASELINES)}
    description = (
        "Completeness (Sundararajan 2017): |sum E - (f(x) - f(baseline))| on the target logit, baseline the "
        "normalised zero; lower is better (0 = complete)."
    )

    def score(self, batch: MetricInput) -> MetricOutput:
        size = len(batch.samples)
        ctx = faithfulness_batch(batch)
        if isinstance(ctx, str):
            return MetricOutput.not_applicable(size, ctx)
        before = ctx.forwarded()
        fill = baseline_value(ctx, str(self.params["baseline"]))
        base_image = fill.expand(ctx.inputs.shape[1:]).to(torch.float32)[None]
        logits = forward_logits(ctx.forward, torch.cat([ctx.inputs, base_image]).to(ctx.device)).double().cpu()
        rows = torch.arange(size)
        targets = torch.as_tensor(ctx.targets, dtype=torch.long)
        output = logits[rows, targets].numpy()
        baseline_output = logits[size, targets].numpy()
        gap = fc.completeness_gap(ctx.saliency, output, baseline_output)
        values = np.full(size, np.nan)
        reasons: list[str | None] = [None] * size
        for b in range(size):
            if ctx.valid[b]:
                reasons[b] = ctx.valid[b]
            elif not np.isfinite(gap[b]):
                reasons[b] = "the model returned a non-finite logit"
            else:
                values[b] = float(gap[b])
        return MetricOutput(values=values, reasons=reasons, forward_passes=ctx.forwarded() - before)


class NonSensitivity(Metric):
    """Non-sensitivity (Nguyen and Rodriguez Martinez 2020, "On quantitative aspects of model
    interpretability"): an explanation should give zero attribution exactly to the features the
    model is not sensitive to. Features are square patches of ``patch`` x ``patch`` pixels (1:
    single pixels), every colour channel together. Z_a: the features whose attribution
    (max over the patch of |E|, divided by max |E|) is below ``eps``; Z_f: the features whose
    removal (filled with ``baseline``, as in completeness) changes the target class's
    probability by less than ``delta``. Value: |Z_a symmetric-difference Z_f|, a count of
    features in [0, number of patches]; lower is better; not ranked.

    Quantus 0.6 ``NonSensitivity`` (Quantus issue 357) treats each colour channel of a pixel as
    a feature and perturbs one channel at a time, with the pixel's attribution copied to all
    three: a pixel whose attribution is right but whose model uses only some channels is
    counted as a violation (and every count is per channel). With a single input channel and
    ``patch = 1`` both give the same count. Cost: one forward pass per patch per sample
    (196 for 224 px and ``patch = 16``)."""

    name = "non_sensitivity"
    family = "other"
    direction = "lower"
    ranking = False
    default = False
    needs = ("model",)
    licence = "Apache-2.0"
    version = "1.0.0"
    unit = "features (patches) violating non-sensitivity"
    value_range = (0.0, math.inf)
    cost = MetricCost(forward_passes="pixels // patch ** 2 + 1")  # one per patch removed, and the clean image
    default_params: ClassVar[Mapping[str, Any]] = {"patch": 16, "eps": 1e-5, "delta": 1e-5, "baseline": "zero"}
    param_specs: ClassVar[Mapping[str, Param]] = {
        "patch": Param(int, low=1),
        "eps": Param(float, low=0.0),
        "delta": Param(float, low=0.0),
        "baseline": Param(str, choices=BASELINES),
    }
    description = (
        "Non-sensitivity (Nguyen 2020): patches (16 px) with ~zero attribution whose removal changes p(target), or "
        "vice versa (symmetric difference, count); lower is better."
    )

    def score(self, batch: MetricInput) -> MetricOutput:
        size = len(batch.samples)
        ctx = faithfulness_batch(batch)
        if isinstance(ctx, str):
            return MetricOutput.not_applicable(size, ctx)
        patch = int(self.params["patch"])
        eps, delta = float(self.params["eps"]), float(self.params["delta"])
        before = ctx.forwarded()
        h, w = int(ctx.inputs.shape[-2]), int(ctx.inputs.shape[-1])
        gh, gw = -(-h // patch), -(-w // patch)
        features = gh * gw
        fill = baseline_value(ctx, str(self.params["baseline"])).to(ctx.device)
        inputs = ctx.device_inputs
        p_clean = ctx.clean_probabilities()

        def builder(b: int):
            def build(start: int, stop: int) -> torch.Tensor:
                index = torch.arange(start, stop, device=inputs.device)
                rows, cols = index // gw, index % gw
                ys = torch.arange(h, device=inputs.device) // patch
                xs = torch.arange(w, device=inputs.device) // patch
                masks = (ys[None, :, None] == rows[:, None, None]) & (xs[None, None, :] == cols[:, None, None])
                masks = masks[:, None]  # (K, 1, H, W): every channel of the patch
                return torch.where(masks, fill, inputs[b][None])

            return build

        scorer = BatchedScorer(ctx)
        for b in range(size):
            if not ctx.valid[b]:
                scorer.add_lazy((OWNER, "non_sensitivity", b), features, builder(b), int(ctx.targets[b]))
        scored = scorer.finish()
        attribution = fc.patch_maxima(np.nan_to_num(ctx.saliency), patch)
        values = np.full(size, np.nan)
        reasons: list[str | None] = [None] * size
        for b in range(size):
            peak = attribution[b].max()
            if ctx.valid[b]:
                reasons[b] = ctx.valid[b]
            elif not peak > 0:
                reasons[b] = "all-zero saliency map: no attribution to normalise"
            else:
                perturbed = scored[(OWNER, "non_sensitivity", b)]
                values[b] = float(
                    fc.non_sensitivity_count(
                        attribution[b : b + 1] / peak, p_clean[b : b + 1], perturbed[None], eps=eps, delta=delta
                    )[0]
                )
        return MetricOutput(values=values, reasons=reasons, forward_passes=ctx.forwarded() - before)


# ----------------------------------------------------------------------------- input invariance


class InputInvariance(Metric):
    """Input invariance (Kindermans et al. 2017, "The (un)reliability of saliency methods"): the
    input is shifted by a constant (``shift`` in normalised space, every pixel and channel) and the
    model's input layer absorbs the shift in its bias (:func:`shift_absorbed`), so the shifted
    model on the shifted input computes exactly what the model computes on the input; an
    input-invariant explainer gives the same map. Value: ||E' - E||_2 / ||E||_2, E' the map
    re-run on the shifted pair; relative L2 distance >= 0, lower is better (0: invariant;
    gradients are, gradient x input is not); not ranked. n/a with the reason when the input
    layer cannot absorb the shift (only ``Linear`` and zero-padded ``Conv2d`` input layers can)
    or the surgery does not preserve the output. Quantus 0.6 ``InputInvariance`` returns a
    boolean (maps equal within 1e-4) and, for a padded convolution, sets the bias from one value
    of the shifted layer's output (the border's), which does not preserve the model.

    The explainer is re-run wherever it runs: in this process, or in the executor's worker (the
    shifted copy carries its :class:`~xaibench.randomisation.Shift`, which the worker rebuilds
    the same copy from, as for ``model_randomisation``'s randomised copies). Cost: 2 forward
    passes (the check) and one explanation per sample."""

    name = "input_invariance"
    family = "other"
    direction = "lower"
    ranking = False
    default = False
    needs = ("model",)
    licence = "Apache-2.0"
    version = "1.0.0"
    unit = "relative L2 distance"
    value_range = (0.0, math.inf)
    cost = MetricCost(forward_passes=2, explanations=1)  # the model and its shifted copy; one map on the copy
    default_params: ClassVar[Mapping[str, Any]] = {"shift": -1.0}
    param_specs: ClassVar[Mapping[str, Param]] = {"shift": Param(float)}
    description = (
        "Input invariance (Kindermans 2017): ||E' - E|| / ||E||, E' re-run on the input shifted by a constant and "
        "the model whose first-layer bias absorbs it; lower is better (0 = invariant)."
    )

    def score(self, batch: MetricInput) -> MetricOutput:
        size = len(batch.samples)
        if batch.explainer is None:
            return MetricOutput.not_applicable(size, "needs the explainer to re-run it on the shifted model")
        ctx = faithfulness_batch(batch)
        if isinstance(ctx, str):
            return MetricOutput.not_applicable(size, ctx)
        assert batch.model is not None
        shift = float(self.params["shift"])
        try:
            shifted = shift_absorbed(batch.model, shift)
        except SurgeryUnsupported as exc:
            return MetricOutput.not_applicable(size, f"the input layer cannot absorb an input shift: {exc}")
        before = ctx.forwarded()
        inputs = ctx.inputs.to(ctx.device)
        moved = inputs + shift
        original = forward_logits(ctx.forward, inputs).double()
        counter = ForwardCounter(shifted.module, batch_size=ctx.forward.batch_size, device=ctx.forward.device)
        after = forward_logits(counter, moved).double()
        forwards = ctx.forwarded() - before + counter.images
        tolerance = 1e-3 * (1.0 + float(original.abs().max()))
        if not float((after - original).abs().max()) <= tolerance:
            reason = "the shifted model does not reproduce the output: its first parameter owner is not the input layer"
            return MetricOutput.not_applicable(size, reason)
        targets = torch.as_tensor(ctx.targets, dtype=torch.long)
        context = ExplainContext(samples=list(batch.samples))
        try:
            out = batch.explainer.explain(shifted, moved, targets, seed=ctx.seed, context=context)
        except Exception as exc:  # noqa: BLE001 - the explainer's failure is the batch's n/a reason
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return MetricOutput.not_applicable(size, f"explainer failed on the shifted model: {text}"[:300])
        if isinstance(out, list):
            return MetricOutput.not_applicable(size, "the explainer returned concept explanations")
        maps = out.detach().cpu().numpy() if isinstance(out, torch.Tensor) else np.asarray(out)
        maps = resize_maps(maps.astype(np.float32).astype(np.float64), tuple(ctx.saliency.shape[1:]))
        values = np.full(size, np.nan)
        reasons: list[str | None] = [None] * size
        extras: list[dict[str, Any] | None] = [None] * size
        for b in range(size):
            norm = float(np.linalg.norm(ctx.saliency[b]))
            if ctx.valid[b]:
                reasons[b] = ctx.valid[b]
            elif not np.isfinite(maps[b]).all():
                reasons[b] = "the explainer returned NaN or infinite values on the shifted model"
            elif not norm > 0:
                reasons[b] = "all-zero saliency map: relative distance undefined"
            else:
                values[b] = float(np.linalg.norm(maps[b] - ctx.saliency[b]) / norm)
                extras[b] = {"invariant": bool(np.allclose(maps[b], ctx.saliency[b], atol=1e-4))}
        return MetricOutput(values=values, reasons=reasons, extras=extras, forward_passes=forwards + size)
