"""``stats.bootstrap_ci``: hand-written on purpose (docs/architecture.md), checked here against
``scipy.stats.bootstrap`` drawing the same resamples from the same seeded generator."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from scipy.stats import bootstrap

from xaibench.stats import N_BOOTSTRAP, bootstrap_ci, shared_intervals

RNG_KEYWORD = "rng" if "rng" in inspect.signature(bootstrap).parameters else "random_state"  # SciPy < 1.15


def scipy_ci(values: np.ndarray, seed: int) -> tuple[float, float]:
    result = bootstrap(
        (values,),
        np.mean,
        n_resamples=N_BOOTSTRAP,
        method="percentile",
        vectorized=True,
        **{RNG_KEYWORD: np.random.default_rng(seed)},
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


@pytest.mark.parametrize("case", range(40))
def test_bootstrap_ci_equals_scipys_percentile_bootstrap(case: int) -> None:
    rng = np.random.default_rng(case)
    n = int(rng.integers(2, 120))
    values = rng.normal(size=n) if case % 2 else rng.integers(0, 2, n).astype(float)  # scores and 0/1 hits
    seed = int(rng.integers(0, 2**63))
    low, high = bootstrap_ci(values.tolist(), seed)
    want_low, want_high = scipy_ci(values, seed)
    # The same resamples; SciPy's quantile sits at 0.025000000000000022, so the last bits may differ.
    assert low == pytest.approx(want_low, abs=1e-12) and high == pytest.approx(want_high, abs=1e-12)
    assert low <= float(np.mean(values)) <= high


def test_bootstrap_ci_edge_cases_and_seeding() -> None:
    assert bootstrap_ci([], seed=0) != bootstrap_ci([], seed=0)  # (nan, nan): nan equals nothing
    assert all(np.isnan(bootstrap_ci([], seed=0)))
    assert bootstrap_ci([0.25], seed=3) == (0.25, 0.25)
    assert bootstrap_ci([0.5] * 10, seed=3) == (0.5, 0.5)
    values = list(np.random.default_rng(1).normal(size=30))
    assert bootstrap_ci(values, seed=7) == bootstrap_ci(values, seed=7)
    assert bootstrap_ci(values, seed=7) != bootstrap_ci(values, seed=8)
    low, high = bootstrap_ci([0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0], seed=0)
    assert 0.0 <= low < 5 / 8 < high <= 1.0


# ----------------------------------------------------------------------------- shared_intervals


def test_shared_intervals_without_na_are_the_bootstrap_of_each_row_with_the_same_seed() -> None:
    rng = np.random.default_rng(3)
    values = rng.normal(size=(4, 37)) * [[1.0], [10.0], [0.01], [1e3]]
    low, high = shared_intervals(values, 123)
    for row, lo, hi in zip(values, low, high, strict=True):
        want = bootstrap_ci(row, 123)
        assert lo == pytest.approx(want[0], rel=1e-12, abs=1e-15) and hi == pytest.approx(want[1], rel=1e-12)


def test_shared_intervals_with_na_average_the_drawn_ids_that_have_a_value() -> None:
    """Oracle: the resamples drawn one by one (the same draws as resample_counts), each mean taken
    over the drawn ids with a value, with multiplicity; resamples that draw none are left out."""
    values = np.array([[1.0, np.nan, 3.0, np.nan, 10.0], [np.nan, np.nan, np.nan, 4.0, np.nan]])
    draws = np.random.default_rng(7).integers(0, 5, size=(N_BOOTSTRAP, 5))
    low, high = shared_intervals(values, 7)
    for m, row in enumerate(values):
        means = [np.nanmean(row[d]) for d in draws if not np.isnan(row[d]).all()]
        assert (low[m], high[m]) == pytest.approx(tuple(np.percentile(means, [2.5, 97.5])), rel=1e-12)
    assert low[1] == high[1] == 4.0  # one value: (value, value), as bootstrap_ci gives
    assert len([d for d in draws if np.isnan(values[1][d]).all()]) > 100  # the oracle did leave some out


def test_shared_intervals_rows_do_not_depend_on_each_other_and_edges() -> None:
    values = np.random.default_rng(0).uniform(size=(3, 20))
    values[2, ::3] = np.nan
    low, high = shared_intervals(values, 5)
    for m in range(3):
        (lo,), (hi,) = shared_intervals(values[m][None], 5)
        assert (lo, hi) == pytest.approx((low[m], high[m]), rel=1e-14)
    low, high = shared_intervals(np.full((1, 4), np.nan), 5)
    assert np.isnan(low[0]) and np.isnan(high[0])
    assert all(np.isnan(x).all() for x in shared_intervals(np.zeros((2, 0)), 5))
    other = shared_intervals(values, 6)
    assert not np.array_equal(other[0], low)  # another seed, another resample
