"""The graded-oracle ladder: is an alignment metric able to tell the ground truth from noise? (DESIGN 9)

The built-in reference explainer ``ladder`` (:mod:`xaibench.explainers.ladder`) gives
E_a = (1 - a) G + a U for a in :data:`LEVELS`; the runner scores it like any explainer (workers,
cache). :func:`ladder_validity` reads the per-sample values of one metric at every level, signed
so that higher is better, on the samples that have a value at every level, and decides:

- m(a) is the mean over those samples, with its 95 % bootstrap interval;
- **valid** when m never rises from one level to the next by more than the half-width of the next
  level's interval, and the paired interval of m(0) - m(1) lies above 0;
- **invalid** otherwise: the interval of m(0) - m(1) lies below 0 or contains 0 (the metric cannot
  tell the ground truth from noise), or m rises along the ladder (the figure says which);
- the Spearman correlation of (-a, m) is reported beside it.

Every interval is seeded by ``derive_seed(seed, "meta", track, metric, "ladder", ...)``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from scipy.stats import spearmanr

from xaibench.metaeval.assess import Validity
from xaibench.metaeval.rankings import signed
from xaibench.seeds import derive_seed
from xaibench.stats import bootstrap_ci

LEVELS: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
TEST = "ladder"
FIGURE = "m(0) - m(1)"


def ladder_validity(
    values: Mapping[float, Mapping[str, float | None]], direction: str, *, seed: int, track: str, metric: str
) -> Validity:
    """The ladder's verdict on one (track, metric) from ``values[a][sample id]`` (see the module doc)."""
    levels = sorted(values)
    if len(levels) < 2:
        return Validity(details={"reason": "fewer than two levels scored"})
    ids = sorted(set.intersection(*({s for s, v in values[a].items() if v is not None} for a in levels)))
    if len(ids) < 2:
        return Validity(details={"reason": f"too few samples with a value at every level (n = {len(ids)})"})
    table = signed(np.array([[float(values[a][s]) for s in ids] for a in levels]), direction)  # type: ignore[arg-type]
    means = table.mean(axis=1)
    intervals = [
        bootstrap_ci(row.tolist(), derive_seed(seed, "meta", track, metric, "ladder", a))
        for a, row in zip(levels, table, strict=True)
    ]
    rises = [
        (levels[k], levels[k + 1])
        for k in range(len(levels) - 1)
        if means[k + 1] - means[k] > (intervals[k + 1][1] - intervals[k + 1][0]) / 2
    ]
    difference = table[0] - table[-1]
    low, high = bootstrap_ci(difference.tolist(), derive_seed(seed, "meta", track, metric, "ladder", "difference"))
    separates = low > 0
    verdict = "valid" if separates and not rises else "invalid"
    rho = spearmanr(-np.array(levels), means).statistic if np.ptp(means) > 0 else float("nan")
    details = {
        "levels": list(levels),
        "m": [float(m) for m in means],
        "ci": [[float(lo), float(hi)] for lo, hi in intervals],
        "spearman": None if np.isnan(rho) else float(rho),
        "n": len(ids),
        "rises": [list(r) for r in rises],
    }
    return Validity(verdict, TEST, FIGURE, float(difference.mean()), float(low), float(high), details)
