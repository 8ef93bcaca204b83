"""Rank correlations between metrics across explainers, per track.

As in Saliency-Bench (Table 2: metric vs metric) and PASTA (Table 1: metric vs the human
perceptual score): each point is one explainer's mean on the track. Values are **oriented**
so that higher is better (means of lower-is-better metrics are negated), so a positive rho
always means the two metrics agree on which explainers are better. Spearman's rho is
computed on the explainers that have a value for both metrics; fewer than
:data:`MIN_EXPLAINERS`, or a metric constant over them, gives n/a.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from scipy.stats import rankdata

MIN_EXPLAINERS = 3
PERCEPTUAL_REFERENCE = "pasta_q1"


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho (average ranks for ties); ``None`` when undefined (n < 3 or a constant side)."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.shape != b.shape or a.size < MIN_EXPLAINERS:
        return None
    ra, rb = rankdata(a) - (a.size + 1) / 2.0, rankdata(b) - (b.size + 1) / 2.0
    denom = float(np.sqrt((ra * ra).sum() * (rb * rb).sum()))
    if denom == 0.0:
        return None
    return float(np.clip((ra * rb).sum() / denom, -1.0, 1.0))


def oriented(values: Mapping[str, float], direction: str) -> dict[str, float]:
    """Explainer -> value with higher always better."""
    sign = -1.0 if direction == "lower" else 1.0
    return {k: sign * v for k, v in values.items()}


def pair_rho(a: Mapping[str, float], b: Mapping[str, float]) -> tuple[float | None, int]:
    """rho over the explainers present in both, and their number."""
    common = sorted(set(a) & set(b))
    return spearman([a[k] for k in common], [b[k] for k in common]), len(common)


def correlation_matrix(metrics: Sequence[str], values: Mapping[str, Mapping[str, float]]) -> list[list[float | None]]:
    """``metrics x metrics`` rho of the oriented ``values[metric][explainer]`` (diagonal 1 when defined)."""
    return [[pair_rho(values[m], values[k])[0] for k in metrics] for m in metrics]
