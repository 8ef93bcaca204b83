"""Alignment metrics (DESIGN section 2) as pure, batched numpy functions.

Inputs are already normalised (see :mod:`xaibench.metrics.normalise`):

- ``E``: ``(n, H, W)`` saliency in [0, 1];
- ``A``: ``(n, H, W)`` bool binary ground truth;
- ``M``: ``(n, H, W)`` multi-level human map in [0, 1] (binary ground truth: ``M = A``).

Every function returns :class:`Scores`: float64 values with NaN where the metric
is n/a for a sample, and one reason per sample (``None`` where defined). An empty
denominator is n/a, never 0, and never dropped. There is no Python loop over
pixels or samples.

Rules fixed here (documented in docs/metrics.md, "Alignment"):

- an empty mask A makes every metric that involves A n/a ("empty mask"): the binary
  metrics (IoU too, even when B is not empty), the pointing game, mass accuracy,
  FN-MAE. MAE and FP-MAE stay defined (their denominators are not empty);
- fixed threshold: ``B = E >= theta``;
- top-k matched: ``B`` = the ``k = |A|`` highest pixels of E, ties broken by pixel
  index (raster order: the lower flat index wins);
- threshold-averaged: the mean over theta in {0.05, ..., 0.95}; n/a if the metric
  is n/a at any theta (never an average over a silently reduced set);
- F1 = 2PR / (P + R), 0 when P = R = 0, n/a when P or R is n/a;
- pointing game tolerance: 15 px in the squash-resized 224 x 224 frame, i.e. an
  ellipse in native pixels (see :func:`pointing_game`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

THRESHOLDS: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(1, 20))
"""theta in {0.05, 0.10, ..., 0.95} for the threshold-averaged binarisation."""
HUMAN_LEVELS: tuple[float, ...] = (0.25, 0.5, 0.75)
BINARY_METRICS: tuple[str, ...] = ("iou", "precision", "recall", "f1")

EMPTY_MASK = "empty mask"
EMPTY_BINARISED = "empty binarised map"
EMPTY_UNION = "empty mask and empty binarised map"
ZERO_TOTAL = "zero total saliency (degenerate map)"
NO_BACKGROUND = "no pixels with M = 0"


@dataclass
class Scores:
    """Per-sample values (float64, NaN = n/a), reasons and optional per-sample extras
    (arrays of length n, e.g. ``tied_maxima``)."""

    values: np.ndarray
    reasons: list[str | None]
    extras: dict[str, np.ndarray] = field(default_factory=dict)


def _reasons(na: np.ndarray, reason: str) -> list[str | None]:
    return [reason if x else None for x in np.asarray(na).tolist()]


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    out = np.full(np.broadcast(num, den).shape, np.nan)
    np.divide(num, den, out=out, where=den > 0)
    return out


def _check(E: np.ndarray, A: np.ndarray | None = None, M: np.ndarray | None = None) -> None:
    if E.ndim != 3:
        raise ValueError(f"saliency: expected (n, H, W), got shape {E.shape}")
    for name, other in (("mask", A), ("levels", M)):
        if other is not None and other.shape != E.shape:
            raise ValueError(f"{name}: shape {other.shape} does not match the saliency batch {E.shape}")


def _flat(x: np.ndarray) -> np.ndarray:
    return x.reshape(x.shape[0], -1)


# ----------------------------------------------------------------------------- masks


def rasterise_boxes(boxes: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Rasterise pixel boxes ``(N, 4)`` as ``x0, y0, x1, y1`` (end exclusive) into a bool
    mask of ``shape = (H, W)``. Fractional coordinates cover every pixel they touch
    (floor of the start, ceil of the end); boxes are clipped to the image. No boxes
    give an empty mask."""
    h, w = int(shape[0]), int(shape[1])
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4) if np.size(boxes) else np.zeros((0, 4))
    if not np.isfinite(b).all():
        raise ValueError("boxes: coordinates must be finite")
    x0 = np.clip(np.floor(b[:, 0]), 0, w)
    y0 = np.clip(np.floor(b[:, 1]), 0, h)
    x1 = np.clip(np.ceil(b[:, 2]), 0, w)
    y1 = np.clip(np.ceil(b[:, 3]), 0, h)
    ys = np.arange(h)
    xs = np.arange(w)
    rows = (ys[None, :] >= y0[:, None]) & (ys[None, :] < y1[:, None])  # (N, H)
    cols = (xs[None, :] >= x0[:, None]) & (xs[None, :] < x1[:, None])  # (N, W)
    # any over boxes of the outer product, as one matrix product of 0/1 counts
    return (rows.T.astype(np.int32) @ cols.astype(np.int32)) > 0


