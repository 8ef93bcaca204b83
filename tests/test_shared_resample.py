"""Paired comparisons from one shared resample per (track, metric) (DESIGN 7, issue 28):
``stats.paired_intervals`` against a direct per-pair sum over the same resample, on data with
n/a, ties and explainers with disjoint samples; ``compare`` and ``rank_metric`` agree."""

from __future__ import annotations

import numpy as np
import pytest

from xaibench.publish.leaderboard import Entry, compare, paired_table, rank_metric, resample_ids
from xaibench.seeds import derive_seed
from xaibench.stats import N_BOOTSTRAP, bootstrap_ci, paired_intervals, paired_signs, resample_counts


def reference(
    values: np.ndarray, mask: np.ndarray, counts: np.ndarray, min_shared: int
) -> dict[tuple[int, int], tuple[int, float, float]]:
    """Pair (i, j), i < j -> (shared, low, high), one pair at a time: each resample's mean of
    v_i - v_j over its drawn ids both have (a resample with none is left out), then the 2.5 and
    97.5 percentiles; (shared, nan, nan) below ``min_shared``."""
    out: dict[tuple[int, int], tuple[int, float, float]] = {}
    for i in range(len(values)):
        for j in range(i + 1, len(values)):
            both = mask[i] & mask[j]
            if both.sum() < min_shared:
                out[(i, j)] = (int(both.sum()), np.nan, np.nan)
                continue
            d = np.where(both, values[i] - values[j], 0.0)
            means = [float((c * d).sum() / (c * both).sum()) for c in counts if (c * both).sum() > 0]
            low, high = np.percentile(means, [2.5, 97.5])
            out[(i, j)] = (int(both.sum()), float(low), float(high))
    return out


def field(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """8 explainers on 60 ids: random values with about 10 % n/a; #1 a copy of #0 (all
    differences 0); #2 equal to #0 but on 3 of 60 ids (most differences exactly 0, and more
    than 2.5 % of the resamples draw none of the 3); #3 and #4 on
    disjoint halves (no shared id); #5 on 9 ids only; #6, #7 random with 30 % n/a."""
    rng = np.random.default_rng(seed)
    n_ids = 60
    values = rng.normal(0.3, 0.2, size=(8, n_ids))
    mask = rng.random((8, n_ids)) > 0.1
    values[1], mask[1] = values[0], mask[0]
    values[2], mask[2] = values[0].copy(), mask[0] | True
    values[2, [4, 17, 33]] += 0.3
    mask[3] = np.arange(n_ids) < 30
    mask[4] = np.arange(n_ids) >= 30
    mask[5] = np.isin(np.arange(n_ids), [1, 2, 3, 5, 8, 13, 21, 34, 55])
    mask[6:] = rng.random((2, n_ids)) > 0.3
    return values, mask


def test_resample_counts_are_the_seeded_draws_counted() -> None:
    counts = resample_counts(7, seed=11, n_boot=5)
    draws = np.random.default_rng(11).integers(0, 7, size=(5, 7))
    assert counts.shape == (5, 7) and (counts.sum(axis=1) == 7).all()
    assert (counts == np.array([np.bincount(row, minlength=7) for row in draws])).all()


@pytest.mark.parametrize("seed", [0, 1])
def test_paired_intervals_match_a_direct_sum_per_pair(seed: int) -> None:
    values, mask = field(seed)
    counts = resample_counts(values.shape[1], derive_seed(seed, "test"), 400)
    shared, low, high = paired_intervals(np.where(mask, values, np.nan), mask, counts, min_shared=8)
    expected = reference(values, mask, counts, 8)
    for (i, j), (n, lo, hi) in expected.items():
        assert shared[i, j] == shared[j, i] == n
        if np.isnan(lo):
            assert np.isnan(low[i, j]) and np.isnan(high[i, j]), (i, j)
        else:
            assert (low[i, j], high[i, j]) == pytest.approx((lo, hi), abs=1e-12), (i, j)
    assert (shared[3, 4], shared[0, 5] <= 9) == (0, True)
    assert np.isnan(low[3, 4]) and np.isnan(low[np.tril_indices(8)]).all()  # bounds for i < j only
    assert (low[0, 1], high[0, 1]) == (0.0, 0.0)  # a copy: every difference is 0, exactly
    assert high[0, 2] == expected[(0, 2)][2] == 0.0  # resamples drawing only equal ids give exactly 0
    assert low[0, 2] < 0  # #2 is 0.3 higher on 3 ids


def test_binary_values_give_the_direct_sums_bit_for_bit() -> None:
    rng = np.random.default_rng(5)
    values = (rng.random((5, 40)) > 0.5).astype(float)
    values[1] = np.maximum(values[0], rng.random(40) > 0.9)  # #1 >= #0, equal on most ids
    mask = rng.random((5, 40)) > 0.05
    counts = resample_counts(40, 3)
    shared, low, high = paired_intervals(values, mask, counts, min_shared=8)
    for (i, j), (n, lo, hi) in reference(values, mask, counts, 8).items():
        assert (shared[i, j], low[i, j], high[i, j]) == (n, lo, hi)


def entry(name: str, samples: dict[str, float | None], direction: str = "higher") -> Entry:
    values = [v for v in samples.values() if v is not None]
    mean = sum(values) / len(values) if values else None
    return Entry("t", name, "iou", "alignment", direction, True, mean, mean, mean, len(values), 0, samples)


def test_without_na_the_paired_interval_is_the_bootstrap_of_the_differences_on_the_shared_draws() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=30), rng.normal(size=30) + 0.5
    ids = [f"s{k:02d}" for k in range(30)]
    first = entry("a", dict(zip(ids, a.tolist(), strict=True)))
    c = compare(first, entry("b", dict(zip(ids, b.tolist(), strict=True))))
    expected = bootstrap_ci((a - b).tolist(), derive_seed(0, "paired", "t", "iou"))
    assert (c.shared, c.winner) == (30, "b")
    assert (c.low, c.high) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("direction", ["higher", "lower"])
