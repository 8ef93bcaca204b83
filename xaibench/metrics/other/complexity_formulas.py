"""Pure computations of the complexity and axiomatic metrics (DESIGN 3b): numpy only, no torch.

Every function works on a stack of maps ``(N, ...)`` (each row flattened), vectorised over
pixels and rows."""

from __future__ import annotations

import numpy as np
from scipy.special import xlogy


def _rows(maps: np.ndarray) -> np.ndarray:
    a = np.asarray(maps, dtype=np.float64)
    return a.reshape(a.shape[0], -1)


def entropy_rows(maps: np.ndarray) -> np.ndarray:
    """Complexity (Bhatt et al. 2020): the Shannon entropy (nats) of the fractional contributions
    p_i = |E_i| / sum_j |E_j| of each row, -sum p_i ln p_i (0 ln 0 = 0). In [0, ln n]; NaN for a
    row that is all zero. Lower means a less complex (more concentrated) explanation."""
    a = np.abs(_rows(maps))
    total = a.sum(axis=1, keepdims=True)
    out = np.full(a.shape[0], np.nan)
    ok = total[:, 0] > 0
    p = a[ok] / total[ok]
    out[ok] = -xlogy(p, p).sum(axis=1)
    return out


def effective_complexity_rows(maps: np.ndarray, eps: float) -> np.ndarray:
    """Effective complexity (Nguyen and Rodriguez Martinez 2020): the number of features whose
    attribution |E_i| / max_j |E_j| exceeds ``eps``. An integer in [0, n] (as float); NaN for a
    row that is all zero. Lower is better (fewer features carry the explanation)."""
    a = np.abs(_rows(maps))
    peak = a.max(axis=1, keepdims=True)
    out = np.full(a.shape[0], np.nan)
    ok = peak[:, 0] > 0
    out[ok] = (a[ok] / peak[ok] > eps).sum(axis=1)
    return out


def completeness_gap(maps: np.ndarray, output: np.ndarray, baseline_output: np.ndarray) -> np.ndarray:
    """Completeness (Sundararajan et al. 2017): |sum_i E_i - (f(x) - f(x'))| per row, x' the
    baseline. >= 0, in the model output's units (logits); 0 for a complete explanation."""
    return np.abs(_rows(maps).sum(axis=1) - (np.asarray(output, np.float64) - np.asarray(baseline_output, np.float64)))


def non_sensitivity_count(
    attribution: np.ndarray, output: np.ndarray, perturbed: np.ndarray, *, eps: float, delta: float
) -> np.ndarray:
    """Non-sensitivity (Nguyen and Rodriguez Martinez 2020): |Z_a symmetric-difference Z_f| per row,
    Z_a the features with (max-normalised) attribution below ``eps`` and Z_f the features whose
    removal changes the output by less than ``delta``.

    ``attribution``: ``(N, F)`` per-feature |E| normalised by its row's maximum; ``output``:
    ``(N,)`` f(x); ``perturbed``: ``(N, F)`` f(x with feature i removed). A count in [0, F] (as
    float); lower is better."""
    zero_attribution = np.asarray(attribution, np.float64) < eps
    insensitive = np.abs(np.asarray(perturbed, np.float64) - np.asarray(output, np.float64)[:, None]) < delta
    return (zero_attribution ^ insensitive).sum(axis=1).astype(np.float64)


def patch_maxima(maps: np.ndarray, patch: int) -> np.ndarray:
    """``(N, H, W)`` -> ``(N, ceil(H / patch) * ceil(W / patch))``: the maximum of |E| over each
    square patch (row-major patch order; edge patches are smaller), vectorised."""
    a = np.abs(np.asarray(maps, np.float64))
    n, h, w = a.shape
    gh, gw = -(-h // patch), -(-w // patch)
    padded = np.zeros((n, gh * patch, gw * patch))
    padded[:, :h, :w] = a
    return padded.reshape(n, gh, patch, gw, patch).max(axis=(2, 4)).reshape(n, gh * gw)


def histogram_entropy_rows(maps: np.ndarray, bins: int) -> np.ndarray:
    """Discrete entropy (nats) of each row's histogram of values in ``bins`` equal bins over the
    row's own [min, max] (numpy's ``histogram`` rule; the complexity of efficient MPRT,
    Hedstrom et al. 2024). In [0, ln bins]; 0 for a constant row."""
    a = _rows(maps)
    out = np.zeros(a.shape[0])
    for r, row in enumerate(a):  # one histogram per row (numpy's own bin rule, vectorised over pixels)
        counts = np.histogram(row, bins=bins)[0].astype(np.float64)
        p = counts / counts.sum()
        out[r] = -xlogy(p, p).sum()
    return out
