"""The one perturbation pass the robustness metrics share (DESIGN 3b).

For a batch: ``n`` perturbed copies of each input (uniform noise of radius ``radius`` in the model's
normalised space, seeded per sample by :func:`xaibench.seeds.sample_rng`, built on the model's
device), their logits (one batched forward of the clean and perturbed inputs, which also captures the
input of the model's last linear layer as the representation), and their explanations (the
explainer re-run, in chunks, on the perturbed inputs it scores). Perturbations whose predicted class
differs from the clean input's are dropped (``kept`` is False). A sample none of whose perturbations
keeps its class is tried again with the same noise halved, at most :data:`HALVINGS` times (the same
perturbations for every explainer, so paired comparisons stay fair); its radius is recorded. The explainer
is re-run only on the perturbations that kept the class. The pass lives in the batch's
:class:`~xaibench.api.BatchMemo`, so metrics with the same ``(n, radius)`` share it; the metric that
builds it counts its forward passes and explanations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from xaibench.api import ExplainContext, MetricInput
from xaibench.metrics.faithfulness.context import FaithfulnessBatch, faithfulness_batch, resize_maps
from xaibench.seeds import sample_rng

OWNER = "robustness"
NOISE_TAG = "robustness/uniform"
HALVINGS = 3
"""How many times a sample's noise is halved when no perturbation keeps its predicted class (radius
``radius``, then ``radius / 2`` ... ``radius / 2**HALVINGS``); after that the sample is n/a."""


@dataclass
class PerturbedPass:
    x: np.ndarray  # (B, C, S, S) clean normalised inputs, float64
    x_p: np.ndarray  # (B, n, C, S, S) perturbed inputs, float32
    e: np.ndarray  # (B, S, S) clean maps at input size
    e_p: np.ndarray  # (B, n, S, S) maps of the perturbed inputs (NaN rows where the explainer failed)
    h: np.ndarray  # (B, K) clean logits
    h_p: np.ndarray  # (B, n, K)
    r: np.ndarray | None  # (B, D) input of the last linear layer, None when the model has none
    r_p: np.ndarray | None  # (B, n, D)
    same_class: np.ndarray  # (B, n) the perturbed input's predicted class is the clean one's
    finite: np.ndarray  # (B, n) the perturbed input's map is finite (False where it was not explained)
    radius: np.ndarray  # (B,) the radius each sample's perturbations were drawn at (halved where needed)
    valid: list[str | None]
    cost: int  # forward passes + explanations, counted once by the metric that built the pass

    @property
    def kept(self) -> np.ndarray:
        """``(B, n)``: the perturbations a metric scores (same predicted class, finite map)."""
        return self.same_class & self.finite


def last_linear(module: Any) -> torch.nn.Module | None:
    """The model's last ``nn.Linear`` in module order (its input is the representation)."""
    found = None
    for m in module.modules():
        if isinstance(m, torch.nn.Linear):
            found = m
    return found


def noise(ctx: FaithfulnessBatch, n: int, radius: float) -> np.ndarray:
    """``(B, n, C, S, S)`` uniform noise in ``[-radius, radius]``, seeded per sample id."""
    shape = tuple(ctx.inputs.shape[1:])
    draws = [sample_rng(ctx.seed, sid, NOISE_TAG).uniform(-radius, radius, (n, *shape)) for sid in ctx.ids]
    return np.stack(draws).astype(np.float32)


def logits_and_representation(
    ctx: FaithfulnessBatch, module: Any, x: torch.Tensor
) -> tuple[np.ndarray, np.ndarray | None]:
    """Logits (and the input of ``module``'s last linear layer) of ``x``, forwarded in the counter's
    batches on the model's device; the counter's image and call counts grow as in
    :class:`~xaibench.api.ForwardCounter`."""
    counter = ctx.forward
    layer = last_linear(module) if isinstance(module, torch.nn.Module) else None
    captured: list[torch.Tensor] = []
    handle = None
    if layer is not None:
        handle = layer.register_forward_hook(lambda _m, args, _out: captured.append(args[0].flatten(1).float().cpu()))
    logits: list[torch.Tensor] = []
    try:
        with torch.inference_mode():
            for start in range(0, int(x.shape[0]), counter.batch_size):
                chunk = x[start : start + counter.batch_size]
                if ctx.device is not None and chunk.device != torch.device(ctx.device):
                    chunk = chunk.to(ctx.device)
                if counter.channels_last and chunk.dim() == 4:
                    chunk = chunk.contiguous(memory_format=torch.channels_last)
                logits.append(counter.fn(chunk).float().cpu())
                counter.images += int(chunk.shape[0])
                counter.calls += 1
    finally:
        if handle is not None:
            handle.remove()
    h = torch.cat(logits).double().numpy()
    r = torch.cat(captured).double().numpy() if layer is not None and len(captured) == len(logits) else None
    return h, r


