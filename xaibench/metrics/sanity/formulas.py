"""Pure computations of the sanity family: numpy and scipy only, no torch."""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata


def spearman_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spearman rank correlation of ``a[i]`` with ``b[i]`` for every row of two ``(N, ...)`` arrays
    (each row flattened): the Pearson correlation of their ranks, tied values sharing their
    average rank. In [-1, 1]; NaN for a row where either side is constant (no ranking).
    Vectorised over pixels and rows."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"spearman_rows: shapes differ, {a.shape} and {b.shape}")
    n = a.shape[0]
    a, b = a.reshape(n, -1), b.reshape(n, -1)
    if a.shape[1] == 0:
        return np.full(n, np.nan)
    constant = (a.max(axis=1) == a.min(axis=1)) | (b.max(axis=1) == b.min(axis=1))
    ra = rankdata(a, method="average", axis=1)
    rb = rankdata(b, method="average", axis=1)
    ra -= ra.mean(axis=1, keepdims=True)
    rb -= rb.mean(axis=1, keepdims=True)
    num = (ra * rb).sum(axis=1)
    den = np.sqrt((ra * ra).sum(axis=1) * (rb * rb).sum(axis=1))
    out = np.full(n, np.nan)
    ok = (den > 0) & ~constant
    out[ok] = np.clip(num[ok] / den[ok], -1.0, 1.0)
    return out
