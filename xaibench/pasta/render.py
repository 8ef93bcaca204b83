"""Canonical, versioned renders of explanations (DESIGN 5): what a person (and PASTA) sees.

Saliency maps become an **overlay**: the map over the image at a fixed size, coloured by a
fixed colormap and alpha-blended. Concept explanations become a **sentence** of the top
concepts by weight from a versioned template. The PASTA score depends on these renders, so
every PASTA result records :data:`RENDER_NAME`/:data:`RENDER_VERSION` and
:data:`SENTENCE_NAME`/:data:`SENTENCE_VERSION`; any change of output bumps the version (a test
pins the overlay by pixel hash).

Overlay ``xaibench-jet-overlay`` version 1, step by step:

1. The image (``H x W x 3``, floats in [0, 1], or uint8 0..255) is clipped to [0, 1] and
   squash-resized to ``size x size`` (the model's convention: no crop).
2. The saliency map (any real scale, any size) keeps its positive part, is resized to
   ``size x size`` and min-max scaled to [0, 1] (DESIGN 2's normalisation; a constant map
   becomes all zeros, i.e. uniformly dark blue).
3. Colour: the classic "jet" colormap as a fixed 256-entry table computed here from its
   piecewise-linear definition (no matplotlib dependency); the scaled map is quantised to
   ``round(255 * s)`` and looked up.
4. Blend: ``0.5 * image + 0.5 * colour``, rounded half-to-even to uint8.

Resizing uses separable triangle (bilinear) filters with half-pixel centres whose support
widens by the scale factor when shrinking (an antialiased bilinear resize, as PIL does),
computed in float64 by :func:`xaibench.imaging.resize_bilinear`; the same code resizes image and map.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from xaibench.imaging import resize_bilinear

__all__ = [
    "JET_LUT",
    "RENDER_ALPHA",
    "RENDER_NAME",
    "RENDER_VERSION",
    "SENTENCE_NAME",
    "SENTENCE_TOP_K",
    "SENTENCE_VERSION",
    "concept_sentence",
    "render_id",
    "render_overlay",
    "render_overlays",
    "resize_square",
]

RENDER_NAME = "xaibench-jet-overlay"
RENDER_VERSION = "1"
RENDER_ALPHA = 0.5
"""Weight of the colour layer in the blend (the image gets ``1 - RENDER_ALPHA``)."""

SENTENCE_NAME = "xaibench-concept-sentence"
SENTENCE_VERSION = "1"
SENTENCE_TOP_K = 20
SENTENCE_TEMPLATE = "The model predicts {target} because of {concepts}."
"""Version-1 template. ``{concepts}`` is ``"<name> (<+0.00>)"`` items joined by ``", "``,
ordered by decreasing weight (ties: by name); ``{target}`` is the class name or "this class"."""


def _jet_table() -> np.ndarray:
    """The 256 x 3 uint8 jet table: each channel is ``clip(1.5 - |4 x - c|, 0, 1)`` with
    ``c = 3, 2, 1`` for red, green, blue and ``x = k / 255`` (the MATLAB jet shape)."""
    x = np.arange(256, dtype=np.float64) / 255.0
    channels = [np.clip(1.5 - np.abs(4.0 * x - c), 0.0, 1.0) for c in (3.0, 2.0, 1.0)]
    return np.rint(np.stack(channels, axis=1) * 255.0).astype(np.uint8)


JET_LUT: np.ndarray = _jet_table()
JET_LUT.setflags(write=False)


def resize_square(array: np.ndarray, size: int) -> np.ndarray:
    """Squash-resize an ``H x W`` or ``H x W x 3`` array to ``size x size``, float64
    (:func:`xaibench.imaging.resize_bilinear`: antialiased when shrinking)."""
    a = np.asarray(array)
    if a.ndim not in (2, 3):
        raise ValueError(f"resize_square: expected a 2-D or 3-D array, got shape {a.shape}")
    return resize_bilinear(a, (size, size), channels_last=a.ndim == 3, dtype=np.float64)


def _as_unit_image(image: np.ndarray) -> np.ndarray:
    img = np.asarray(image)
    if img.ndim != 3 or img.shape[2] != 3:
        raise ValueError(f"render_overlay: image must be H x W x 3, got shape {img.shape}")
    if img.dtype == np.uint8:
        return img.astype(np.float64) / 255.0
    img = img.astype(np.float64)
    if not np.all(np.isfinite(img)):
        raise ValueError("render_overlay: image has NaN or inf values")
    return np.clip(img, 0.0, 1.0)


def _scaled_map(saliency: np.ndarray, size: int) -> np.ndarray:
    sal = np.asarray(saliency, dtype=np.float64)
    if sal.ndim != 2:
        raise ValueError(f"render_overlay: saliency must be H x W, got shape {sal.shape}")
    if not np.all(np.isfinite(sal)):
        raise ValueError("render_overlay: saliency has NaN or inf values")
    resized = resize_square(np.maximum(sal, 0.0), size)
    lo, hi = float(resized.min()), float(resized.max())
    if hi - lo <= 1e-12 * max(1.0, abs(hi)):
        return np.zeros((size, size))
    return (resized - lo) / (hi - lo)


def render_overlay(image01: np.ndarray, saliency: np.ndarray, size: int = 224) -> np.ndarray:
    """The canonical overlay of ``saliency`` on ``image01``: ``size x size x 3`` uint8.

    ``image01``: ``H x W x 3`` floats in [0, 1] (uint8 accepted); ``saliency``: ``H' x W'``,
    any real scale (negative values are dropped, as in DESIGN 2). See the module docstring
    for the exact recipe of :data:`RENDER_NAME` version :data:`RENDER_VERSION`.
    """
    if int(size) < 8:
        raise ValueError(f"render_overlay: size must be >= 8 px, got {size}")
    size = int(size)
    img = resize_square(_as_unit_image(image01), size)
    level = np.rint(_scaled_map(saliency, size) * 255.0).astype(np.intp)
    colour = JET_LUT[level].astype(np.float64) / 255.0
    blend = (1.0 - RENDER_ALPHA) * img + RENDER_ALPHA * colour
    return np.rint(np.clip(blend, 0.0, 1.0) * 255.0).astype(np.uint8)


def render_overlays(images01: np.ndarray, saliency: np.ndarray, size: int = 224) -> np.ndarray:
    """Batched :func:`render_overlay`: ``(B, H, W, 3)`` and ``(B, H', W')`` to ``(B, size, size, 3)`` uint8."""
    if len(images01) != len(saliency):
        raise ValueError(f"render_overlays: {len(images01)} images but {len(saliency)} maps")
    if len(images01) == 0:
        return np.zeros((0, size, size, 3), dtype=np.uint8)
    return np.stack([render_overlay(i, s, size) for i, s in zip(images01, saliency, strict=True)])


def concept_sentence(weights: Mapping[str, float], top_k: int = SENTENCE_TOP_K, target: str | None = None) -> str:
    """The version-1 sentence of the ``top_k`` concepts with the largest weight.

    Concepts are ordered by decreasing weight (ties by name); names have underscores replaced by
    spaces; weights are written with a sign and two decimals.
    """
    if not weights:
        raise ValueError("concept_sentence: no concept weights")
    if int(top_k) < 1:
        raise ValueError(f"concept_sentence: top_k must be >= 1, got {top_k}")
    items = sorted(((str(k), float(v)) for k, v in weights.items()), key=lambda kv: (-kv[1], kv[0]))[: int(top_k)]
    text = ", ".join(f"{k.replace('_', ' ')} ({v:+.2f})" for k, v in items)
    return SENTENCE_TEMPLATE.format(target=target or "this class", concepts=text)


def render_id(kind: str = "saliency") -> str:
    """``name/version`` of the render used for an explanation kind."""
    if kind == "concept":
        return f"{SENTENCE_NAME}/{SENTENCE_VERSION}"
    return f"{RENDER_NAME}/{RENDER_VERSION}"
