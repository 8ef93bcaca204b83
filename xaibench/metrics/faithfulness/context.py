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
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import torch

from xaibench.api import BatchMemo, ForwardCounter, MetricInput, model_modality
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
    modality: str = "image"  # "text": (B, D + 1, 1, L) token sequences, zero = padding (DESIGN 12)

    @cached_property
    def device_inputs(self) -> torch.Tensor:
        """The inputs on the model's device: perturbed images are built there, so only masks
        (one byte per pixel) cross from the host."""
        return self.inputs.to(self.device)

    @property
    def scorable(self) -> list[int]:
        """Indices of the samples whose map can be scored (no reason in ``valid``), in order."""
        return [b for b, reason in enumerate(self.valid) if not reason]

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
            targets = torch.as_tensor(self.targets[missing], device=probs.device)
            values = probs.gather(1, targets[:, None])[:, 0].tolist()  # one copy to the host
            for row, i in enumerate(missing):
                self.memo.put(keys[i], float(values[row]))
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
        modality=model_modality(model),
    )


@dataclass
class _Job:
    key: Any
    count: int
    build: Callable[[int, int], torch.Tensor]
    target: int


class BatchedScorer:
    """Scores images of many samples in full batches of the counter's batch size, building each
    batch just before it is forwarded.

    ``add`` queues a stack of images with their target class under a key; ``add_lazy`` queues
    ``count`` images that ``build(start, stop)`` makes on demand (a slice of a perturbation
    curve). ``finish`` forwards them all and returns ``{key: target probabilities}``.

    **Pipeline.** With ``builders >= 1``, that many worker threads build the next batches
    (masks, fills, imputation) on the model's device while the caller's thread forwards the
    current one; at most ``builders + 1`` batches exist at once, so peak memory grows with the
    batch size, not with the number of images queued. ``builders=0`` builds in the caller's
    thread.
    """

    def __init__(self, ctx: FaithfulnessBatch, *, builders: int = 1) -> None:
        self.ctx = ctx
        self.batch_size = max(1, int(ctx.forward.batch_size))
        self.builders = max(0, int(builders))
        self.jobs: list[_Job] = []

    def add(self, key: Any, images: torch.Tensor, target: int) -> None:
        """Queue ``images`` (``(K, C, H, W)``) for the class ``target`` under ``key``."""
        self.add_lazy(key, int(images.shape[0]), lambda start, stop: images[start:stop], target)

    def add_lazy(self, key: Any, count: int, build: Callable[[int, int], torch.Tensor], target: int) -> None:
        """Queue ``count`` images, image ``i`` being ``build(start, stop)[i - start]``."""
        self.jobs.append(_Job(key, int(count), build, int(target)))

    def _chunks(self) -> list[list[tuple[int, int, int]]]:
        """Batches of ``(job index, start, stop)`` pieces, each ``batch_size`` images (the last fewer)."""
        chunks: list[list[tuple[int, int, int]]] = []
        current: list[tuple[int, int, int]] = []
        room = self.batch_size
        for j, job in enumerate(self.jobs):
            start = 0
            while start < job.count:
                stop = min(job.count, start + room)
                current.append((j, start, stop))
                room -= stop - start
                start = stop
                if room == 0:
                    chunks.append(current)
                    current, room = [], self.batch_size
        if current:
            chunks.append(current)
        return chunks

    def _build(self, pieces: list[tuple[int, int, int]]) -> tuple[torch.Tensor, torch.Tensor]:
        device = self.ctx.device
        parts = [self.jobs[j].build(start, stop).to(device, non_blocking=True) for j, start, stop in pieces]
        images = parts[0] if len(parts) == 1 else torch.cat(parts)
        # made where the images are: a blocking copy from the host would wait for the queued forwards
        targets = [
            torch.full((stop - start,), self.jobs[j].target, dtype=torch.int64, device=images.device)
            for j, start, stop in pieces
        ]
        return images, torch.cat(targets)

    def finish(self) -> dict[Any, np.ndarray]:
        chunks = self._chunks()
        scored: list[torch.Tensor] = []
        for images, targets in pipelined(self._build, chunks, workers=self.builders):
            probs = self.ctx.forward(images)
            scored.append(probs[torch.arange(len(targets), device=probs.device), targets])
        # One copy to the host at the end: a copy per batch would make the host wait for each
        # forward pass before it queues the next one (on a GPU, half the time when launches and
        # kernels take about as long as each other).
        flat = torch.cat(scored).double().cpu().numpy() if scored else np.zeros(0)
        out: dict[Any, np.ndarray] = {}
        offset = 0
        for job in self.jobs:
            out[job.key] = flat[offset : offset + job.count]
            offset += job.count
        return out


def pipelined(fn: Callable[[Any], Any], jobs: list[Any], *, workers: int) -> Iterator[Any]:
    """Yield ``fn(job)`` for every job, in order. With ``workers >= 1``, that many threads compute
    the next results while the caller consumes the current one (at most ``workers + 1`` results
    exist at once); with 0, or a single job, everything runs in the caller's thread."""
    if workers < 1 or len(jobs) < 2:
        for job in jobs:
            yield fn(job)
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        ahead: deque[Future] = deque(pool.submit(fn, job) for job in jobs[:workers])
        for job in jobs[workers:]:
            result = ahead.popleft().result()
            ahead.append(pool.submit(fn, job))  # keep ``workers`` builds running while the caller uses it
            yield result
        while ahead:
            yield ahead.popleft().result()