def test_rank_metric_counts_the_wins_of_compare_on_the_same_resample(direction: str) -> None:
    values, mask = field(3)
    values[7] = values[6] + 0.4  # a clear win for 7 over 6
    mask[7] = mask[6]
    ids = [f"s{k:02d}" for k in range(values.shape[1])]
    entries = [
        entry(f"x{e}", {s: (float(values[e, k]) if mask[e, k] else None) for k, s in enumerate(ids)}, direction)
        for e in range(len(values))
    ]
    assert resample_ids(entries) == ids
    pairs = {(a.explainer, b.explainer): compare(a, b) for a in entries for b in entries if a.explainer < b.explainer}
    assert pairs[("x6", "x7")].winner == ("x7" if direction == "higher" else "x6")
    assert pairs[("x0", "x1")].winner is None and (pairs[("x0", "x1")].low, pairs[("x0", "x1")].high) == (0, 0)
    assert pairs[("x3", "x4")] == compare(entries[3], entries[4]) and pairs[("x3", "x4")].shared == 0
    table = paired_table(entries)
    assert all(table.comparison(a, b) == c for (a, b), c in pairs.items())
    beaten = {e.explainer: 0 for e in entries}
    most = {e.explainer: 0 for e in entries}
    for (a, b), c in pairs.items():
        most[a], most[b] = max(most[a], c.shared), max(most[b], c.shared)
        if c.winner is not None:
            beaten[b if c.winner == a else a] += 1
    expected = {x: (1 + beaten[x], "") if most[x] >= 8 else (None, f"too few samples (n = {most[x]})") for x in beaten}
    assert rank_metric(entries) == expected
    assert rank_metric(entries[::-1]) == expected  # order free


def test_compare_resamples_the_given_ids() -> None:
    """``compare`` alone resamples the union of its two entries' ids; given the metric's union
    (a third explainer's extra ids), it agrees with the table of all three."""
    rng = np.random.default_rng(4)
    ids = [f"s{k:02d}" for k in range(20)]
    a = entry("a", {s: float(v) for s, v in zip(ids[:16], rng.normal(size=16), strict=True)})
    b = entry("b", {s: float(v) for s, v in zip(ids[:16], rng.normal(size=16) + 3.0, strict=True)})
    c = entry("c", {s: float(v) for s, v in zip(ids, rng.normal(size=20), strict=True)})
    union = resample_ids([a, b, c])
    assert union == ids and resample_ids([a, b]) == ids[:16]
    assert compare(a, b, ids=union) == paired_table([a, b, c]).comparison("a", "b")
    assert compare(a, b) != compare(a, b, ids=union)  # another resample: another interval
    assert compare(a, b).winner == compare(a, b, ids=union).winner == "b"
    assert N_BOOTSTRAP == 1000


@pytest.mark.parametrize("seed", range(4))
def test_paired_signs_are_the_signs_of_the_interval_bounds(seed: int) -> None:
    """The winners-only path (counting resample means <= 0 and < 0, percentiles only where the
    count is undecided) gives exactly ``low > 0`` and ``high < 0``, also for pairs whose interval
    touches 0 (copies, equal values on most ids, small shifts) and with n/a."""
    values, mask = field(seed)
    rng = np.random.default_rng(seed + 10)
    values[6] = values[7] + rng.normal(0.03, 0.1, values.shape[1])  # a shift near the edge of the interval
    values = np.concatenate([values, (rng.random((3, values.shape[1])) > 0.5).astype(float)])
    mask = np.concatenate([mask, rng.random((3, values.shape[1])) > 0.02])
    counts = resample_counts(values.shape[1], seed)
    shared, low, high = paired_intervals(values, mask, counts, min_shared=8)
    shared_too, above, below = paired_signs(values, mask, counts, min_shared=8)
    assert (shared == shared_too).all()
    with np.errstate(invalid="ignore"):
        assert (above == (low > 0)).all() and (below == (high < 0)).all()
    assert (above | below).any() and not (above | below)[0, 1]


@pytest.mark.parametrize(("negatives", "above", "below"), [(1, True, False), (39, False, True), (2, False, False)])
def test_paired_signs_take_the_percentile_where_counting_cannot_decide(
    negatives: int, above: bool, below: bool
) -> None:
    """40 hand-made resamples of 2 ids: a - b is +1 on the first id and -1 on the second, so a
    resample drawing only the first has mean +1, only the second -1. With 1 mean of -1 the low
    bound interpolates between -1 and +1 (index 0.975): 0.95 > 0, though one mean is <= 0; with
    39, the high bound is -0.95 < 0; with 2, the low bound is -1 (a tie)."""
    values = np.array([[1.0, -1.0], [0.0, 0.0]])
    mask = np.ones((2, 2), dtype=bool)
    counts = np.array([[0.0, 2.0]] * negatives + [[2.0, 0.0]] * (40 - negatives))
    _, low, high = paired_intervals(values, mask, counts, min_shared=1)
    _, up, down = paired_signs(values, mask, counts, min_shared=1)
    assert (low[0, 1] > 0, high[0, 1] < 0) == (up[0, 1], down[0, 1]) == (above, below)
    if negatives == 1:
        assert low[0, 1] == pytest.approx(0.95)
