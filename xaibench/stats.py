"""Summary statistics of per-sample values: mean and a seeded 95 % bootstrap interval, and the
paired intervals of many explainers from one shared resample (:func:`paired_intervals`)."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from xaibench.seeds import derive_seed

N_BOOTSTRAP = 1000


def bootstrap_ci(values: Sequence[float], seed: int, n_boot: int = N_BOOTSTRAP) -> tuple[float, float]:
    """Percentile 95 % interval ``(low, high)`` of the mean, in the values' units, from ``n_boot``
    resamples drawn by ``numpy.random.default_rng(seed)`` (vectorised). One value gives
    ``(value, value)``, none ``(nan, nan)``.

    Hand-written on purpose (docs/architecture.md): ``scipy.stats.bootstrap(method="percentile")``
    draws the same resamples from the same generator and agrees to 4.4e-16, but not bit for bit
    (it takes the quantile at ``(1 - 0.95) / 2``, which is 0.025000000000000022), and it is
    2x to 4x slower at the 8 to 64 values of a leaderboard cell; the golden leaderboard values
    compare exactly. ``tests/test_stats.py`` checks this function against SciPy.
    """
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return float("nan"), float("nan")
    if arr.size == 1:
        return float(arr[0]), float(arr[0])
    rng = np.random.default_rng(seed)
    means = arr[rng.integers(0, arr.size, size=(n_boot, arr.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def resample_counts(n: int, seed: int, n_boot: int = N_BOOTSTRAP) -> np.ndarray:
    """``(n_boot, n)`` float counts: how often each of ``n`` ids is drawn in each of ``n_boot``
    resamples of ``n`` draws with replacement. The draws are those of :func:`bootstrap_ci`,
    ``numpy.random.default_rng(seed).integers(0, n, size=(n_boot, n))``; each row sums to ``n``.
    The array is the transpose of a C-ordered ``(n, n_boot)`` one (what the products read)."""
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    idx *= n_boot
    idx += np.arange(n_boot, dtype=idx.dtype)[:, None]  # draw of id s in resample r -> s * n_boot + r
    return np.bincount(idx.ravel(), minlength=n_boot * n).astype(np.float64).reshape(n, n_boot).T


INTERVAL_RULE = "shared-resample/1"
"""The rule of the intervals this version writes (a submission's and a run summary's
``intervals``): :func:`shared_intervals`, one resample per (run seed, track) shared by every
explainer and metric of the track. Files without the field were written with the earlier rule,
:func:`bootstrap_ci` over a metric's values seeded by its label; both are still checked."""


@functools.lru_cache(maxsize=32)
def _shared_counts(n: int, seed: int) -> np.ndarray:
    """:func:`resample_counts` kept for the next metric or file of the same track (read-only;
    8 MB for 1,000 ids, at most 32 kept)."""
    counts = resample_counts(n, seed)
    counts.flags.writeable = False
    return counts


def interval_seed(seed: int, track: str) -> int:
    """The seed of the shared resample of ``track``'s sample ids in a run seeded ``seed``."""
    return derive_seed(seed, "bootstrap", track)


