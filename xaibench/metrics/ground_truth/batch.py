"""The inputs of the ``ground_truth`` metrics for one batch (DESIGN 11), shared through the batch's
:class:`~xaibench.api.BatchMemo`.

The saliency maps are resized once per batch to their ground truth's size (bilinear, as DESIGN 2:
:func:`xaibench.imaging.resize_bilinear`) and keep their sign; samples are grouped by ground-truth
size. Each computation (mass, pointing, region sums) runs once per batch, whatever number of
metrics reads it: the region sums serve both ``gt_rank_correlation`` and ``gt_sign_agreement``.

Per-sample n/a reasons here, for all four metrics: "no saliency map", "no ground truth", "no
ground-truth mask (A*)", "no known answer (...)" (a mask without regions and contributions),
"non-finite saliency map"; the formulas add their own
(:mod:`xaibench.metrics.ground_truth.formulas`). Malformed ground truth (a mask that is
not 2-D, regions of another size, regions without contributions or the reverse, labels outside
``0..K``, non-finite contributions) raises ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from xaibench.api import BatchMemo, MetricInput, MetricOutput, Sample
from xaibench.imaging import resize_bilinear
from xaibench.metrics.ground_truth import formulas as gt

OWNER = "ground_truth"
"""First item of every memo key written by the ground-truth metrics."""
NO_SALIENCY = "no saliency map"
NO_GROUND_TRUTH = "no ground truth"
NO_MASK = "no ground-truth mask (A*)"
NONFINITE = "non-finite saliency map"
NO_KNOWN_ANSWER = "no known answer (the ground truth has no mechanism's regions and contributions)"
"""A sample whose ground truth is a mask alone (an object, human attention) is alignment's ground
truth, not a known answer: a mechanism track's samples state their regions and contributions
(DESIGN 11; a binary A* is the regions [A*, the rest] with contributions [its effect, 0])."""


@dataclass(frozen=True)
class Truth:
    """One sample's known answer at its native size: A*, the region labels (int64) and the
    contributions (float64, region k at index k - 1)."""

    mask: np.ndarray
    regions: np.ndarray
    contributions: np.ndarray


@dataclass
class Group:
    """Samples whose ground truth has one size: positions in the batch, the signed maps E resized
    to that size (float32), A*, the constant and signed flags, ``mass`` = sum |E| per sample
    (float64), and each sample's ``regions`` and ``contributions``."""

    index: np.ndarray
    E: np.ndarray
    A: np.ndarray
    constant: np.ndarray
    signed: np.ndarray
    mass: np.ndarray
    regions: list[np.ndarray]
    contributions: list[np.ndarray]


def known_answer(sample: Sample) -> Truth | str:
    """The sample's :class:`Truth`, or the n/a reason when it has no ground truth, no mask, or
    a mask without regions and contributions (no known answer)."""
    truth = sample.ground_truth
    if truth is None:
        return NO_GROUND_TRUTH
    if truth.mask is None:
        return NO_MASK
    mask = np.asarray(truth.mask, dtype=bool)
    if mask.ndim != 2:
        raise ValueError(f"sample {sample.id!r}: ground-truth mask must be 2-D, got shape {mask.shape}")
    if (truth.regions is None) != (truth.contributions is None):
        raise ValueError(f"sample {sample.id!r}: ground truth needs both regions and contributions, or neither")
    if truth.regions is None or truth.contributions is None:
        return NO_KNOWN_ANSWER
    regions = np.asarray(truth.regions)
    contributions = np.asarray(truth.contributions, dtype=np.float64)
    if regions.shape != mask.shape:
        raise ValueError(f"sample {sample.id!r}: regions {regions.shape} and mask {mask.shape} differ in size")
    if not np.issubdtype(regions.dtype, np.integer):
        raise ValueError(f"sample {sample.id!r}: regions must be integer labels, got {regions.dtype}")
    if contributions.ndim != 1 or not np.isfinite(contributions).all():
        raise ValueError(f"sample {sample.id!r}: contributions must be a finite 1-D array")
    if regions.size and (regions.min() < 0 or regions.max() > len(contributions)):
        raise ValueError(f"sample {sample.id!r}: region labels must lie in 0..{len(contributions)}")
    return Truth(mask, regions.astype(np.int64), contributions)