# ----------------------------------------------------------------------------- binary metrics


def binary_values(inter: np.ndarray, size_b: np.ndarray, size_a: np.ndarray) -> dict[str, np.ndarray]:
    """IoU, precision, recall, F1 values (NaN = n/a) from ``|B & A|``, ``|B|``, ``|A|``
    (arrays of any one shape). An empty A makes all four NaN."""
    inter = np.asarray(inter, dtype=np.float64)
    size_b = np.asarray(size_b, dtype=np.float64)
    size_a = np.asarray(size_a, dtype=np.float64)
    iou = _ratio(inter, size_b + size_a - inter)
    precision = _ratio(inter, size_b)
    recall = _ratio(inter, size_a)
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(precision + recall > 0, 2 * precision * recall / (precision + recall), 0.0)
    f1 = np.where(np.isnan(precision) | np.isnan(recall), np.nan, f1)
    empty_a = size_a == 0
    for arr in (iou, precision, recall, f1):
        arr[empty_a] = np.nan
    return {"iou": iou, "precision": precision, "recall": recall, "f1": f1}


def scores_from_counts(inter: np.ndarray, size_b: np.ndarray, size_a: np.ndarray) -> dict[str, Scores]:
    """IoU, precision, recall and F1 from per-sample ``(n,)`` counts ``|B & A|``, ``|B|``, ``|A|``.

    Direction: higher is better; unit: fraction in [0, 1]. An empty A makes all four
    n/a ("empty mask"); otherwise precision is n/a on an empty B ("empty binarised map")
    and F1 with it.
    """
    values = binary_values(inter, size_b, size_a)
    empty_a = np.asarray(size_a) == 0
    empty_b = np.asarray(size_b) == 0
    reason_p = [
        EMPTY_MASK if a else (EMPTY_BINARISED if b else None)
        for a, b in zip(empty_a.tolist(), empty_b.tolist(), strict=True)
    ]
    reason_a = _reasons(empty_a, EMPTY_MASK)
    return {
        "iou": Scores(values["iou"], reason_a),
        "precision": Scores(values["precision"], reason_p),
        "recall": Scores(values["recall"], list(reason_a)),
        "f1": Scores(values["f1"], list(reason_p)),
    }


def binary_scores(B: np.ndarray, A: np.ndarray) -> dict[str, Scores]:
    """IoU, precision, recall, F1 of binary maps B against masks A, both ``(n, H, W)``."""
    if B.shape != A.shape or B.ndim != 3:
        raise ValueError(f"binary maps: B {B.shape} and A {A.shape} must both be (n, H, W)")
    B = _flat(B.astype(bool, copy=False))
    A = _flat(A.astype(bool, copy=False))
    return scores_from_counts(np.count_nonzero(B & A, axis=1), np.count_nonzero(B, axis=1), np.count_nonzero(A, axis=1))


def threshold_binarise(E: np.ndarray, theta: float = 0.5) -> np.ndarray:
    """Fixed-threshold binarisation ``B = E >= theta`` (compared in float64, as in
    :func:`threshold_averaged_scores`)."""
    return np.asarray(E, dtype=np.float64) >= float(theta)


