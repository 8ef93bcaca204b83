"""Pure computations of the ``other`` metrics (sparseness, sensitivity): numpy only, no torch."""

from __future__ import annotations

import numpy as np


def gini(values: np.ndarray) -> float:
    """Gini index of ``|values|`` flattened: sum((2i - n - 1) x_i) / (n sum x_i), x ascending.

    Higher is sparser, in [0, 1 - 1/n]. NaN when every value is 0 (0 / 0).
    """
    x = np.sort(np.abs(np.asarray(values, dtype=np.float64)).ravel())
    n = x.size
    total = x.sum()
    if n == 0 or total == 0:
        return float("nan")
    i = np.arange(1, n + 1, dtype=np.float64)
    return float(np.sum((2.0 * i - n - 1.0) * x) / (n * total))


def relative_distance(reference: np.ndarray, others: np.ndarray) -> np.ndarray:
    """||E - E'_j||_2 / ||E||_2 for each E'_j in ``others`` (``(n, ...)``); NaN if ||E|| = 0.

    Unitless, >= 0; lower means a more stable explanation.
    """
    ref = np.asarray(reference, dtype=np.float64).ravel()
    oth = np.asarray(others, dtype=np.float64).reshape(len(others), -1)
    norm = np.linalg.norm(ref)
    if norm == 0:
        return np.full(len(oth), np.nan)
    return np.linalg.norm(oth - ref[None], axis=1) / norm
