"""The ``ground_truth`` metrics (DESIGN 11, faithfulness with a known answer) as pure, batched numpy.

Inputs:

- ``E``: ``(n, H, W)`` the saliency maps resized to the ground truth's size, **signed** (no
  positive part, no min-max scaling: the known answer is signed); any real scale;
- ``A``: ``(n, H, W)`` bool, A* (where the decision's evidence is);
- ``regions``: ``(n, H, W)`` int labels (``k >= 1``: region k, 0: no region) and
  ``contributions``: one float array per sample, region k's exact signed contribution to the
  explained class's logit at index ``k - 1`` (logit units).

Every scoring function returns :class:`Scores`: float64 values in the metric's range with NaN where
it is n/a for a sample, and one reason per sample (``None`` where defined). Rules fixed here
(documented in docs/metrics.md, "Known answer"):

- a **constant** map (``max - min <= CONSTANT_RTOL * max|E|``, which includes an all-zero map) scores
  each metric's worst value (:data:`WORST`), never n/a, whatever the ground truth;
- an empty A* makes ``gt_mass_inside`` and ``gt_pointing`` n/a ("empty mask");
- ``gt_pointing``: pixels tied at the maximum of |E| (exact float equality) hit only when every one
  of them lies in A* (no tie-break by raster order, so a flat plateau cannot win by its position);
- region sums are compared at the map's float32 resolution: two sums within
  ``SUM_RTOL * sum|E|`` of each other are tied, a sum within it of 0 is 0 (a float32 map's
  per-pixel rounding, about 6e-8 relative, moves a region sum by at most 6e-8 sum|E|; without
  this, the exact attribution of two equal contributions, spread over regions of different
  sizes, ranked them 1e-8 apart and scored 0.87 instead of 1);
- ``gt_rank_correlation``: Spearman with average ranks for ties; n/a when the contributions are
  all equal (or fewer than two); a map whose region sums are all tied ranks no region above
  another and scores the worst value, -1, as a constant map does;
- ``gt_sign_agreement``: over the regions with a nonzero contribution; n/a where the contributions
  do not have both signs (:data:`ONE_SIGN`); a region sum of 0 (within the resolution) agrees with
  no sign; n/a for an unsigned map (no negative value) that is not
  constant.

No Python loop over pixels; the per-sample loops run over regions' sums only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

CONSTANT_RTOL = 1e-6
"""A map is constant when ``max - min <= CONSTANT_RTOL * max|E|`` (float32 resolution, as
:data:`xaibench.metrics.normalise.DEGENERATE_RTOL`); an all-zero map is constant."""

SUM_RTOL = 1e-6
"""Region sums within ``SUM_RTOL * sum|E|`` of each other are tied, within it of 0 are 0."""

WORST: dict[str, float] = {
    "gt_mass_inside": 0.0,
    "gt_pointing": 0.0,
    "gt_rank_correlation": -1.0,
    "gt_sign_agreement": 0.0,
}
"""The value a constant map scores on each metric: the worst end of its range."""

EMPTY_MASK = "empty mask"
TOO_FEW_REGIONS = "fewer than two regions: rank correlation undefined"
EQUAL_CONTRIBUTIONS = "contributions all equal: rank correlation undefined"
NO_NONZERO = "no region with a nonzero contribution"
ONE_SIGN = "the contributions have one sign: no sign to test"
"""n/a of ``gt_sign_agreement`` where no region pushes against the explained class (DESIGN 11 asks
for both signs: with one, the exact map itself may carry no negative value)."""
UNSIGNED = "unsigned map"


@dataclass
class Scores:
    """Per-sample values (float64, NaN = n/a), reasons and optional per-sample extras (arrays
    of length n, e.g. ``tied_maxima``)."""

    values: np.ndarray
    reasons: list[str | None]
    extras: dict[str, np.ndarray] = field(default_factory=dict)


def _check(E: np.ndarray, *others: np.ndarray) -> None:
    if E.ndim != 3:
        raise ValueError(f"saliency: expected (n, H, W), got shape {E.shape}")
    for other in others:
        if other.shape != E.shape:
            raise ValueError(f"ground truth: shape {other.shape} does not match the saliency batch {E.shape}")


def _flat(x: np.ndarray) -> np.ndarray:
    return x.reshape(x.shape[0], -1)


def is_constant(E: np.ndarray) -> np.ndarray:
    """``(n,)`` bool: the map is constant, ``max - min <= CONSTANT_RTOL * max|E|`` (all zero included)."""
    _check(E)
    flat = _flat(E).astype(np.float64)
    hi, lo = flat.max(axis=1), flat.min(axis=1)
    return (hi - lo) <= CONSTANT_RTOL * np.maximum(np.abs(hi), np.abs(lo))


def mass_inside(E: np.ndarray, A: np.ndarray, constant: np.ndarray | None = None) -> Scores:
    """``gt_mass_inside`` = sum |E| inside A* / sum |E|, in [0, 1] (higher is better).

    Constant map: 0. Empty A*: n/a ("empty mask")."""
    _check(E, A)
    constant = is_constant(E) if constant is None else np.asarray(constant, dtype=bool)
    mag = np.abs(_flat(E)).astype(np.float64)
    inside = _flat(A).astype(bool)
    total = mag.sum(axis=1)
    ins = np.where(inside, mag, 0.0).sum(axis=1)
    values = np.divide(ins, total, out=np.zeros_like(total), where=total > 0)
    values = np.clip(values, 0.0, 1.0)
    values[constant] = WORST["gt_mass_inside"]
    empty = ~inside.any(axis=1)
    values[empty] = np.nan
    return Scores(values, [EMPTY_MASK if e else None for e in empty.tolist()])


def pointing(E: np.ndarray, A: np.ndarray, constant: np.ndarray | None = None) -> Scores:
    """``gt_pointing``: 1 when the maximum of |E| lies in A*, else 0 (no tolerance). Pixels tied
    at the maximum (exact equality) hit only when all of them lie in A*; ``tied_maxima`` (extra)
    counts them. Constant map: 0. Empty A*: n/a ("empty mask")."""
    _check(E, A)
    constant = is_constant(E) if constant is None else np.asarray(constant, dtype=bool)
    mag = np.abs(_flat(E))
    inside = _flat(A).astype(bool)
    tied = mag == mag.max(axis=1, keepdims=True)
    hit = ~(tied & ~inside).any(axis=1)
    values = hit.astype(np.float64)
    values[constant] = WORST["gt_pointing"]
    empty = ~inside.any(axis=1)
    values[empty] = np.nan
    return Scores(
        values,
        [EMPTY_MASK if e else None for e in empty.tolist()],
        {"tied_maxima": tied.sum(axis=1).astype(np.int64)},
    )


def region_sums(E: np.ndarray, regions: np.ndarray, counts: Sequence[int]) -> list[np.ndarray]:
    """Per sample, the signed sum of E over each region ``k = 1..counts[i]`` (float64, length
    ``counts[i]``; a region without pixels sums to 0). One ``np.bincount`` for the whole batch:
    each sample's labels are offset into its own block. Labels must lie in ``0..counts[i]``."""
    _check(E, regions)
    counts = np.asarray(counts, dtype=np.int64)
    if len(counts) != len(E):
        raise ValueError(f"region counts: expected {len(E)}, got {len(counts)}")
    labels = _flat(regions).astype(np.int64)
    if labels.size and (labels.min() < 0 or (labels.max(axis=1) > counts).any()):
        raise ValueError("regions: labels must lie in 0..K, K = the number of contributions")
    starts = np.concatenate([[0], np.cumsum(counts + 1)])
    index = labels + starts[:-1, None]
    sums = np.bincount(index.ravel(), weights=_flat(E).astype(np.float64).ravel(), minlength=int(starts[-1]))
    return [sums[s + 1 : s + 1 + k] for s, k in zip(starts[:-1].tolist(), counts.tolist(), strict=True)]