class GroundTruthBatch:
    """The signed, resized maps and known answers of one batch, grouped by ground-truth size."""

    def __init__(self, batch: MetricInput) -> None:
        self.saliency = batch.saliency
        self.memo: BatchMemo = batch.memo
        n = len(batch.samples)
        self.n = n
        self.base_reasons: list[str | None] = [None] * n
        self.constant = np.zeros(n, dtype=bool)
        self.groups: list[Group] = []
        if batch.saliency is None:
            self.base_reasons = [NO_SALIENCY] * n
            return
        sal = np.asarray(batch.saliency)
        if sal.ndim != 3 or sal.shape[0] != n:
            raise ValueError(f"ground-truth metrics: saliency must be (B, S, S) with B = {n} samples, got {sal.shape}")
        by_shape: dict[tuple[int, int], list[tuple[int, Truth]]] = {}
        for i, sample in enumerate(batch.samples):
            truth = known_answer(sample)
            if isinstance(truth, str):
                self.base_reasons[i] = truth
                continue
            by_shape.setdefault(truth.mask.shape, []).append((i, truth))
        for shape, members in by_shape.items():
            index = np.array([i for i, _ in members])
            raw = sal[index].astype(np.float32)
            flat = raw.reshape(len(raw), -1)
            # NaN propagates into max, +-inf shows in max or min
            nonfinite = ~(np.isfinite(flat.max(axis=1)) & np.isfinite(flat.min(axis=1)))
            if nonfinite.any():
                raw[nonfinite] = 0.0
            signed = flat.min(axis=1) < 0
            E = resize_bilinear(raw, shape)
            constant = gt.is_constant(E)
            self.constant[index] = constant
            for i in index[nonfinite].tolist():
                self.base_reasons[i] = NONFINITE
            self.groups.append(
                Group(
                    index=index,
                    E=E,
                    A=np.stack([t.mask for _, t in members]),
                    constant=constant,
                    signed=signed,
                    mass=np.abs(E).reshape(len(E), -1).sum(axis=1, dtype=np.float64),
                    regions=[t.regions for _, t in members],
                    contributions=[t.contributions for _, t in members],
                )
            )

    @staticmethod
    def key(batch: MetricInput) -> tuple[Hashable, ...]:
        """The memo key of a batch's instance (one per saliency array)."""
        return (OWNER, "batch", id(batch.saliency))

    @classmethod
    def of(cls, batch: MetricInput) -> GroundTruthBatch:
        """The batch's shared instance (built on first use)."""
        return batch.memo.get(cls.key(batch), lambda: cls(batch))

    def results(self, name: str, compute: Callable[[Group], gt.Scores]) -> gt.Scores:
        """One computation's scores over the whole batch (NaN outside the groups), memoised."""
        return self.memo.get((OWNER, "scores", id(self.saliency), name), lambda: self._merge(compute))

    def _merge(self, compute: Callable[[Group], gt.Scores]) -> gt.Scores:
        out = gt.Scores(np.full(self.n, np.nan), [None] * self.n, {})
        for group in self.groups:
            sc = compute(group)
            out.values[group.index] = sc.values
            for j, i in enumerate(group.index.tolist()):
                out.reasons[i] = sc.reasons[j]
            for name, ev in sc.extras.items():
                out.extras.setdefault(name, np.zeros(self.n, dtype=ev.dtype))[group.index] = ev
        return out

    def region_sums(self) -> list[list[np.ndarray]]:
        """Per group, E summed per region (float64) for each of its samples: one
        ``np.bincount`` per group, shared by the region metrics."""
        return self.memo.get((OWNER, "region_sums", id(self.saliency)), self._region_sums)

    def _region_sums(self) -> list[list[np.ndarray]]:
        return [gt.region_sums(g.E, np.stack(g.regions), [len(c) for c in g.contributions]) for g in self.groups]

    def region_scores(
        self,
        name: str,
        compute: Callable[[list[np.ndarray], list[np.ndarray], np.ndarray, np.ndarray, np.ndarray], gt.Scores],
    ) -> gt.Scores:
        """A region metric's scores: ``compute(sums, contributions, constant, mass, signed)`` per
        group (NaN outside the groups, where the batch's own reasons apply)."""

        def build() -> gt.Scores:
            out = gt.Scores(np.full(self.n, np.nan), [None] * self.n, {})
            for group, sums in zip(self.groups, self.region_sums(), strict=True):
                sc = compute(sums, group.contributions, group.constant, group.mass, group.signed)
                out.values[group.index] = sc.values
                for i, reason in zip(group.index.tolist(), sc.reasons, strict=True):
                    out.reasons[i] = reason
            return out

        return self.memo.get((OWNER, "scores", id(self.saliency), name), build)

    def output(self, scores: gt.Scores | None, extras: tuple[str, ...] = ()) -> MetricOutput:
        """One metric's output: ``scores`` (``None``: nothing to score) under the batch's reasons;
        per-sample extras ``degenerate`` (the map is constant) and the named score extras."""
        values = np.full(self.n, np.nan)
        reasons: list[str | None] = list(self.base_reasons)
        per_sample: list[dict[str, Any] | None] = [None] * self.n
        for i in range(self.n):
            if self.base_reasons[i] in (NO_SALIENCY, NO_GROUND_TRUTH, NO_MASK, NO_KNOWN_ANSWER):
                continue
            info: dict[str, Any] = {"degenerate": bool(self.constant[i])}
            if scores is not None:
                for name in extras:
                    info[name] = scores.extras[name][i].tolist()
            per_sample[i] = info
            if reasons[i] is None and scores is not None:
                values[i] = scores.values[i]
                reasons[i] = scores.reasons[i]
        return MetricOutput(values=values, reasons=reasons, extras=per_sample)