def shared_intervals(values: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Percentile 95 % intervals ``(low, high)`` of the mean of each row of ``values`` (``(M, n)``:
    M metrics or explainers over the same n sample ids in the same order, NaN for n/a), in the
    values' units, from one shared set of resamples of the n ids (:func:`resample_counts` with
    ``seed``, usually :func:`interval_seed`). In each resample a row's mean is taken over the drawn
    ids that have a value; resamples that draw none of them are left out. With no n/a this is
    :func:`bootstrap_ci` of the row with the same seed (to rounding: a product instead of a
    gather). A row with one value gives ``(value, value)``, none ``(nan, nan)``. Cost: two
    ``(B, n) @ (n, M)`` products, whatever M, and the resample is built once per (n, seed)."""
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    rows, n = values.shape
    low, high = np.full(rows, np.nan), np.full(rows, np.nan)
    if n == 0:
        return low, high
    mask = ~np.isnan(values)
    counts = _shared_counts(n, int(seed))
    num = counts @ np.where(mask, values, 0.0).T  # (B, M)
    den = counts @ mask.T.astype(np.float64)
    full = (den > 0).all(axis=0) & mask.any(axis=1)
    if full.any():
        low[full], high[full] = np.percentile(num[:, full] / den[:, full], [2.5, 97.5], axis=0)
    for m in np.flatnonzero(~full & mask.any(axis=1)):
        drawn = den[:, m] > 0
        low[m], high[m] = np.percentile(num[drawn, m] / den[drawn, m], [2.5, 97.5])
    return low, high


_EPS = float(np.finfo(np.float64).eps)


def _paired_sums(
    values: np.ndarray, mask: np.ndarray, counts: np.ndarray, min_shared: int, *, with_den: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray, np.ndarray]:
    """``(shared, i, j, num, den, bound, drawn)``: (E, E) shared counts, the pairs ``i < j`` with
    at least ``min_shared`` shared ids, and per pair and resample (pairs, B) the sum of the drawn
    differences over shared ids and their number (``None`` unless ``with_den``), per pair the
    rounding bound of ``num`` below which it is 0 (see :func:`paired_intervals`), and per pair
    whether every resample surely draws a shared id (each resample draws S ids, at most
    max_r(draws of ids i lacks) + max_r(draws of ids j lacks) of them ids one of the pair lacks)."""
    n_exp, n_ids = values.shape
    n_boot = counts.shape[0]
    m = mask.astype(np.float64)
    w = np.where(mask, values, 0.0)
    shared = np.rint(m @ m.T).astype(np.int64)
    i, j = np.triu_indices(n_exp, 1)
    keep = shared[i, j] >= max(min_shared, 1)
    i, j = i[keep], j[keep]
    if i.size == 0:
        empty = np.empty((0, n_boot))
        return shared, i, j, empty, empty, np.empty(0), np.empty(0, dtype=bool)
    ct = counts.T  # (S, B)
    source = np.concatenate([w, m]) if with_den else w  # (2E or E, S): values, then presence
    sums = source @ ct  # per resample, sums over each explainer's ids
    pair = np.full((n_exp, n_exp), -1)
    pair[i, j] = np.arange(i.size)
    num = sums[i] - sums[j]  # (pairs, B), less the sums over ids one of the pair lacks, below
    den = sums[n_exp + i] if with_den else None
    most_lacked = np.zeros(n_exp)  # per explainer: the most draws of ids it lacks in a resample
    part = np.empty((len(source), n_boot))
    for b in np.unique(np.concatenate([i, j])):
        lack = np.flatnonzero(~mask[b])
        if not lack.size:
            continue
        drawn_lacked = ct[lack]
        most_lacked[b] = drawn_lacked.sum(axis=0).max()
        np.matmul(source[:, lack], drawn_lacked, out=part)  # every explainer's sums over the ids b lacks
        below = i[j == b]  # pairs (a, b): a's sums lose the ids b lacks
        rows = pair[below, b]
        num[rows] -= part[below]
        if den is not None:
            den[rows] -= part[n_exp + below]
        above = j[i == b]  # pairs (b, a): so do a's, on the other side of the difference
        num[pair[b, above]] += part[above]
    drawn = most_lacked[i] + most_lacked[j] < n_ids
    vmax = np.max(np.abs(w), axis=1)
    bound = (2 * n_ids + 8) * _EPS * n_ids * (vmax[i] + vmax[j])  # rounding of sums of <= n_ids draws
    return shared, i, j, num, den, bound, drawn


def _paired_means(
    values: np.ndarray, mask: np.ndarray, counts: np.ndarray, min_shared: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(shared, i, j, means, drawn)``: as :func:`_paired_sums`, with the mean differences
    (NaN where a resample drew no shared id) and whether it drew one."""
    shared, i, j, num, den, bound, _ = _paired_sums(values, mask, counts, min_shared)
    assert den is not None
    num[np.abs(num) <= bound[:, None]] = 0.0
    drawn = den > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        means = num / den
    if not drawn.all():
        means[~drawn] = np.nan
    return shared, i, j, means, drawn


