"""Normalisation before alignment (DESIGN section 2).

Saliency maps: positive part, bilinear resize to the ground truth's size, min-max
scale to [0, 1]. A constant map (after the positive part and the resize) becomes
all zeros and is flagged ``degenerate``. Human-attention (multi-level) maps are
scaled to [0, 1] by their max; negative values are clipped to 0 and flagged.

All functions are vectorised over a batch of maps of one size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xaibench.imaging import resize_bilinear

DEGENERATE_RTOL = 1e-6
"""A map is constant when ``max - min <= DEGENERATE_RTOL * max`` (float32 resolution)."""


@dataclass(frozen=True)
class NormalisedSaliency:
    """Saliency maps ready for alignment metrics.

    ``maps``: ``(n, H, W)`` float32 in [0, 1] (unitless). ``degenerate``: ``(n,)``
    bool, the map was constant (it is all zeros here). ``nonfinite``: ``(n,)`` bool,
    the raw map held NaN or inf (it is treated as all zeros and also flagged
    degenerate; metrics report such samples as n/a).
    """

    maps: np.ndarray
    degenerate: np.ndarray
    nonfinite: np.ndarray


@dataclass(frozen=True)
class NormalisedLevels:
    """Human-attention maps M in [0, 1]: ``maps`` ``(n, H, W)`` float32 and
    ``clipped`` ``(n,)`` bool, True where negative values were clipped to 0."""

    maps: np.ndarray
    clipped: np.ndarray


def _as_batch(array: np.ndarray, what: str) -> tuple[np.ndarray, bool]:
    a = np.asarray(array)
    if a.ndim == 2:
        return a[None], True
    if a.ndim != 3:
        raise ValueError(f"{what}: expected a 2-D map or a (B, H, W) batch, got shape {a.shape}")
    return a, False


def normalise_saliency(saliency: np.ndarray, shape: tuple[int, int] | None = None) -> NormalisedSaliency:
    """Positive part, bilinear resize to ``shape`` (default: keep the size), min-max to [0, 1].

    ``saliency`` is ``(H, W)`` or ``(n, H, W)`` of any real scale. Returns a batch
    (``n = 1`` for a single map). Constant maps become zeros with ``degenerate=True``.
    """
    raw, _ = _as_batch(saliency, "saliency")
    raw = raw.astype(np.float32, copy=False)
    n = len(raw)
    if raw[0].size == 0:
        raise ValueError("saliency: maps must have at least one pixel")
    flat = raw.reshape(n, -1)
    # NaN propagates into max, +-inf shows in max or min: no extra pass for finiteness
    nonfinite = ~(np.isfinite(flat.max(axis=1)) & np.isfinite(flat.min(axis=1)))
    positive = np.maximum(raw, 0.0)
    if nonfinite.any():
        positive[nonfinite] = 0.0
    if shape is not None:
        positive = resize_bilinear(positive, shape)
    pflat = positive.reshape(n, -1)
    lo = pflat.min(axis=1)
    hi = pflat.max(axis=1)
    span = hi - lo
    degenerate = (span <= DEGENERATE_RTOL * hi) | nonfinite
    out = positive  # a fresh array (np.maximum / the resize), safe to modify in place
    out -= lo[:, None, None]
    out /= np.where(degenerate, 1.0, span).astype(np.float32)[:, None, None]  # division: the max is exactly 1
    if degenerate.any():
        out[degenerate] = 0.0
    np.clip(out, 0.0, 1.0, out=out)
    return NormalisedSaliency(maps=out, degenerate=degenerate, nonfinite=nonfinite)


def normalise_levels(levels: np.ndarray) -> NormalisedLevels:
    """Scale human-attention maps to [0, 1] by their max; negative values are clipped to
    0 first (``clipped`` records it). An all-zero map stays all zeros (an empty mask).

    Raises ``ValueError`` on NaN or inf: ground truth must be finite.
    """
    m, _ = _as_batch(levels, "levels")
    m = m.astype(np.float32, copy=False)
    if not np.isfinite(m).all():
        raise ValueError("levels: human-attention map holds NaN or inf values")
    flat = m.reshape(len(m), -1)
    clipped = (flat < 0).any(axis=1)
    m = np.maximum(m, 0.0)
    hi = m.reshape(len(m), -1).max(axis=1)
    scale = np.where(hi > 0, hi, 1.0).astype(np.float32)
    return NormalisedLevels(maps=(m / scale[:, None, None]).astype(np.float32), clipped=clipped)
