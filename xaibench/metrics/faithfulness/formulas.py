"""Pure computations of the faithfulness family (DESIGN 3 and 4): curves to scores.

No model and no torch here: these functions take probabilities and maps as
numpy arrays, so they can be checked against closed forms.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: ROAD thresholds t (percent), DESIGN 3.
DEFAULT_THRESHOLDS: tuple[int, ...] = (10, 20, 30, 40, 50, 60, 70, 80, 90, 100)


def trapezoid_auc(fractions: np.ndarray, probabilities: np.ndarray) -> float:
    """Trapezoid area under ``probabilities`` over ``fractions`` (increasing, in [0, 1]).

    Unit: probability x fraction, in [0, 1]. Deletion: lower is better;
    insertion: higher is better.
    """
    x = np.asarray(fractions, dtype=np.float64)
    y = np.asarray(probabilities, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1 or x.size < 2:
        raise ValueError(f"trapezoid_auc: need two 1-D arrays of equal length >= 2, got {x.shape} and {y.shape}")
    return float(np.sum(np.diff(x) * (y[1:] + y[:-1]) / 2.0))


def road_percents(thresholds: Sequence[int]) -> np.ndarray:
    """Perturbation percentages i = 1, 3, 5, ... below the largest threshold."""
    return np.arange(1, max(thresholds), 2, dtype=np.int64)


def road_prefix_means(percents: np.ndarray, d: np.ndarray, thresholds: Sequence[int]) -> np.ndarray:
    """Mean of ``d_i`` over ``i < t`` for every threshold ``t`` (prefix means).

    ``d`` is ``(..., len(percents))``, ``percents`` increasing. A threshold with
    no percentage below it has mean 0. Returns ``(..., len(thresholds))``.
    """
    d = np.asarray(d, dtype=np.float64)
    csum = np.concatenate([np.zeros((*d.shape[:-1], 1)), np.cumsum(d, axis=-1)], axis=-1)
    counts = np.searchsorted(percents, np.asarray(thresholds), side="left")
    with np.errstate(invalid="ignore", divide="ignore"):
        means = csum[..., counts] / counts
    return np.where(counts > 0, means, 0.0)


def road_sufficiency(prefix_means: np.ndarray) -> np.ndarray:
    """max over thresholds of exp(-mean d) (ascending order curve). Higher is better, in (0, 1]."""
    return np.max(np.exp(-np.asarray(prefix_means)), axis=-1)


def road_necessity(prefix_means: np.ndarray) -> np.ndarray:
    """max over thresholds of 1 - exp(-mean d) (descending order curve). Higher is better, in [0, 1)."""
    return np.max(1.0 - np.exp(-np.asarray(prefix_means)), axis=-1)


def harmonic_mean(a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray:
    """2ab / (a + b), 0 where both are 0 (ROAD faithfulness; higher is better)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    total = a + b
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, 2.0 * a * b / np.where(total > 0, total, 1.0), 0.0)


def average_drop(p_clean: np.ndarray, p_masked: np.ndarray) -> np.ndarray:
    """max(0, p(x) - p(x*E)) / p(x) x 100 per image (percent, lower is better); NaN where p(x) = 0."""
    p0 = np.asarray(p_clean, dtype=np.float64)
    p1 = np.asarray(p_masked, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(p0 > 0, np.maximum(0.0, p0 - p1) / np.where(p0 > 0, p0, 1.0) * 100.0, np.nan)


#: ERASER's token fractions (DESIGN 12): rationales of the top 1, 5, 10, 20 and 50 % of tokens.
ERASER_FRACTIONS: tuple[float, ...] = (0.01, 0.05, 0.1, 0.2, 0.5)


def eraser_rationales(scores: np.ndarray, fractions: Sequence[float] = ERASER_FRACTIONS) -> list[np.ndarray]:
    """The rationales ERASER's AOPC averages over, as ferret-xai 0.4.2 builds them
    (``based_on="perc"``, ``only_pos=True``): for each fraction ``v`` the top ``int(v * n)``
    tokens of ``scores`` (``n`` real tokens; ``np.argsort(scores)[-k:][::-1]``, so ties fall as
    numpy's default sort leaves them), keeping only tokens scored ``> 0``; a fraction that gives
    ``k = 0``, no positive token, or the same set of tokens as the last rationale kept is
    skipped. Token indices into ``scores``, most relevant first."""
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    kept: list[np.ndarray] = []
    last: set[int] | None = None
    for v in fractions:
        k = int(v * s.size)
        if k == 0:
            continue
        top = s.argsort()[-k:][::-1]
        top = top[s[top] > 0]
        if top.size == 0 or set(top.tolist()) == last:
            continue
        kept.append(top)
        last = set(top.tolist())
    return kept


def aopc(p_clean: float, p_perturbed: Sequence[float], empty: float) -> float:
    """ERASER's area over the perturbation curve: the mean of ``p_clean - p`` over the kept
    rationales' perturbed probabilities (unnormalised, as ferret-xai); ``empty`` when there is
    none (ferret: 0 for comprehensiveness, 1 for sufficiency)."""
    p = np.asarray(p_perturbed, dtype=np.float64)
    return float(np.mean(p_clean - p)) if p.size else float(empty)
