"""The concept vocabulary of ``shapes``: attributes the generator knows about each object.

Concepts (15, fixed order, see :data:`CONCEPTS`):

- outline (6), a function of the shape class: ``curved_outline`` (circle), ``straight_edges``
  (square, triangle, cross), ``three_corners`` (triangle), ``four_corners`` (square),
  ``concave_corners`` (cross), ``convex_outline`` (circle, square, triangle). They determine the
  class (see :data:`SHAPE_CONCEPTS`).
- colour (8): the object's colour, the corner of the RGB cube nearest to the median of the
  object's pixels (``black``, ``blue``, ``green``, ``cyan``, ``red``, ``magenta``, ``yellow``,
  ``white``). The generator draws the colour uniformly, so this is each channel above 0.5.
- ``large_object``: circumradius above 0.22 x the image side (the generator draws 0.16..0.28).

Colour and size are never class evidence: a good concept explanation of the class puts the
outline concepts first. Labels are computed from a sample's ``meta`` (``shape``, ``radius``)
and its ground-truth mask; images and masks are not changed.
"""

from __future__ import annotations

import numpy as np

from xaibench.api import Sample
from xaibench.datasets.shapes import CLASSES

__all__ = ["COLOUR_NAMES", "CONCEPTS", "LARGE_FRACTION", "SHAPE_CONCEPTS", "concept_labels", "concept_vector"]

SHAPE_CONCEPTS: dict[str, tuple[str, ...]] = {
    "circle": ("curved_outline", "convex_outline"),
    "square": ("straight_edges", "four_corners", "convex_outline"),
    "triangle": ("straight_edges", "three_corners", "convex_outline"),
    "cross": ("straight_edges", "concave_corners"),
}
OUTLINE: tuple[str, ...] = (
    "curved_outline",
    "straight_edges",
    "three_corners",
    "four_corners",
    "concave_corners",
    "convex_outline",
)
COLOUR_NAMES: tuple[str, ...] = ("black", "blue", "green", "cyan", "red", "magenta", "yellow", "white")
"""Indexed by ``4 r + 2 g + b`` with each channel thresholded at 0.5."""
LARGE_FRACTION = 0.22
CONCEPTS: tuple[str, ...] = (*OUTLINE, *COLOUR_NAMES, "large_object")
assert set(SHAPE_CONCEPTS) == set(CLASSES)


def concept_vector(shape: str, colour: np.ndarray, radius: float, size: int) -> np.ndarray:
    """Binary labels ``(len(CONCEPTS),)`` float32 for one object."""
    if shape not in SHAPE_CONCEPTS:
        raise ValueError(f"shapes concepts: unknown shape {shape!r}")
    out = np.zeros(len(CONCEPTS), dtype=np.float32)
    for name in SHAPE_CONCEPTS[shape]:
        out[CONCEPTS.index(name)] = 1.0
    bits = (np.asarray(colour, dtype=np.float64) > 0.5).astype(int)
    out[len(OUTLINE) + 4 * bits[0] + 2 * bits[1] + bits[2]] = 1.0
    out[-1] = float(radius > LARGE_FRACTION * size)
    return out


def concept_labels(sample: Sample) -> np.ndarray:
    """The concept labels of a ``shapes`` sample (needs ``meta['shape']``, ``meta['radius']`` and a mask)."""
    meta = sample.meta
    if "shape" not in meta or "radius" not in meta:
        raise ValueError(f"sample {sample.id}: no shapes metadata (meta['shape'], meta['radius'])")
    if sample.ground_truth is None or sample.ground_truth.mask is None or not sample.ground_truth.mask.any():
        raise ValueError(f"sample {sample.id}: no object mask to read the colour from")
    colour = np.median(sample.image[sample.ground_truth.mask], axis=0)
    return concept_vector(str(meta["shape"]), colour, float(meta["radius"]), int(sample.image.shape[0]))
