"""What the faithfulness metrics read from one batch, and how they forward perturbed images.

Forward-pass economy: every perturbed image is built once and scored once, in batches of the
:class:`~xaibench.api.ForwardCounter`'s batch size across the samples of a batch. Work that
several metrics need lives in the batch's :class:`~xaibench.api.BatchMemo` under keys that
start with :data:`OWNER`: the batch context itself, the clean probabilities p(x), the
probabilities of the image whose every pixel is the baseline (the same for all samples) and
each ROAD curve. A metric's ``forward_passes`` is the number of images it forwarded itself
(work found in the memo is free).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from xaibench.api import BatchMemo, ForwardCounter, MetricInput
from xaibench.imaging import resize_bilinear

OWNER = "faithfulness"
"""First item of every memo key written by this family (and by the model-based ``other`` metrics)."""


@dataclass
class FaithfulnessBatch:
    """One batch as the model-based metrics read it, checked once and memoised per batch."""

    inputs: torch.Tensor  # (B, C, S, S) normalised, CPU float32
    device: Any
    saliency: np.ndarray  # (B, S, S) float64 at input size
    valid: list[str | None]  # per-sample reason the map cannot be scored, or None
    targets: np.ndarray
    ids: list[str]
    digests: list[str]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    forward: ForwardCounter
    seed: int
    memo: BatchMemo
    source: Any = None  # the batch's saliency array, kept so the memo key (its id) stays unique

    @property
    def pixels(self) -> int:
        """Pixels per map at the model input size."""
        return int(self.saliency.shape[1] * self.saliency.shape[2])

    def forwarded(self) -> int:
        """Images forwarded so far through this batch's counter."""
        return int(self.forward.images)

    def clean_probabilities(self) -> np.ndarray:
        """p(x) of the target class for every sample, memoised per (sample id, target)."""
        keys = [(OWNER, "p_clean", sid, int(t)) for sid, t in zip(self.ids, self.targets, strict=True)]
        missing = [i for i, k in enumerate(keys) if k not in self.memo]
        if missing:
            probs = self.forward(self.inputs[missing].to(self.device))
            for row, i in enumerate(missing):
                self.memo.put(keys[i], float(probs[row, int(self.targets[i])]))
        return np.array([self.memo.lookup(k) for k in keys])

    def baseline_probabilities(self, name: str, fill: torch.Tensor) -> np.ndarray:
        """Probabilities of the one image whose every pixel is ``fill`` (shared by all samples)."""

        def build() -> np.ndarray:
            image = fill.expand(self.inputs.shape[1:]).to(torch.float32)[None]
            return self.forward(image.to(self.device))[0].double().cpu().numpy()

        return self.memo.get((OWNER, "p_full", name), build)


