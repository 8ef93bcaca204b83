"""Pure formulas of the field's faithfulness metrics (DESIGN 3b): probabilities and maps in,
scores out. numpy and scipy only, vectorised over samples (rows); no model, no torch.

Conventions shared with :mod:`~xaibench.metrics.faithfulness.perturbation`: a map is flattened in
raster order, pixels are ordered by signed value with ties broken by pixel index, and a step of
``features_in_step`` pixels takes the next pixels of that order (the last step may hold fewer).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata


def features_in_step(n: int, steps: int) -> int:
    """Pixels per step when ``n`` pixels are split into at most ``steps`` steps: ``ceil(n / steps)``.

    The number of steps is then ``ceil(n / features_in_step)`` (``steps`` when it divides ``n``);
    Quantus's ``features_in_step`` parameter is this number.
    """
    if n < 1 or steps < 1:
        raise ValueError(f"features_in_step: need n >= 1 and steps >= 1, got n={n}, steps={steps}")
    return -(-int(n) // int(steps))


def step_count(n: int, fis: int) -> int:
    """Number of steps of ``fis`` pixels that cover ``n`` pixels: ``ceil(n / fis)``."""
    return -(-int(n) // int(fis))


def step_sums(values: np.ndarray, order: np.ndarray, fis: int) -> np.ndarray:
    """Sum of ``values`` (``(B, n)``) over each step of ``order`` (``(B, n)`` pixel indices),
    ``(B, ceil(n / fis))``; the last step may hold fewer pixels."""
    values = np.asarray(values, dtype=np.float64)
    ordered = np.take_along_axis(values, np.asarray(order), axis=1)
    starts = np.arange(0, ordered.shape[1], int(fis))
    return np.add.reduceat(ordered, starts, axis=1)


def pearson_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson correlation of each row of ``a`` with the same row of ``b`` (``(B, K)``); NaN where a
    row is constant (the correlation is undefined). In [-1, 1]."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"pearson_rows: need two 2-D arrays of one shape, got {a.shape} and {b.shape}")
    da = a - a.mean(axis=1, keepdims=True)
    db = b - b.mean(axis=1, keepdims=True)
    na = np.sqrt((da * da).sum(axis=1))
    nb = np.sqrt((db * db).sum(axis=1))
    denom = na * nb
    # A row whose spread is at rounding level of its values is constant: undefined, not noise.
    scale_a = np.abs(a).max(axis=1) * np.sqrt(a.shape[1]) * 1e-12
    scale_b = np.abs(b).max(axis=1) * np.sqrt(b.shape[1]) * 1e-12
    ok = (na > scale_a) & (nb > scale_b) & (denom > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (da * db).sum(axis=1) / np.where(ok, denom, 1.0)
    return np.where(ok, np.clip(r, -1.0, 1.0), np.nan)


def spearman_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spearman rank correlation per row (Pearson of average ranks); NaN where a row is constant."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return pearson_rows(rankdata(a, axis=1), rankdata(b, axis=1))


def non_decreasing(curves: np.ndarray) -> np.ndarray:
    """1.0 where a row never decreases from one point to the next, else 0.0 (Arya's monotonicity)."""
    curves = np.asarray(curves, dtype=np.float64)
    return np.all(np.diff(curves, axis=1) >= 0, axis=1).astype(np.float64)


def unit_auc(curves: np.ndarray) -> np.ndarray:
    """Trapezoid area of each row over K equally spaced points on [0, 1] (``(B, K)``, K >= 2), i.e.
    ``np.trapezoid(curve, dx=1) / (K - 1)``: Quantus's pixel-flipping AUC divided by ``K - 1``, so the
    area of a probability curve lies in [0, 1]."""
    curves = np.asarray(curves, dtype=np.float64)
    if curves.ndim != 2 or curves.shape[1] < 2:
        raise ValueError(f"unit_auc: need (B, K) curves with K >= 2, got {curves.shape}")
    return ((curves[:, 1:] + curves[:, :-1]) / 2.0).sum(axis=1) / (curves.shape[1] - 1)


def relative_variance(perturbed: np.ndarray, clean: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    """Nguyen & Martinez's variance of the prediction around p(x), relative to p(x)^2:
    ``mean_s (p_s - p0)^2 / p0^2`` over the last axis of ``perturbed`` (``(B, K, S)``), with
    ``1 / p0^2`` replaced by 1 where ``|p0| < eps`` (Quantus's guard). ``(B, K)``."""
    perturbed = np.asarray(perturbed, dtype=np.float64)
    p0 = np.asarray(clean, dtype=np.float64).reshape(-1)
    inv = np.ones_like(p0)
    big = np.abs(p0) >= eps
    inv[big] = 1.0 / np.abs(p0[big])
    return np.mean((perturbed - p0[:, None, None]) ** 2, axis=2) * (inv**2)[:, None]


def random_subsets(rng: np.random.Generator, n: int, size: int, runs: int) -> np.ndarray:
    """``(runs, size)`` pixel indices: ``runs`` subsets of ``size`` distinct pixels out of ``n``, each
    drawn uniformly without replacement (one ``rng.choice`` per run)."""
    if not 1 <= size <= n:
        raise ValueError(f"random_subsets: subset size must be in [1, {n}], got {size}")
    return np.stack([rng.choice(n, size, replace=False) for _ in range(int(runs))])


def patch_ids(height: int, width: int, patch: int) -> np.ndarray:
    """``(H*W,)`` patch index of every pixel (raster order) on a grid of ``patch x patch`` squares
    from the top-left corner, patches numbered in raster order; edge patches are cut when ``patch``
    does not divide the size."""
    cols = -(-int(width) // int(patch))
    rows = np.arange(height) // patch
    return (rows[:, None] * cols + (np.arange(width) // patch)[None, :]).reshape(-1)


def patch_order(values: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Patches of one flattened map ``values`` (``(H*W,)``) by ``ids`` (:func:`patch_ids`), most
    relevant first (sum of values, ties by patch index): ``(order of patches, rank of each pixel's
    patch)``."""
    sums = np.bincount(ids, weights=np.asarray(values, dtype=np.float64))
    order = np.argsort(-sums, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return order, rank[ids]


def aopc(drops: np.ndarray) -> np.ndarray:
    """Samek et al.'s area over the MoRF perturbation curve per row: ``sum_k (p(x) - p(x_k)) / (L + 1)``
    for the ``L`` drops after each region (``(B, L)``; the k = 0 term, the clean image, is 0)."""
    drops = np.asarray(drops, dtype=np.float64)
    return drops.sum(axis=1) / (drops.shape[1] + 1)


def subset_sizes(n: int, count: int, max_fraction: float) -> np.ndarray:
    """Sensitivity-n's subset sizes: ``floor(n * max_fraction * i / count)`` for i = 1..count, at least
    1, distinct and increasing (int64)."""
    sizes = (np.arange(1, int(count) + 1) * float(max_fraction) * int(n) / int(count)).astype(np.int64)
    return np.unique(np.clip(sizes, 1, int(n)))


def infidelity(projections: np.ndarray, drops: np.ndarray, optimal_scale: bool = True) -> np.ndarray:
    """Yeh et al.'s infidelity per row: ``mean_s (I_s . phi - (p(x) - p(x - I_s)))^2`` over the
    perturbations (``(B, S)`` projections ``I . phi`` and probability drops). With ``optimal_scale``
    the map is first scaled by the least-squares factor ``beta = mean(I.phi drop) / mean((I.phi)^2)``
    (Yeh et al.'s released code; 0 when every projection is 0), which makes the score independent of
    the map's scale: ``mean(drop^2) - mean(I.phi drop)^2 / mean((I.phi)^2)``. Lower is better, >= 0."""
    e = np.asarray(projections, dtype=np.float64)
    d = np.asarray(drops, dtype=np.float64)
    if optimal_scale:
        ee = np.mean(e * e, axis=1)
        beta = np.where(ee > 0, np.mean(e * d, axis=1) / np.where(ee > 0, ee, 1.0), 0.0)
        e = e * beta[:, None]
    return np.mean((e - d) ** 2, axis=1)


def segment_ranks(values: np.ndarray, segments: np.ndarray) -> tuple[np.ndarray, int]:
    """Rank (0 = first removed) of every pixel's segment, segments ordered by their **mean** value
    in ``values`` (``(H*W,)``), highest first, ties by segment label; and the number of segments.
    ``segments`` holds labels ``0..L-1`` per pixel (empty labels are dropped)."""
    labels, ids = np.unique(np.asarray(segments).reshape(-1), return_inverse=True)
    sums = np.bincount(ids, weights=np.asarray(values, dtype=np.float64))
    means = sums / np.bincount(ids)
    order = np.argsort(-means, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return rank[ids], int(labels.size)


def aoc(ratios: np.ndarray) -> np.ndarray:
    """IROF's area over the curve of ``p(x_k) / p(x)`` for k = 1..L (``(B, L)``): Quantus's
    ``L - np.trapz(curve, dx=1)`` divided by L, so that images with different segment counts compare."""
    ratios = np.asarray(ratios, dtype=np.float64)
    length = ratios.shape[1]
    area = ((ratios[:, 1:] + ratios[:, :-1]) / 2.0).sum(axis=1)
    return (length - area) / length


def standardised_distances(maps: np.ndarray) -> np.ndarray:
    """``(B, B)`` standardised Euclidean distances between the rows of ``maps`` (``(B, n)``):
    each coordinate divided by its sample variance over the rows (ddof 1, scipy's ``seuclidean``);
    coordinates of zero variance are left out (scipy would divide 0 by 0)."""
    maps = np.asarray(maps, dtype=np.float64)
    var = maps.var(axis=0, ddof=1)
    keep = var > 0
    z = maps[:, keep] / np.sqrt(var[keep])
    sq = (z * z).sum(axis=1)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * z @ z.T, 0.0)
    np.fill_diagonal(d2, 0.0)
    return np.sqrt(d2)


def neighbours(distances: np.ndarray, threshold: float) -> np.ndarray:
    """``(B, B)``: sample ``j`` is a neighbour of sample ``i`` (``i != j``) when their distance, divided
    by the largest distance, is at most ``threshold`` (the explanation of ``i`` applies to ``j``)."""
    d = np.asarray(distances, dtype=np.float64)
    top = d.max()
    near = (d / top if top > 0 else np.zeros_like(d)) <= threshold
    np.fill_diagonal(near, False)
    return near


def local_sufficiency(distances: np.ndarray, predicted: np.ndarray, threshold: float) -> np.ndarray:
    """Dasgupta et al.'s local sufficiency per sample: among the *other* samples whose explanation
    distance, divided by the largest distance, is at most ``threshold``, the fraction predicted as the
    sample is; 0 where no other sample is that close (the explanation applies to no one else, so
    nothing shows it sufficient: Quantus's convention). In [0, 1], higher is better."""
    near = neighbours(distances, threshold)
    same = np.asarray(predicted)[None, :] == np.asarray(predicted)[:, None]
    count = near.sum(axis=1)
    return np.where(count > 0, (near & same).sum(axis=1) / np.maximum(count, 1), 0.0)
