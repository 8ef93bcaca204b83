"""Summary statistics of per-sample values: mean and a seeded 95 % bootstrap interval."""

from __future__ import annotations

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


def summarise(records: Sequence[dict[str, Any]], *, seed: int, label: str) -> dict[str, Any]:
    """Mean, interval and counts of a metric's records (n counts values, n_na the n/a), and the
    per-sample values (``samples``: sample id -> value, ``None`` for n/a) that paired ranking and
    ``xaibench submission verify`` read."""
    values = [r["value"] for r in records if r.get("value") is not None]
    reasons = Counter(r["na_reason"] for r in records if r.get("value") is None)
    low, high = bootstrap_ci(values, derive_seed(seed, "bootstrap", label))
    mean = float(np.mean(values)) if values else None
    passes = [r.get("forward_passes", 0) for r in records]
    return {
        "mean": mean,
        "ci_low": low if values else None,
        "ci_high": high if values else None,
        "n": len(values),
        "n_na": sum(reasons.values()),
        "na_reasons": dict(reasons.most_common(5)),
        "forward_passes_per_sample": float(np.mean(passes)) if passes else 0.0,
        "samples": {str(r["sample_id"]): r.get("value") for r in records if "sample_id" in r},
    }
