"""Kendall tau-b between explainer rankings, and rankings under paired resampling (DESIGN 9).

Everything here works on one matrix of per-sample values, ``values[e, s]``: explainer ``e``'s
value of one metric on sample ``s``, over the samples where every explainer has a value (paired:
a resample draws the same sample ids for every explainer). Values are *signed* by the metric's
direction first (:func:`signed`), so that a larger mean is always better. Pure numpy, no loop over
samples; the resamples are drawn from a generator seeded by the caller.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

BOOTSTRAP = 200  # paired resamples (DESIGN 9)
SUBSAMPLES = 50  # subsamples per size for the n at which tau reaches TAU_TARGET
TAU_TARGET = 0.9
UNSTABLE_BELOW = 0.5  # the 5th percentile of tau under which a metric is flagged ``unstable``
FIRST_SIZE = 8


def signed(values: np.ndarray, direction: str) -> np.ndarray:
    """``values`` oriented so that higher is better (``direction`` ``"lower"`` negates them)."""
    return -values if direction == "lower" else values


def kendall_tau_b(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's tau-b between ``x`` and each row of ``y`` (``x``: ``(E,)``; ``y``: ``(E,)`` or
    ``(B, E)``), ties in either counted as tau-b does; NaN where either side is all ties. Equal
    to ``scipy.stats.kendalltau(x, y_b).statistic`` for each row."""
    y2 = np.atleast_2d(y)
    i, j = np.triu_indices(len(x), k=1)
    dx = np.sign(x[i] - x[j])
    dy = np.sign(y2[:, i] - y2[:, j])
    s = (dx * dy).sum(axis=1)
    denominator = np.sqrt(float(np.count_nonzero(dx)) * np.count_nonzero(dy, axis=1).astype(float))
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = np.where(denominator > 0, s / np.where(denominator > 0, denominator, 1.0), np.nan)
    return tau if np.ndim(y) == 2 else tau[0]


@dataclass(frozen=True)
class Stability:
    """How stable one metric's explainer ranking is on one track (DESIGN 9, a flag).

    ``mean_tau`` and ``p05_tau``: the mean and 5th percentile of Kendall tau-b between the
    ranking by mean on each paired bootstrap resample and on all samples (1 = the same ranking;
    higher is more stable). ``p_top``: the fraction of resamples whose best explainer is the
    full sample's best (ties for first count as staying first). ``n_for_tau``: the smallest
    subsample size (8, 16, 32, ... below ``n``) whose mean tau over 50 subsamples without
    replacement reaches 0.9, ``None`` when none does (reported as "> n"). ``n``: the paired
    samples, ``explainers``: how many were ranked. ``reason`` says why the figures are missing
    (NaN) when they are."""

    mean_tau: float
    p05_tau: float
    p_top: float
    n_for_tau: int | None
    n: int
    explainers: int
    reason: str | None = None

    @property
    def unstable(self) -> bool:
        """The flag: the 5th percentile of tau is below 0.5."""
        return not math.isnan(self.p05_tau) and self.p05_tau < UNSTABLE_BELOW


def _means(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``(B, E)`` means of ``values[:, index[b]]`` for each row ``b`` of ``index``."""
    return values[:, index].mean(axis=2).T


def rank_stability(values: np.ndarray, rng: np.random.Generator) -> Stability:
    """The :class:`Stability` of the ranking of the rows of ``values`` (explainers x paired
    samples, signed so that higher is better)."""
    explainers, n = values.shape
    nan = float("nan")
    if explainers < 2:
        return Stability(nan, nan, nan, None, n, explainers, "fewer than two explainers to rank")
    if n < 2:
        return Stability(nan, nan, nan, None, n, explainers, f"too few paired samples (n = {n})")
    full = values.mean(axis=1)
    if np.all(full == full[0]):
        return Stability(nan, nan, nan, None, n, explainers, "every explainer has the same mean")
    boot = _means(values, rng.integers(0, n, size=(BOOTSTRAP, n)))
    taus = kendall_tau_b(full, boot)
    best = full.max()
    firsts = full == best
    top = boot.max(axis=1, keepdims=True)
    stays = (boot[:, firsts] == top).any(axis=1)
    n_for = None
    size = FIRST_SIZE
    while size < n:
        picks = np.stack([rng.permutation(n)[:size] for _ in range(SUBSAMPLES)])
        if np.nanmean(kendall_tau_b(full, _means(values, picks))) >= TAU_TARGET:
            n_for = size
            break
        size *= 2
    valid = taus[~np.isnan(taus)]
    mean_tau = float(valid.mean()) if valid.size else nan
    p05 = float(np.percentile(valid, 5)) if valid.size else nan
    return Stability(mean_tau, p05, float(stays.mean()), n_for, n, explainers)


@dataclass(frozen=True)
class Agreement:
    """Kendall tau-b between two metrics' explainer rankings on one track, with the 2.5th and
    97.5th percentiles over paired bootstrap resamples (1: the same order, -1: reversed)."""

    tau: float
    low: float
    high: float
    n: int


def agreement(first: np.ndarray, second: np.ndarray, rng: np.random.Generator) -> Agreement:
    """The :class:`Agreement` of two signed value matrices over the same explainers (rows) and
    the same paired samples (columns)."""
    n = first.shape[1]
    nan = float("nan")
    if first.shape[0] < 2 or n < 2:
        return Agreement(nan, nan, nan, n)
    tau = float(kendall_tau_b(first.mean(axis=1), second.mean(axis=1)))
    index = rng.integers(0, n, size=(BOOTSTRAP, n))
    a, b = _means(first, index), _means(second, index)
    taus = np.array([kendall_tau_b(a[k], b[k]) for k in range(BOOTSTRAP)])
    taus = taus[~np.isnan(taus)]
    if not taus.size:
        return Agreement(tau, nan, nan, n)
    return Agreement(tau, float(np.percentile(taus, 2.5)), float(np.percentile(taus, 97.5)), n)
