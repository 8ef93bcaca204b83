"""The leaderboard's bootstrap (``xaibench.stats.bootstrap_ci``) against ``scipy.stats.bootstrap``.

Both draw the same resamples from the same seeded generator (percentile intervals, 1000
resamples, 95 %). Prints how many of 300 random cases give bit-identical bounds, the largest
difference, and the time per call of each at 8, 64 and 500 values with their ratio (measured in
one run). Why the hand-written one stays: ``docs/architecture.md``, "Hand-written on purpose".

Run: ``.venv/bin/python bench/bench_bootstrap.py``.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.stats import bootstrap

from xaibench.stats import bootstrap_ci


def scipy_ci(values: list[float], seed: int, n_boot: int = 1000) -> tuple[float, float]:
    arr = np.asarray(values, dtype=np.float64)
    res = bootstrap(
        (arr,), np.mean, n_resamples=n_boot, method="percentile", rng=np.random.default_rng(seed), vectorized=True
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def per_call(fn, values: list[float], calls: int = 200) -> float:
    fn(values, 1)
    start = time.perf_counter()
    for seed in range(calls):
        fn(values, seed)
    return (time.perf_counter() - start) / calls


def main() -> None:
    rng = np.random.default_rng(0)
    worst, exact, total = 0.0, 0, 300
    for trial in range(total):
        n = int(rng.integers(2, 300))
        values = rng.normal(size=n) if trial % 3 else rng.integers(0, 2, n).astype(float)
        seed = int(rng.integers(0, 2**63))
        ours, theirs = bootstrap_ci(values.tolist(), seed), scipy_ci(values.tolist(), seed)
        exact += ours == theirs
        worst = max(worst, abs(ours[0] - theirs[0]), abs(ours[1] - theirs[1]))
    print(f"equality: {exact} of {total} cases bit-identical, largest difference {worst:.2g}")
    for n in (8, 64, 500):
        values = rng.normal(size=n).tolist()
        ours, theirs = per_call(bootstrap_ci, values), per_call(scipy_ci, values)
        print(f"n = {n:3d}: ours {ours * 1e6:7.1f} us, scipy {theirs * 1e6:7.1f} us, scipy / ours {theirs / ours:4.2f}")


if __name__ == "__main__":
    main()