def average_ranks(x: np.ndarray, tol: float = 0.0) -> np.ndarray:
    """Ranks 1..n of a 1-D array, ties given the mean of the ranks they span (float64). ``tol``:
    sorted neighbours at most ``tol`` apart are tied (chains included; 0: exact ties only)."""
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    xs = x[order]
    new = np.concatenate([[True], np.diff(xs) > tol])
    group = np.cumsum(new) - 1
    first = np.flatnonzero(new)
    last = np.concatenate([first[1:], [len(x)]]) - 1
    ranks = np.empty(len(x))
    ranks[order] = (first + last)[group] / 2.0 + 1.0
    return ranks


def spearman(x: np.ndarray, y: np.ndarray, tol: float = 0.0) -> float:
    """Spearman rank correlation (Pearson correlation of average ranks; ``x`` ranked with ties
    within ``tol``, ``y`` exactly); NaN when either side is all tied (or has fewer than two values)."""
    if len(x) != len(y):
        raise ValueError(f"spearman: lengths differ ({len(x)} and {len(y)})")
    if len(x) < 2:
        return float("nan")
    rx, ry = average_ranks(x, tol), average_ranks(y)
    rx -= rx.mean()
    ry -= ry.mean()
    den = np.sqrt((rx * rx).sum() * (ry * ry).sum())
    if den == 0:
        return float("nan")
    return float(np.clip((rx * ry).sum() / den, -1.0, 1.0))


