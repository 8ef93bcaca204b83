"""Pure computations of random logit, smooth MPRT and efficient MPRT (DESIGN 3b): numpy, scipy
and scikit-image only, no torch."""

from __future__ import annotations

import numpy as np
from skimage.metrics import structural_similarity

from xaibench.metrics.other.complexity_formulas import histogram_entropy_rows


def max_normalised(maps: np.ndarray) -> np.ndarray:
    """Each map divided by its maximum |value| (an all-zero map stays zero)."""
    a = np.asarray(maps, dtype=np.float64)
    peak = np.abs(a.reshape(a.shape[0], -1)).max(axis=1).reshape((-1,) + (1,) * (a.ndim - 1))
    return np.divide(a, peak, out=np.zeros_like(a), where=peak > 0)


def ssim_rows(a: np.ndarray, b: np.ndarray, *, flat: bool = False, win_size: int = 7) -> np.ndarray:
    """Structural similarity (Wang et al. 2004; scikit-image's defaults: a uniform ``win_size``
    window, K1 = 0.01, K2 = 0.03, sample covariance) of ``a[i]`` with ``b[i]`` for two
    ``(N, H, W)`` stacks, ``data_range`` the span of the two maps together. ``flat``: on the
    maps flattened to 1-D signals (what Quantus 0.6 ``RandomLogit`` computes) instead of the
    2-D images. In [-1, 1]; NaN where a map is smaller than the window or both are constant."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    out = np.full(a.shape[0], np.nan)
    for i in range(a.shape[0]):  # one SSIM per map (vectorised over pixels)
        x, y = (a[i].ravel(), b[i].ravel()) if flat else (a[i], b[i])
        if min(x.shape) < win_size:
            continue
        span = float(max(x.max(), y.max()) - min(x.min(), y.min()))
        if span == 0:
            continue
        out[i] = structural_similarity(x, y, win_size=win_size, data_range=span)
    return out


def smoothing_noise(rng: np.random.Generator, image: np.ndarray, n: int, magnitude: float) -> np.ndarray:
    """``(n, *image.shape)`` float32 additive noise for a smoothed explanation (Hedstrom et al.
    2024, as Quantus's ``SmoothMPRT``): n - 1 draws of N(0, s^2), s = ``magnitude`` x (max - min
    of the image), and one zero draw (the clean input is one of the n)."""
    image = np.asarray(image, dtype=np.float64)
    scale = magnitude * float(image.max() - image.min())
    noise = np.zeros((n, *image.shape), dtype=np.float32)
    if n > 1:
        noise[: n - 1] = (rng.standard_normal((n - 1, *image.shape)) * scale).astype(np.float32)
    return noise


def complexity_ratio(original: np.ndarray, randomised: np.ndarray, bins: int) -> np.ndarray:
    """Efficient MPRT (Hedstrom et al. 2024): H(E_randomised) / H(E_original), H the discrete
    entropy of the map's histogram in ``bins`` bins over its own range. > 1 when randomising the
    model makes the explanation more complex; NaN when the original's entropy is 0."""
    before = histogram_entropy_rows(original, bins)
    after = histogram_entropy_rows(randomised, bins)
    return np.divide(after, before, out=np.full(before.shape, np.nan), where=before > 0)