def explain_all(batch: MetricInput, x: torch.Tensor, rows: np.ndarray, chunk: int) -> np.ndarray | str:
    """The explainer's maps of ``x`` (one per row), in calls of at most ``chunk`` inputs; row ``i`` is a
    perturbation of sample ``rows[i]``, whose sample and target it is explained with."""
    assert batch.explainer is not None and batch.model is not None
    samples = [batch.samples[int(b)] for b in rows]
    targets = torch.as_tensor(np.asarray(batch.targets, dtype=np.int64).reshape(-1)[rows])
    out: list[np.ndarray] = []
    for start in range(0, int(x.shape[0]), chunk):
        stop = start + chunk
        maps = batch.explainer.explain(
            batch.model,
            x[start:stop],
            targets[start:stop],
            seed=int(batch.seed),
            context=ExplainContext(samples=samples[start:stop]),  # a sample's map must not depend on its batch
        )
        if isinstance(maps, list):
            return "the explainer returned concept explanations"
        out.append(maps.detach().cpu().numpy() if isinstance(maps, torch.Tensor) else np.asarray(maps))
    return np.concatenate(out).astype(np.float64) if out else np.zeros((0, *x.shape[-2:]))


def perturbed_pass(batch: MetricInput, n: int, radius: float, chunk: int) -> tuple[PerturbedPass | str, bool]:
    """The shared pass for ``(n, radius)`` (or why it cannot run), and whether this call built it."""
    if batch.explainer is None:
        return "needs the explainer to re-run it on perturbed inputs", False
    ctx = faithfulness_batch(batch)
    if isinstance(ctx, str):
        return ctx, False
    key = (OWNER, "pass", id(batch.saliency), n, float(radius))
    found = batch.memo.lookup(key)
    if found is not None:
        return found, False
    built = _build(batch, ctx, n, radius, chunk)
    batch.memo.put(key, built)
    return built, True


def _build(batch: MetricInput, ctx: FaithfulnessBatch, n: int, radius: float, chunk: int) -> PerturbedPass | str:
    assert batch.model is not None
    size = len(ctx.ids)
    clean = ctx.device_inputs
    u = torch.from_numpy(noise(ctx, n, radius)).to(clean.device)  # (B, n, C, S, S)
    perturbed = clean[:, None] + u
    h_all, r_all = logits_and_representation(ctx, batch.model.module, torch.cat([clean, perturbed.flatten(0, 1)]))
    forwards = size * (n + 1)
    h, h_p = h_all[:size], h_all[size:].reshape(size, n, -1)
    r = r_p = None
    if r_all is not None:
        r, r_p = r_all[:size], r_all[size:].reshape(size, n, -1)
    same_class = h_p.argmax(-1) == h.argmax(-1)[:, None]
    radii = np.full(size, float(radius))
    for k in range(1, HALVINGS + 1):  # the same noise, halved, for samples none of whose perturbations kept the class
        redo = [b for b in range(size) if not ctx.valid[b] and not same_class[b].any()]
        if not redo:
            break
        factor = 0.5**k  # exact in floating point: the perturbation's direction is unchanged
        again = clean[redo][:, None] + u[redo] * factor
        h_redo, r_redo = logits_and_representation(ctx, batch.model.module, again.flatten(0, 1))
        forwards += len(redo) * n
        perturbed[redo] = again
        h_p[redo] = h_redo.reshape(len(redo), n, -1)
        if r_p is not None and r_redo is not None:
            r_p[redo] = r_redo.reshape(len(redo), n, -1)
        same_class[redo] = h_p[redo].argmax(-1) == h[redo].argmax(-1)[:, None]
        radii[redo] = radius * factor
    explain = same_class.copy()
    explain[[b for b in range(size) if ctx.valid[b]]] = False
    rows, cols = np.nonzero(explain)
    maps = explain_all(batch, perturbed[torch.as_tensor(rows), torch.as_tensor(cols)], rows, chunk)
    if isinstance(maps, str):
        return maps
    e_p = np.full((size, n, *ctx.saliency.shape[1:]), np.nan)
    if len(rows):
        e_p[rows, cols] = resize_maps(maps, ctx.saliency.shape[1:]).reshape(len(rows), *ctx.saliency.shape[1:])
    finite = np.isfinite(e_p.reshape(size, n, -1)).all(-1)
    return PerturbedPass(
        x=ctx.inputs.double().numpy(),
        x_p=perturbed.cpu().numpy(),
        e=ctx.saliency,
        e_p=e_p,
        h=h,
        h_p=h_p,
        r=r,
        r_p=r_p,
        same_class=same_class,
        finite=finite,
        radius=radii,
        valid=list(ctx.valid),
        cost=forwards + len(rows),
    )