def sort_descending(E: np.ndarray) -> np.ndarray:
    """Each map's values sorted in descending order, ``(n, H*W)``; reusable by
    :func:`topk_binarise` across several masks of the same maps."""
    return -np.sort(-_flat(E), axis=1)


def topk_binarise(E: np.ndarray, k: np.ndarray | Sequence[int], sorted_desc: np.ndarray | None = None) -> np.ndarray:
    """Top-k binarisation: per map, the ``k[i]`` highest pixels, ties broken by pixel
    index (raster order, the lower flat index wins). ``k`` may differ per map."""
    _check(E)
    n = E.shape[0]
    flat = _flat(E)
    npix = flat.shape[1]
    k = np.broadcast_to(np.asarray(k, dtype=np.int64), (n,))
    if ((k < 0) | (k > npix)).any():
        raise ValueError(f"top-k: k must lie in [0, {npix}], got {k.tolist()}")
    if sorted_desc is None:
        sorted_desc = sort_descending(E)
    kth = sorted_desc[np.arange(n), np.maximum(k - 1, 0)]  # the k-th largest value
    above = flat > kth[:, None]
    tie = flat == kth[:, None]
    need = k - np.count_nonzero(above, axis=1)  # how many tied pixels to take, first in raster order
    take_tie = tie & (np.cumsum(tie, axis=1) <= need[:, None])
    out = (above | take_tie) & (k > 0)[:, None]
    return out.reshape(E.shape)


def topk_scores(E: np.ndarray, A: np.ndarray, sorted_desc: np.ndarray | None = None) -> dict[str, Scores]:
    """Top-k matched binarisation (``k = |A|``, threshold-free, the ranking default) and
    the four binary metrics. Precision = recall = F1 here, since ``|B| = |A|``."""
    _check(E, A)
    k = np.count_nonzero(_flat(A), axis=1)
    return binary_scores(topk_binarise(E, k, sorted_desc), A)


def threshold_scores(E: np.ndarray, A: np.ndarray, theta: float = 0.5) -> dict[str, Scores]:
    """The four binary metrics with ``B = E >= theta`` (suffix ``_t50`` for 0.5)."""
    _check(E, A)
    return binary_scores(threshold_binarise(E, theta), A)


