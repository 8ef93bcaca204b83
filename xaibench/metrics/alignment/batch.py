"""The normalised inputs of the alignment metrics for one batch (DESIGN 2), shared through the
batch's :class:`~xaibench.api.BatchMemo`.

Ground truth per sample: A is the mask, else ``levels >= HUMAN_LEVEL`` (0.5: the middle human
level of DESIGN 2, on the levels scaled by their max), else the rasterised boxes (at the
image's size); M is the levels scaled by their max, else A as 0/1. Saliency maps are normalised
once per batch, grouped by ground-truth size, and each computation (top-k, fixed threshold,
threshold-averaged, human levels, pointing game, mass, MAE) runs once per batch and parameter
set, whatever number of metrics reads it. Per-sample n/a reasons: "no ground truth", "no
multi-level map" (``_h*`` metrics on binary-only ground truth), "non-finite saliency map", and
the formulas' own (e.g. an empty mask).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from xaibench.api import BatchMemo, MetricInput, MetricOutput, Sample
from xaibench.metrics.alignment import formulas as al
from xaibench.metrics.normalise import normalise_levels, normalise_saliency

OWNER = "alignment"
"""First item of every memo key written by the alignment metrics."""
NO_GROUND_TRUTH = "no ground truth"
NO_LEVELS = "no multi-level map"
NO_SALIENCY = "no saliency map"
NONFINITE = "non-finite saliency map"
HUMAN_LEVEL = 0.5
"""The binary ground truth of a multi-level map M for the plain binary metrics and the pointing
game: A = M >= HUMAN_LEVEL (DESIGN 2). A = M > 0 made the pointing game trivial on eye-fixation
maps, where M > 0 covers 35-50 % of the image. The ``_h25/_h50/_h75`` metrics keep their levels."""

Computation = tuple[Hashable, ...]
"""Names one shared computation and its parameters, e.g. ``("threshold", 0.5)``."""


@dataclass
class Group:
    """Samples whose ground truth has one size: positions in the batch and stacked maps."""

    index: np.ndarray
    E: np.ndarray
    A: np.ndarray
    levels: list[np.ndarray | None]
    _sorted: np.ndarray | None = None
    _M: np.ndarray | None = None

    @property
    def M(self) -> np.ndarray:
        """The multi-level maps: the normalised levels, else A as 0/1 (built on first use)."""
        if self._M is None:
            self._M = np.stack(
                [a.astype(np.float32) if m is None else m for a, m in zip(self.A, self.levels, strict=True)]
            )
        return self._M

    @property
    def sorted_desc(self) -> np.ndarray:
        """Pixel indices of each map by descending value (built on first use)."""
        if self._sorted is None:
            self._sorted = al.sort_descending(self.E)
        return self._sorted


def ground_truth_maps(sample: Sample) -> tuple[np.ndarray, np.ndarray | None, bool] | None:
    """``(A, M or None, levels_clipped)`` for one sample (M only for multi-level ground truth),
    or None without ground truth."""
    gt = sample.ground_truth
    if gt is None or (gt.mask is None and gt.levels is None and gt.boxes is None):
        return None
    shapes = {}
    for name in ("mask", "levels"):
        arr = getattr(gt, name)
        if arr is not None:
            if np.ndim(arr) != 2:
                raise ValueError(f"sample {sample.id!r}: ground-truth {name} must be 2-D, got shape {np.shape(arr)}")
            shapes[name] = tuple(np.shape(arr))
    if len(set(shapes.values())) > 1:
        raise ValueError(f"sample {sample.id!r}: ground-truth mask and levels differ in size: {shapes}")
    M = None
    clipped = False
    if gt.levels is not None:
        lv = normalise_levels(gt.levels)
        M, clipped = lv.maps[0], bool(lv.clipped[0])
    if gt.mask is not None:
        A = np.asarray(gt.mask, dtype=bool)
    elif M is not None:
        A = M >= HUMAN_LEVEL
    else:
        A = al.rasterise_boxes(np.asarray(gt.boxes), sample.size)
    return A, M, clipped


class AlignmentBatch:
    """Normalised saliency maps and ground truth of one batch, grouped by ground-truth size."""

    def __init__(self, batch: MetricInput) -> None:
        self.saliency = batch.saliency
        self.memo: BatchMemo = batch.memo
        n = len(batch.samples)
        self.n = n
        self.base_reasons: list[str | None] = [None] * n
        self.has_levels = np.zeros(n, dtype=bool)
        self.degenerate = np.zeros(n, dtype=bool)
        self.clipped = np.zeros(n, dtype=bool)
        self.groups: list[Group] = []
        if batch.saliency is None:
            self.base_reasons = [NO_SALIENCY] * n
            return
        sal = np.asarray(batch.saliency)
        if sal.ndim != 3 or sal.shape[0] != n:
            raise ValueError(f"alignment metrics: saliency must be (B, S, S) with B = {n} samples, got {sal.shape}")
        by_shape: dict[tuple[int, int], list[tuple[int, np.ndarray, np.ndarray | None]]] = {}
        for i, sample in enumerate(batch.samples):
            gt = ground_truth_maps(sample)
            if gt is None:
                self.base_reasons[i] = NO_GROUND_TRUTH
                continue
            A, M, self.clipped[i] = gt
            self.has_levels[i] = M is not None
            by_shape.setdefault(A.shape, []).append((i, A, M))
        for shape, members in by_shape.items():
            index = np.array([m[0] for m in members])
            norm = normalise_saliency(sal[index], shape)
            self.degenerate[index] = norm.degenerate
            for j, i in enumerate(index.tolist()):
                if norm.nonfinite[j]:
                    self.base_reasons[i] = NONFINITE
            A = np.stack([m[1] for m in members])
            self.groups.append(Group(index=index, E=norm.maps, A=A, levels=[m[2] for m in members]))

    @staticmethod
    def key(batch: MetricInput) -> tuple[Hashable, ...]:
        """The memo key of a batch's instance (one per saliency array)."""
        return (OWNER, "batch", id(batch.saliency))

    @classmethod
    def of(cls, batch: MetricInput) -> AlignmentBatch:
        """The batch's shared instance (built on first use)."""
        return batch.memo.get(cls.key(batch), lambda: cls(batch))

    def scores_key(self, computation: Computation) -> tuple[Hashable, ...]:
        """The memo key of one computation's scores over this batch."""
        return (OWNER, "scores", id(self.saliency), *computation)

    def results(
        self, computation: Computation, compute: Callable[[Group], dict[str, al.Scores]]
    ) -> dict[str, al.Scores]:
        """Scores over the whole batch for one computation, memoised under :meth:`scores_key`."""
        return self.memo.get(self.scores_key(computation), lambda: self._merge(compute))

    def _merge(self, compute: Callable[[Group], dict[str, al.Scores]]) -> dict[str, al.Scores]:
        merged: dict[str, al.Scores] = {}
        for group in self.groups:
            for name, sc in compute(group).items():
                if name not in merged:
                    merged[name] = al.Scores(np.full(self.n, np.nan), [None] * self.n, {})
                out = merged[name]
                out.values[group.index] = sc.values
                for j, i in enumerate(group.index.tolist()):
                    out.reasons[i] = sc.reasons[j]
                for ek, ev in sc.extras.items():
                    out.extras.setdefault(ek, np.zeros((self.n, *ev.shape[1:]), dtype=ev.dtype))[group.index] = ev
        return merged

    def output(
        self, scores: al.Scores | None, *, needs_levels: bool = False, extras: tuple[str, ...] = ()
    ) -> MetricOutput:
        """One metric's output: ``scores`` (``None``: nothing to score) under the batch's reasons."""
        values = np.full(self.n, np.nan)
        reasons: list[str | None] = list(self.base_reasons)
        per_sample: list[dict[str, Any] | None] = [None] * self.n
        for i in range(self.n):
            if reasons[i] is None and needs_levels and not self.has_levels[i]:
                reasons[i] = NO_LEVELS
            if self.base_reasons[i] in (NO_SALIENCY, NO_GROUND_TRUTH):
                continue
            info: dict[str, Any] = {"degenerate": bool(self.degenerate[i])}
            if self.clipped[i]:
                info["levels_clipped"] = True
            if scores is not None:
                for name in extras:
                    info[name] = scores.extras[name][i].tolist()
            per_sample[i] = info
            if reasons[i] is None and scores is not None:
                values[i] = scores.values[i]
                reasons[i] = scores.reasons[i]
        return MetricOutput(values=values, reasons=reasons, extras=per_sample)