def resize_maps(maps: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``(B, h, w)`` maps at the model input size, float64 (computed in float32)."""
    if maps.shape[-2:] == size:
        return maps
    return resize_bilinear(maps.astype(np.float32), size).astype(np.float64)


def faithfulness_batch(batch: MetricInput) -> FaithfulnessBatch | str:
    """The batch's :class:`FaithfulnessBatch` (built on first use), or the reason a metric that
    needs the model cannot apply."""
    if batch.saliency is None:
        return "needs a saliency map (concept explanations are not scored by faithfulness metrics)"
    if batch.model is None:
        return "needs model access"
    return batch.memo.get((OWNER, "batch", id(batch.saliency)), lambda: _build(batch))


def _build(batch: MetricInput) -> FaithfulnessBatch:
    model = batch.model
    assert model is not None
    inputs = batch.inputs
    if inputs is None:
        inputs = model.preprocess([s.image for s in batch.samples])
    inputs = torch.as_tensor(inputs)
    device = inputs.device
    inputs = inputs.detach().to("cpu", torch.float32)
    saliency = np.asarray(batch.saliency, dtype=np.float64)
    if saliency.ndim != 3 or saliency.shape[0] != inputs.shape[0]:
        raise ValueError(
            f"faithfulness metrics: saliency must be (B, H, W) with B = {inputs.shape[0]}, got {saliency.shape}"
        )
    saliency = resize_maps(saliency, tuple(inputs.shape[-2:]))
    valid = [None if np.isfinite(m).all() else "saliency map contains NaN or infinite values" for m in saliency]
    forward = batch.forward
    if forward is None:
        forward = batch.memo.get((OWNER, "forward"), lambda: ForwardCounter(model.module))
    return FaithfulnessBatch(
        inputs=inputs,
        device=device,
        saliency=saliency,
        valid=valid,
        targets=np.asarray(batch.targets, dtype=np.int64).reshape(-1),
        ids=[s.id for s in batch.samples],
        digests=[hashlib.sha1(np.ascontiguousarray(m).tobytes()).hexdigest()[:16] for m in saliency],
        mean=tuple(model.mean),
        std=tuple(model.std),
        forward=forward,
        seed=int(batch.seed),
        memo=batch.memo,
        source=batch.saliency,
    )


class BatchedScorer:
    """Scores images of many samples in full batches of the counter's batch size.

    ``add`` queues a stack of images with their target class under a key;
    ``finish`` forwards what is left and returns ``{key: target probabilities}``.
    """

    def __init__(self, ctx: FaithfulnessBatch) -> None:
        self.ctx = ctx
        self.batch_size = max(1, int(ctx.forward.batch_size))
        self.images: list[torch.Tensor] = []
        self.targets: list[np.ndarray] = []
        self.pending = 0
        self.scored: list[np.ndarray] = []
        self.spans: dict[Any, tuple[int, int]] = {}
        self.total = 0

    def add(self, key: Any, images: torch.Tensor, target: int) -> None:
        k = int(images.shape[0])
        self.spans[key] = (self.total, self.total + k)
        self.total += k
        if k == 0:
            return
        self.images.append(images)
        self.targets.append(np.full(k, target, dtype=np.int64))
        self.pending += k
        self._drain(final=False)

    def _drain(self, final: bool) -> None:
        """Forward exactly ``batch_size`` images at a time (the rest too when ``final``),
        copying only the images of the chunk being forwarded."""
        while self.pending >= self.batch_size or (final and self.pending):
            need = min(self.batch_size, self.pending)
            parts, tparts = [], []
            while need:
                head, thead = self.images[0], self.targets[0]
                k = min(need, int(head.shape[0]))
                parts.append(head[:k])
                tparts.append(thead[:k])
                if k == head.shape[0]:
                    self.images.pop(0)
                    self.targets.pop(0)
                else:
                    self.images[0], self.targets[0] = head[k:], thead[k:]
                need -= k
            chunk = parts[0] if len(parts) == 1 else torch.cat(parts)
            targets = torch.from_numpy(np.concatenate(tparts))
            probs = self.ctx.forward(chunk.to(self.ctx.device))
            self.scored.append(probs[torch.arange(len(targets)), targets].double().cpu().numpy())
            self.pending -= len(targets)

    def finish(self) -> dict[Any, np.ndarray]:
        self._drain(final=True)
        flat = np.concatenate(self.scored) if self.scored else np.zeros(0)
        return {key: flat[a:b] for key, (a, b) in self.spans.items()}


def prefetched(fn: Callable[[Any], Any], jobs: list[Any], *, threaded: bool) -> Iterator[tuple[Any, Any]]:
    """Yield ``(job, fn(job))`` in order; with ``threaded``, one worker thread computes the
    next job while the caller consumes the current one (at most two results in memory)."""
    if not threaded or len(jobs) < 2:
        for job in jobs:
            yield job, fn(job)
        return
    with ThreadPoolExecutor(max_workers=1) as pool:
        ahead = pool.submit(fn, jobs[0])
        for i, job in enumerate(jobs):
            result = ahead.result()
            if i + 1 < len(jobs):
                ahead = pool.submit(fn, jobs[i + 1])
            yield job, result