def rank_correlation(
    sums: Sequence[np.ndarray], contributions: Sequence[np.ndarray], constant: np.ndarray, mass: np.ndarray
) -> Scores:
    """``gt_rank_correlation`` per sample: Spearman between the region sums of E (tied within
    ``SUM_RTOL * mass``, ``mass`` = sum|E| per sample) and the contributions, in [-1, 1] (higher
    is better). n/a with fewer than two regions or when the contributions are all equal; -1
    (worst) for a constant map or region sums all tied."""
    n = len(sums)
    values = np.full(n, np.nan)
    reasons: list[str | None] = [None] * n
    for i, (s, c) in enumerate(zip(sums, contributions, strict=True)):
        c = np.asarray(c, dtype=np.float64)
        rho = spearman(s, c, SUM_RTOL * float(mass[i])) if len(c) >= 2 else np.nan
        if len(c) < 2:
            reasons[i] = TOO_FEW_REGIONS
        elif (c == c[0]).all():
            reasons[i] = EQUAL_CONTRIBUTIONS
        elif constant[i] or np.isnan(rho):  # the sums all tied: no region ranked above another
            values[i] = WORST["gt_rank_correlation"]
        else:
            values[i] = rho
    return Scores(values, reasons)


def sign_agreement(
    sums: Sequence[np.ndarray],
    contributions: Sequence[np.ndarray],
    constant: np.ndarray,
    mass: np.ndarray,
    signed: np.ndarray,
) -> Scores:
    """``gt_sign_agreement`` per sample: the share of regions with a nonzero contribution whose
    region sum of E has the contribution's sign (a sum within ``SUM_RTOL * mass`` of 0, ``mass``
    = sum|E|, agrees with none), in [0, 1] (higher is better). ``signed``: the map has a negative
    value. n/a without a nonzero contribution, or for an unsigned map ("unsigned map"); 0 (worst)
    for a constant map."""
    n = len(sums)
    values = np.full(n, np.nan)
    reasons: list[str | None] = [None] * n
    for i, (s, c) in enumerate(zip(sums, contributions, strict=True)):
        c = np.asarray(c, dtype=np.float64)
        nonzero = c != 0
        if not nonzero.any():
            reasons[i] = NO_NONZERO
        elif not ((c > 0).any() and (c < 0).any()):
            reasons[i] = ONE_SIGN
        elif constant[i]:
            values[i] = WORST["gt_sign_agreement"]
        elif not signed[i]:
            reasons[i] = UNSIGNED
        else:
            sign = np.where(np.abs(s) <= SUM_RTOL * float(mass[i]), 0.0, np.sign(s))
            values[i] = float((sign[nonzero] == np.sign(c[nonzero])).mean())
    return Scores(values, reasons)