def paired_intervals(
    values: np.ndarray, mask: np.ndarray, counts: np.ndarray, min_shared: int = 2
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Percentile 95 % intervals of the paired mean differences of ``E`` explainers from one
    shared resample of their ``S`` ids.

    ``values`` (E, S) and ``mask`` (E, S, True where the explainer has a value; values elsewhere
    are ignored), ``counts`` (B, S) from :func:`resample_counts`. For each pair ``i < j`` with at
    least ``min_shared`` shared ids (both have a value), resample r gives the mean of
    ``values[i] - values[j]`` over its draws of shared ids,
    ``sum_s c_rs m_is m_js (v_is - v_js) / sum_s c_rs m_is m_js`` (a resample that draws no
    shared id is left out), and the interval is ``numpy.percentile`` at 2.5 and 97.5 of those
    means, as in :func:`bootstrap_ci`. Returns ``(shared, low, high)``: (E, E) shared counts, and
    (E, E) bounds set for ``i < j`` with enough shared ids (NaN elsewhere), in the values' units.

    Cost: one (2E, S) x (S, B) product for the sums over each explainer's ids, plus, per
    explainer ``j`` with n/a, a product over the ids ``j`` lacks that takes them out of the sums
    of its pairs (fast when n/a are sparse; none without n/a); memory: two (pairs, B) arrays. A
    resample's sum of differences within the float rounding bound of these sums of 0
    (``(2 S + 8) eps S (max|v_i| + max|v_j|)``) counts as exactly 0, so differences that are all
    0 give the interval (0, 0), and resamples of equal values a mean of exactly 0, as a direct
    sum would.
    """
    n_exp = len(values)
    shared, i, j, means, drawn = _paired_means(values, mask, counts, min_shared)
    low = np.full((n_exp, n_exp), np.nan)
    high = np.full((n_exp, n_exp), np.nan)
    full = drawn.all(axis=1)
    if full.any():
        bounds = np.percentile(means[full], [2.5, 97.5], axis=1)
        low[i[full], j[full]], high[i[full], j[full]] = bounds[0], bounds[1]
    for k in np.flatnonzero(~full):
        row = means[k, drawn[k]]
        if row.size:
            low[i[k], j[k]], high[i[k], j[k]] = np.percentile(row, [2.5, 97.5])
    return shared, low, high


def paired_signs(
    values: np.ndarray, mask: np.ndarray, counts: np.ndarray, min_shared: int = 2
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What ranking needs of :func:`paired_intervals`, without the intervals: ``(shared, above,
    below)``, (E, E) with ``above[i, j]`` the interval of mean(values[i] - values[j]) lies above 0
    (its low bound > 0) and ``below[i, j]`` below 0 (high bound < 0), for ``i < j`` with enough
    shared ids (False elsewhere). Decided by counting the resample means <= 0 and < 0 (a
    percentile between two order statistics of one sign has that sign); a pair whose count puts
    0 between the two order statistics a bound interpolates gets ``numpy.percentile`` itself, so
    the answer is exactly that of the bounds."""
    n_exp = len(values)
    shared, i, j, num, _, bound, surely = _paired_sums(values, mask, counts, min_shared, with_den=False)
    above = np.zeros((n_exp, n_exp), dtype=bool)
    below = np.zeros((n_exp, n_exp), dtype=bool)
    if i.size == 0:
        return shared, above, below
    ct = counts.T

    def den_of(rows: np.ndarray) -> np.ndarray:  # the drawn shared ids of these pairs, (rows, B)
        return (mask[i[rows]] & mask[j[rows]]).astype(np.float64) @ ct

    edge = bound[:, None]
    n = np.full(i.size, num.shape[1])
    not_positive = np.count_nonzero(num <= edge, axis=1)  # the sign of a mean is that of its sum
    negative = np.count_nonzero(num < -edge, axis=1)
    maybe = np.flatnonzero(~surely)  # pairs a resample may draw no shared id of: count only drawn ones
    if maybe.size:
        drawn = den_of(maybe) > 0
        n[maybe] = np.count_nonzero(drawn, axis=1)
        not_positive[maybe] = np.count_nonzero((num[maybe] <= edge[maybe]) & drawn, axis=1)
        negative[maybe] = np.count_nonzero((num[maybe] < -edge[maybe]) & drawn, axis=1)
    k_low = np.floor(0.025 * (n - 1)).astype(np.int64)  # low interpolates order statistics k, k + 1
    k_high = np.floor(0.975 * (n - 1)).astype(np.int64)
    up = not_positive <= k_low  # the k-th smallest is > 0
    down = negative >= k_high + 2  # the (k + 1)-th smallest is < 0
    unsure = np.flatnonzero(((not_positive == k_low + 1) | (negative == k_high + 1) | (n < 2)) & (n > 0))
    if unsure.size:
        sums, counted = num[unsure], den_of(unsure)
        sums[np.abs(sums) <= edge[unsure]] = 0.0
        for row, k in enumerate(unsure):
            drawn_k = counted[row] > 0
            low, high = np.percentile(sums[row, drawn_k] / counted[row, drawn_k], [2.5, 97.5])
            up[k], down[k] = low > 0, high < 0
    above[i, j], below[i, j] = up & (n > 0), down & (n > 0)
    return shared, above, below


def summarise(records: Sequence[dict[str, Any]], *, seed: int, track: str) -> dict[str, Any]:
    """Mean, interval and counts of a metric's records on ``track`` (n counts values, n_na the
    n/a), and the per-sample values (``samples``: sample id -> value, ``None`` for n/a) that paired
    ranking and ``xaibench submission verify`` read. The interval is :func:`shared_intervals`
    over the records in their order (the track's), seeded by :func:`interval_seed` (rule
    :data:`INTERVAL_RULE`)."""
    values = [r["value"] for r in records if r.get("value") is not None]
    reasons = Counter(r["na_reason"] for r in records if r.get("value") is None)
    row = np.array([np.nan if r.get("value") is None else r["value"] for r in records], dtype=np.float64)
    (low,), (high,) = shared_intervals(row[None], interval_seed(seed, track))
    mean = float(np.mean(values)) if values else None
    passes = [r.get("forward_passes", 0) for r in records]
    return {
        "mean": mean,
        "ci_low": float(low) if values else None,
        "ci_high": float(high) if values else None,
        "n": len(values),
        "n_na": sum(reasons.values()),
        "na_reasons": dict(reasons.most_common(5)),
        "forward_passes_per_sample": float(np.mean(passes)) if passes else 0.0,
        "samples": {str(r["sample_id"]): r.get("value") for r in records if "sample_id" in r},
    }