def threshold_levels(values: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """For each value, the number of ``thresholds`` (sorted, float64) it reaches, i.e. of
    ``t <= value`` compared exactly as in float64.

    float32 input is compared with each threshold rounded up to float32 (for a float32 v,
    ``v >= t`` in float64 iff ``v >= t32_up``), so no float64 copy is made. Evenly spaced
    thresholds ``step * (1..nt)`` (the default) use a floor-and-correct path instead of
    ``searchsorted``, about 6x faster.
    """
    t = np.asarray(thresholds, dtype=np.float64)
    v = np.asarray(values)
    if v.dtype != np.float32:
        v = v.astype(np.float64, copy=False)
    tv = t.astype(v.dtype)
    tv = np.where(tv.astype(np.float64) >= t, tv, np.nextafter(tv, np.array(np.inf, dtype=v.dtype)))
    nt = len(t)
    step = t[0] if nt else 0.0
    if nt and step > 0 and np.allclose(t, step * np.arange(1, nt + 1), rtol=0, atol=1e-12):
        # candidate floor(v / step), within one of the exact count; then correct it once each way
        padded = np.concatenate([[-np.inf], tv, [np.inf]]).astype(v.dtype)
        level = np.clip(np.floor(v * v.dtype.type(1 / step)), 0, nt).astype(np.intp)
        level += padded[level + 1] <= v
        level -= padded[level] > v
        return level
    return np.searchsorted(tv, v, side="right")


def threshold_averaged_scores(
    E: np.ndarray, A: np.ndarray, thresholds: Sequence[float] = THRESHOLDS
) -> dict[str, Scores]:
    """The four binary metrics averaged over ``B = E >= theta`` for theta in ``thresholds``
    (default {0.05, ..., 0.95}; suffix ``_avg``). n/a if n/a at any threshold.

    One pass: each pixel's count of thresholds it reaches (:func:`threshold_levels`), then per-map
    histograms and a reverse cumulative sum give ``|B_theta|`` and ``|B_theta & A|``.
    """
    _check(E, A)
    t = np.asarray(sorted(thresholds), dtype=np.float64)
    nt = len(t)
    n = E.shape[0]
    a = _flat(A.astype(bool, copy=False))
    level = threshold_levels(_flat(E), t)  # number of thresholds <= value, 0..nt
    offset = (np.arange(n) * (nt + 1))[:, None]
    hist_all = np.bincount((level + offset).ravel(), minlength=n * (nt + 1)).reshape(n, nt + 1)
    hist_in = np.bincount((level + offset)[a], minlength=n * (nt + 1)).reshape(n, nt + 1)
    # |B_theta_j| = number of pixels whose level > j, i.e. reverse cumulative sums from j + 1
    size_b = np.cumsum(hist_all[:, ::-1], axis=1)[:, ::-1][:, 1:]
    inter = np.cumsum(hist_in[:, ::-1], axis=1)[:, ::-1][:, 1:]
    count_a = np.count_nonzero(a, axis=1)
    per_theta = binary_values(inter, size_b, np.broadcast_to(count_a[:, None], (n, nt)))
    empty_a = count_a == 0
    # first threshold with an empty binarised map (only possible for a degenerate map)
    empty_b = size_b == 0
    first_empty = np.where(empty_b.any(axis=1), np.argmax(empty_b, axis=1), -1)
    reason_b: list[str | None] = [
        EMPTY_MASK if ea else (f"{EMPTY_BINARISED} at theta={t[j]:.2f}" if j >= 0 else None)
        for ea, j in zip(empty_a.tolist(), first_empty.tolist(), strict=True)
    ]
    reason_a = _reasons(empty_a, EMPTY_MASK)
    reasons = {"iou": reason_a, "precision": reason_b, "recall": reason_a, "f1": reason_b}
    # the mean is NaN if any threshold is n/a
    return {name: Scores(v.mean(axis=1), list(reasons[name])) for name, v in per_theta.items()}


def human_level_scores(
    E: np.ndarray, M: np.ndarray, tau: float, sorted_desc: np.ndarray | None = None
) -> dict[str, Scores]:
    """Binary metrics on a multi-level map at human level tau: ``A = M >= tau``, with the
    top-k matched binarisation (``k = |A|``; suffixes ``_h25``, ``_h50``, ``_h75``).
    An empty ``A`` gives n/a "empty mask at level tau=..."."""
    _check(E, None, M)
    out = topk_scores(E, np.greater_equal(M, tau), sorted_desc)
    label = f"{EMPTY_MASK} at level tau={tau:g}"
    for sc in out.values():
        sc.reasons = [label if r == EMPTY_MASK else r for r in sc.reasons]
    return out


# ----------------------------------------------------------------------------- pointing game


def pointing_game(
    E: np.ndarray,
    A: np.ndarray,
    tolerance: float = 15.0,
    reference_size: int = 224,
) -> Scores:
    """Pointing game (Zhang et al. 2018): 1.0 if the maximum-saliency pixel lies within
    ``tolerance`` px of A, else 0.0 (higher is better; the mean is the hit rate).

    - The point is the first maximum in raster order (``argmax``); ``extras["tied_maxima"]``
      counts the pixels equal to the maximum, ``extras["point"]`` gives ``(y, x)``.
    - The tolerance is 15 px in the ``reference_size`` x ``reference_size`` frame that the
      map is squash-resized from: a native offset ``(dy, dx)`` on an ``H x W`` ground truth
      counts as ``sqrt((dy * R / H) ** 2 + (dx * R / W) ** 2)`` with ``R = reference_size``.
      On a square image this is ``tol = 15 * H / 224`` native pixels; on a non-square one the
      tolerance region is an ellipse in native pixels (a circle in the model's frame).
      Equivalent to ``distance_transform_edt(~A, sampling=(R / H, R / W))[point] <= 15``,
      computed only in the window around the point (the tests check the equivalence).
    - Empty A: n/a ("empty mask").
    - A token sequence (``H == 1``: one value per token, DESIGN 12) has no tolerance: the top
      token must be in A.
    """
    _check(E, A)
    n, h, w = E.shape
    if h == 1:
        tolerance = 0.0  # tokens: a neighbouring token is another word, not a near miss
    flat = _flat(E)
    idx = np.argmax(flat, axis=1)  # first maximum in raster order
    peak = flat[np.arange(n), idx]
    tied = np.count_nonzero(flat == peak[:, None], axis=1)
    py, px = np.divmod(idx, w)
    sy, sx = reference_size / h, reference_size / w
    ry, rx = int(np.floor(tolerance / sy + 1e-9)), int(np.floor(tolerance / sx + 1e-9))
    dy, dx = np.meshgrid(np.arange(-ry, ry + 1), np.arange(-rx, rx + 1), indexing="ij")
    disk = (dy * sy) ** 2 + (dx * sx) ** 2 <= tolerance**2 * (1 + 1e-9)
    dy, dx = dy[disk], dx[disk]
    yy = py[:, None] + dy[None, :]
    xx = px[:, None] + dx[None, :]
    inside = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
    a = A.astype(bool, copy=False)
    near = a[np.arange(n)[:, None], np.clip(yy, 0, h - 1), np.clip(xx, 0, w - 1)] & inside
    hit = near.any(axis=1).astype(np.float64)
    empty = ~_flat(a).any(axis=1)
    hit[empty] = np.nan
    return Scores(hit, _reasons(empty, EMPTY_MASK), {"tied_maxima": tied, "point": np.stack([py, px], axis=1)})


# ----------------------------------------------------------------------------- mass and MAE


def mass_accuracy(E: np.ndarray, A: np.ndarray) -> Scores:
    """Relevance mass accuracy (Arras et al.): ``sum(E inside A) / sum(E)``; higher is
    better, fraction in [0, 1]. n/a on an empty mask or a zero total (degenerate map)."""
    _check(E, A)
    e = _flat(E).astype(np.float64)
    a = _flat(A.astype(bool, copy=False))
    inside = (e * a).sum(axis=1)
    total = e.sum(axis=1)
    values = _ratio(inside, total)
    empty = ~a.any(axis=1)
    values[empty] = np.nan
    reasons = [
        EMPTY_MASK if em else (ZERO_TOTAL if t <= 0 else None)
        for em, t in zip(empty.tolist(), total.tolist(), strict=True)
    ]
    return Scores(values, reasons)


def mae_scores(E: np.ndarray, M: np.ndarray) -> dict[str, Scores]:
    """Mohseni et al. 2021, against a multi-level map M (binary ground truth: M = A).
    All lower is better, mean absolute difference in [0, 1]:

    - ``mae``: mean over all pixels of ``|E - M|``;
    - ``fp_mae`` (correctness): over pixels with ``M = 0``; n/a if there are none;
    - ``fn_mae`` (completeness): over pixels with ``M > 0``; n/a if there are none.
    """
    _check(E, None, M)
    err = np.abs(_flat(E).astype(np.float64) - _flat(M).astype(np.float64))
    m = _flat(M)
    background = m == 0
    n_bg = np.count_nonzero(background, axis=1)
    n_fg = m.shape[1] - n_bg
    err_bg = np.where(background, err, 0.0).sum(axis=1)
    err_fg = np.where(background, 0.0, err).sum(axis=1)
    return {
        "mae": Scores(err.mean(axis=1), [None] * m.shape[0]),
        "fp_mae": Scores(_ratio(err_bg, n_bg), _reasons(n_bg == 0, NO_BACKGROUND)),
        "fn_mae": Scores(_ratio(err_fg, n_fg), _reasons(n_fg == 0, EMPTY_MASK)),
    }
