"""``stats.bootstrap_ci``: hand-written on purpose (docs/architecture.md), checked here against
``scipy.stats.bootstrap`` drawing the same resamples from the same seeded generator."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from scipy.stats import bootstrap

from xaibench.stats import N_BOOTSTRAP, bootstrap_ci

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
