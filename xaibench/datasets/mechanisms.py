"""``mechanisms``: images whose class is decided by a mechanism built into the ``mechanism`` model (DESIGN 11).

Each ``kind`` pairs a generator with one exactly known decision function ``f`` of the normalised
image ``z = 4 x - 2`` (pixel ``x`` in [0, 1], so ``z`` in [-2, 2]; the explainers' baseline is
``z = 0``, mid grey). The model (:mod:`xaibench.models.mechanism`) computes ``f`` from the
constants of this module and outputs the logits ``[-f/2, f/2]``: class 1 when ``f > 0``. So every
sample has a known answer A*: where the decision's evidence is, and for three kinds the exact,
signed contribution of each region.

The detector. Two opponent colour axes, orthogonal and blind to grey: :data:`W1` = (1, -1, 0),
:data:`W2` = (1, 1, -2) (``W1 . W2 = 0``, and ``W . (k, k, k) = 0``, so any achromatic pixel
has ``u1 = u2 = 0`` exactly). Per pixel ``u1 = W1 . z``, ``u2 = W2 . z`` (the model's 1 x 1
convolution ``detect``). An axis-1 mark is a square of colour ``z = a (1, -1, 0)`` (``u1 = 2a``,
``u2 = 0``), an axis-2 mark ``z = a (1, 1, -2)`` (``u2 = 6a``, ``u1 = 0``). Every ``z`` the
generator writes is a multiple of :data:`Z_STEP` (1/64), so pixels are multiples of 1/256: exact
in float32, normalised exactly, and the detector's responses are exact.

Luminance. Both colour axes have channel mean 0, so a mark drawn in them alone is isoluminant with
its surround and invisible to a map of the grey image (an edge map such as ``sobel``). After the
draw, every mark gets an achromatic offset ``k (1, 1, 1)`` (:func:`_lift_marks`, from a random
stream of its own): its luminance differs from its surround's by a step drawn in
:data:`LUMINANCE_STEP` (0.1-0.25 in pixel units, either sign, at least :data:`MIN_LUMINANCE_STEP`
where the channel bounds allow less), and on a textured surround it carries the texture's pixel
grain. The detector is blind to it (``W . (k, k, k) = 0``), so ``u1``, ``u2``, ``f``, the label,
A*, the regions, the contributions and the background are exactly those of the draw
(:func:`draw_scene`). Gradient x input and integrated gradients summed over channels stay exact
too: the model's input gradient lies in the span of W1 and W2, so ``z . grad = u . d logit/du``.

Kinds (``f``'s pixel sums run over the whole image; ``t`` = :data:`THRESHOLD` = 1):

- ``confined``: achromatic texture, 1-3 axis-2 clutter squares, ONE axis-1 mark;
  ``f = w Σ relu(u1 - t) - c``. A* = the mark.
- ``additive``: exactly grey background (``z = 0``: A* is the nonzero pixels), a 4 x 4 grid of
  cells (the 16 regions), 8 of them holding a mark of random sign; ``terms="mixed"``: each mark
  axis-1 (``w1 u1``) or axis-2 (``w2 u2 |u2|``); ``terms="linear"``: all axis-1.
  ``f = Σ (w1 u1 + w2 u2 |u2|)``, no bias.
- ``interaction``: achromatic texture, one axis-1 and one axis-2 mark;
  ``f = w min(Σ relu(u1 - t), Σ relu(u2 - t)) - c`` (AND: either alone gives ``-c``).
- ``cancellation``: achromatic texture, an axis-1 mark of strength ``+a`` and one of ``-a``, the
  same size; ``f = w Σ (relu(u1 - t) - relu(-u1 - t)) + b``: the marks cancel exactly, ``f = b``
  on every sample.
- ``distractor``: ``confined``'s ``f``; a large black-and-white (achromatic) checkerboard near the
  centre that the model provably ignores, and the mark beside it (its centre within 24 px of the
  image's centre, clear of the board).
- ``saturation``: ``f = Σ (w clamp(u1 - t, 0, h) + q(u2)) - c`` with every evidence pixel beyond
  the clamp (zero gradient there), and a block texture along axis 2 at the roots of
  ``q(u) = eps u (u - 3) (u + 1.5)``: no contribution, but a gradient everywhere.

Ground truth: ``mask`` = A* (the evidence), ``levels`` = the mask as float, ``regions`` (int32,
``k >= 1``) and ``contributions`` (float64, region ``k`` at ``k - 1``): the exact Shapley value of
each region on the LABEL's logit (``+f/2`` for class 1, ``-f/2`` for class 0) relative to the
baseline image ``z = 0``; they sum to ``logit(x) - logit(0)``. Regions: ``additive`` the 16 cells;
``interaction`` and ``cancellation`` mark 1, mark 2, the rest; the kinds with one mark
(``confined``, ``distractor``, ``saturation``) A*, the rest (a binary A* as a known answer:
``[its effect, 0]``, exact since those ``f`` are sums over pixels and the rest adds exactly 0).
The label is the sign of ``f`` computed here in float64; a sample is drawn again (from the same
random stream) until ``|f| >=`` :data:`F_MIN`, so the float32 model agrees and is confident.
Sample ``i`` is a pure function of ``(kind, terms, seed, size, i)``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import numpy as np

from xaibench.api import Dataset, GroundTruth, Sample

__all__ = [
    "ADDITIVE_W1",
    "ADDITIVE_W2",
    "CANCELLATION_B",
    "CANCELLATION_W",
    "CONFINED_C",
    "CONFINED_W",
    "DETECT",
    "F_MIN",
    "GENERATOR_VERSION",
    "INTERACTION_C",
    "INTERACTION_W",
    "KINDS",
    "LABEL_NAMES",
    "LUMINANCE_STEP",
    "MIN_LUMINANCE_STEP",
    "SATURATION_C",
    "SATURATION_EPS",
    "SATURATION_H",
    "SATURATION_W",
    "SIZE",
    "TERMS",
    "TEXTURE_ROOTS",
    "THRESHOLD",
    "W1",
    "W2",
    "Z_STEP",
    "MechanismConfig",
    "MechanismsDataset",
    "Scene",
    "detector",
    "draw_scene",
    "mechanism_f",
    "pixel_terms",
    "render",
    "texture_q",
]

GENERATOR_VERSION = "4"
"""Bump on any change that alters generated pixels, ground truth, labels or the shared constants."""

KINDS: tuple[str, ...] = ("confined", "additive", "interaction", "cancellation", "distractor", "saturation")
TERMS: tuple[str, ...] = ("mixed", "linear")
"""``additive`` only: ``mixed`` marks are axis-1 (linear term) or axis-2 (quadratic term); ``linear``: all axis-1."""
SIZE = 64
"""Image side in pixels: the ``mechanism`` model's input size (no resizing, so the answer stays exact)."""
LABEL_NAMES: tuple[str, ...] = ("f<0", "f>0")
"""Class 1 when the decision function is positive."""
STREAM = 0x6D656368
"""Tags the random streams of this generator (``b"mech"``), apart from other generators' seeds."""

# ----------------------------------------------------------------------------- shared constants

W1 = np.array([1.0, -1.0, 0.0])
"""Detector axis 1 (red minus green): ``u1 = W1 . z``."""
W2 = np.array([1.0, 1.0, -2.0])
"""Detector axis 2 (yellow minus blue): ``u2 = W2 . z``; orthogonal to W1, both blind to grey."""
DETECT = np.stack([W1, W2])
"""The weights of the model's 1 x 1 convolution ``detect`` (2 outputs x 3 colour channels)."""
Z_STEP = 1.0 / 64.0
"""The quantum of every normalised value written (pixel values are then multiples of 1/256)."""
THRESHOLD = 1.0
"""t: the detector response a pixel must exceed to count as evidence (background and the
exactness tests' perturbations stay well below it)."""
F_MIN = 2.0
"""Every sample has ``|f| >= F_MIN`` (softmax top-1 >= 0.88): far from the decision boundary."""
AXIS1_AMPLITUDE = 1.6
"""Axis-1 mark of strength ``s``: ``z = s * 1.6 * (1, -1, 0)``, ``u1 = 3.2 s``."""
AXIS2_AMPLITUDE = 0.8
"""Axis-2 mark of strength ``s``: ``z = s * 0.8 * (1, 1, -2)``, ``u2 = 4.8 s``."""

CONFINED_W = 1.0 / 32.0
"""``confined`` and ``distractor``: logit units per unit of ``relu(u1 - t)``, summed over pixels."""
CONFINED_C = 1.0
"""``confined`` and ``distractor``: the bias (``f(0) = -c``: without evidence, class 0)."""
ADDITIVE_W1 = 1.0 / 64.0
"""``additive``: the linear term ``w1 u1`` per pixel."""
ADDITIVE_W2 = 1.0 / 512.0
"""``additive``: the quadratic term ``w2 u2 |u2|`` per pixel (per pixel about as large as the linear
term over the marks' strengths: 0.019 against 0.033 at s = 0.65, 0.045 against 0.05 at s = 1)."""
INTERACTION_W = 1.0 / 16.0
"""``interaction``: logit units per unit of ``min(S1, S2)``."""
INTERACTION_C = 2.0
"""``interaction``: the bias; one mark alone gives ``f = -c``, the other class."""
CANCELLATION_W = 1.0 / 16.0
"""``cancellation``: the odd term ``w (relu(u1 - t) - relu(-u1 - t))`` per pixel (a dead zone of
half-width ``t``: an equal and opposite mark cancels exactly, and the input gradient is not the
same on every pixel, as a linear term's would be)."""
CANCELLATION_B = 3.0
"""``cancellation``: the bias, the whole decision (the marks cancel exactly): ``f = b``."""
SATURATION_W = 1.0 / 32.0
"""``saturation``: logit units per evidence pixel (``clamp(u1 - t, 0, h) = h = 1`` on every one)."""
SATURATION_H = 1.0
"""``saturation``: the clamp's height h; evidence has ``u1 >= 2.24 > t + h``."""
SATURATION_C = 1.0
"""``saturation``: the bias."""
SATURATION_EPS = 1e-6
"""``saturation``: the texture term's scale. The texture adds exactly 0 to the logit (its values are
q's roots), but blurred or imputed images leave the roots; 1e-6 bounds that effect by ~0.03 logit
(|q| <= 7.1 eps per pixel between the roots, 4096 pixels), where 1e-4 would move it by ~3."""
TEXTURE_ROOTS: tuple[float, float, float] = (-1.5, 0.0, 3.0)
"""The roots of ``q`` and the texture's values of ``u2`` (``z = (u2 / 6) (1, 1, -2)``)."""
LUMINANCE_STEP: tuple[float, float] = (0.4, 1.0)
"""The drawn luminance step between a mark and its surround, in ``z`` (0.1-0.25 in pixel units).
The marks' colours have channel mean 0, so without it an edge map of the luminance (``sobel``)
could not see them; the detector is blind to it (``W . (k, k, k) = 0``)."""
MIN_LUMINANCE_STEP = 0.34
"""The least drawn step ``|k - m|`` between a mark's offset and its surround's luminance, in ``z``
(0.085 in pixel units). Where the channel bounds leave less than the drawn step, the mark takes the
farthest offset they allow: at least ``2 - 1.6 - 1/128`` (an axis-1 mark at full strength on a grey
surround, ``k`` rounded to the grid) on every kind but ``saturation``, whose mark at full strength on
texture blocks ``c = 0.5`` and ``c = -0.25`` allows ``k`` only in [-22/64, 6/64]: 0.34375."""
SATURATION_AMPLITUDE = 1.4
"""``saturation``'s mark: ``z = s * 1.4 * (1, -1, 0) + c (1, 1, -2)``, ``s`` in [0.8, 1]: ``u1`` in
[2.24, 2.8]. (1.6 would put the red channel at 2.1 > 2 where the texture has ``c = 0.5``.)"""


def detector(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(u1, u2)``, each ``z.shape[:-1]``: the detector's responses to normalised images
    ``(..., H, W, 3)`` (float64)."""
    u = np.asarray(z, dtype=np.float64) @ DETECT.T
    return u[..., 0], u[..., 1]


def texture_q(u2: np.ndarray) -> np.ndarray:
    """``saturation``'s texture term ``eps u2 (u2 - 3) (u2 + 1.5)``, zero at :data:`TEXTURE_ROOTS`."""
    return SATURATION_EPS * u2 * (u2 - TEXTURE_ROOTS[2]) * (u2 - TEXTURE_ROOTS[0])


def pixel_terms(kind: str, z: np.ndarray) -> np.ndarray:
    """The per-pixel summand of ``f`` for the kinds that sum a function of each pixel
    (all but ``interaction``), ``z.shape[:-1]``; ``f`` = its sum over pixels minus the bias."""
    u1, u2 = detector(z)
    if kind in ("confined", "distractor"):
        return CONFINED_W * np.maximum(u1 - THRESHOLD, 0.0)
    if kind == "additive":
        return ADDITIVE_W1 * u1 + ADDITIVE_W2 * u2 * np.abs(u2)
    if kind == "cancellation":
        return CANCELLATION_W * (np.maximum(u1 - THRESHOLD, 0.0) - np.maximum(-u1 - THRESHOLD, 0.0))
    if kind == "saturation":
        return SATURATION_W * np.clip(u1 - THRESHOLD, 0.0, SATURATION_H) + texture_q(u2)
    raise ValueError(f"mechanisms: kind {kind!r} is not a sum over pixels")


def mechanism_f(kind: str, z: np.ndarray) -> np.ndarray:
    """The decision function ``f`` of ``kind`` on normalised images ``(..., H, W, 3)``, shape
    ``z.shape[:-3]`` (float64; the reference the model is checked against). Class 1 when ``f > 0``."""
    if kind == "interaction":
        u1, u2 = detector(z)
        s1 = np.maximum(u1 - THRESHOLD, 0.0).sum(axis=(-2, -1))
        s2 = np.maximum(u2 - THRESHOLD, 0.0).sum(axis=(-2, -1))
        return INTERACTION_W * np.minimum(s1, s2) - INTERACTION_C
    bias = {
        "confined": -CONFINED_C,
        "distractor": -CONFINED_C,
        "additive": 0.0,
        "cancellation": CANCELLATION_B,
        "saturation": -SATURATION_C,
    }
    if kind not in bias:
        raise ValueError(f"mechanisms: unknown kind {kind!r}; known: {', '.join(KINDS)}")
    return pixel_terms(kind, z).sum(axis=(-2, -1)) + bias[kind]


# ----------------------------------------------------------------------------- drawing


def _q(value: np.ndarray | float) -> np.ndarray:
    """Round to the grid of :data:`Z_STEP`."""
    return np.round(np.asarray(value, dtype=np.float64) / Z_STEP) * Z_STEP


def _interp(n: int, size: int) -> np.ndarray:
    """``(size, n)`` linear-interpolation weights from ``n`` cell centres to ``size`` pixels."""
    pos = np.clip((np.arange(size) + 0.5) * n / size - 0.5, 0.0, n - 1.0)
    lo = np.minimum(np.floor(pos).astype(int), n - 2)
    weights = np.zeros((size, n))
    weights[np.arange(size), lo] = 1.0 - (pos - lo)
    weights[np.arange(size), lo + 1] = pos - lo
    return weights


def _grey_texture(rng: np.random.Generator, size: int, base: float, smooth: float, noise: float) -> np.ndarray:
    """An achromatic ``(size, size, 3)`` texture (three equal channels): a random level within
    ``±base``, smooth 6 x 6 noise within ``±smooth``, pixel noise of sd ``noise``; in [-1.75, 1.75]."""
    weights = _interp(6, size)
    grey = rng.uniform(-base, base) + weights @ rng.uniform(-smooth, smooth, (6, 6)) @ weights.T
    grey = grey + noise * rng.standard_normal((size, size))
    grey = _q(np.clip(grey, -1.75, 1.75))
    return np.repeat(grey[..., None], 3, axis=-1)


TEXTURE_GRAIN = 0.15
"""The textured kinds' (``confined``, ``interaction``, ``cancellation``) achromatic pixel noise, sd in ``z``."""

Box = tuple[int, int, int, int]
"""``(x0, y0, x1, y1)``, exclusive end."""


def _box(rng: np.random.Generator, side: int, lo: int, hi: int) -> Box:
    """A ``side`` x ``side`` box with its corner uniform in ``[lo, hi - side]`` on both axes."""
    x0, y0 = (int(v) for v in rng.integers(lo, hi - side + 1, size=2))
    return x0, y0, x0 + side, y0 + side


def _area(box: Box, size: int) -> np.ndarray:
    m = np.zeros((size, size), dtype=bool)
    m[box[1] : box[3], box[0] : box[2]] = True
    return m


def _apart(a: Box, b: Box, gap: int) -> bool:
    """Whether boxes ``a`` and ``b`` are at least ``gap`` pixels apart on some axis."""
    return a[2] + gap <= b[0] or b[2] + gap <= a[0] or a[3] + gap <= b[1] or b[3] + gap <= a[1]


def _boxes_apart(rng: np.random.Generator, sides: Sequence[int], size: int, gap: int = 2) -> list[Box]:
    """Boxes of the given sides at random positions, pairwise ``gap`` apart."""
    for _ in range(1000):
        boxes = [_box(rng, side, 0, size) for side in sides]
        if all(_apart(a, b, gap) for k, a in enumerate(boxes) for b in boxes[k + 1 :]):
            return boxes
    raise RuntimeError("mechanisms: could not place the marks apart")  # pragma: no cover - ample room


@dataclass
class Scene:
    """One drawn sample before labelling: normalised pixels and the answer's geometry."""

    z: np.ndarray
    """``(H, W, 3)`` float64, multiples of :data:`Z_STEP`, in [-2, 2]."""
    background: np.ndarray
    """``z`` before the evidence was drawn (what the exactness tests swap between samples)."""
    mask: np.ndarray
    """A*: ``(H, W)`` bool."""
    regions: np.ndarray
    """``(H, W)`` int32, ``k >= 1`` region ``k`` (every pixel in one)."""
    meta: dict[str, Any] = field(default_factory=dict)
    marks: list[Box] = field(default_factory=list)
    """Each mark's box (what :func:`_lift_marks` gives a luminance of its own)."""
    grain: float = 0.0
    """The sd of the texture's achromatic pixel noise in ``z``, which :func:`_lift_marks` gives the marks too."""


def _one_mark_regions(mask: np.ndarray) -> np.ndarray:
    """Region 1 = A* (the mark), region 2 = the rest."""
    return np.where(mask, 1, 2).astype(np.int32)


def _confined(rng: np.random.Generator, size: int, terms: str) -> Scene:
    z = _grey_texture(rng, size, base=0.5, smooth=0.6, noise=TEXTURE_GRAIN)
    clutter = []
    for _ in range(int(rng.integers(1, 4))):
        box = _box(rng, int(rng.integers(6, 15)), 0, size)
        colour = _q(rng.uniform(-0.75, 0.75)) + _q(rng.choice([-1.0, 1.0]) * rng.uniform(0.25, 0.5)) * W2
        z[box[1] : box[3], box[0] : box[2]] = colour
        clutter.append(list(box))
    background = z.copy()
    strength = rng.uniform(0.6, 1.0)
    box = _box(rng, int(rng.integers(8, 15)), 0, size)
    mask = _area(box, size)
    z[mask] = _q(AXIS1_AMPLITUDE * strength) * W1
    meta = {"mark": list(box), "strength": float(strength), "clutter": clutter}
    return Scene(z, background, mask, _one_mark_regions(mask), meta, marks=[box], grain=TEXTURE_GRAIN)


def _additive(rng: np.random.Generator, size: int, terms: str) -> Scene:
    cell = size // 4
    yy, xx = np.mgrid[0:size, 0:size]
    regions = (1 + (yy // cell) * 4 + xx // cell).astype(np.int32)
    z = np.zeros((size, size, 3))
    mask = np.zeros((size, size), dtype=bool)
    marks, boxes = [], []
    for k in sorted(int(c) for c in rng.choice(16, size=8, replace=False)):
        side = int(rng.integers(4, 11))
        dx, dy = (int(v) for v in rng.integers(0, cell - side + 1, size=2))
        x0, y0 = (k % 4) * cell + dx, (k // 4) * cell + dy
        box = (x0, y0, x0 + side, y0 + side)
        strength = float(rng.choice([-1.0, 1.0]) * rng.uniform(0.3, 1.0))
        axis = 1 if terms == "linear" else int(rng.integers(1, 3))
        colour = _q(AXIS1_AMPLITUDE * strength) * W1 if axis == 1 else _q(AXIS2_AMPLITUDE * strength) * W2
        z[y0 : y0 + side, x0 : x0 + side] = colour
        mask[y0 : y0 + side, x0 : x0 + side] = True
        marks.append({"region": k + 1, "box": list(box), "axis": axis, "strength": strength})
        boxes.append(box)
    return Scene(z, np.zeros_like(z), mask, regions, meta={"marks": marks}, marks=boxes)


def _two_marks(rng: np.random.Generator, size: int, colours: tuple[np.ndarray, np.ndarray], sides: list[int]) -> Scene:
    """Achromatic texture and two marks of the given colours and sides, apart; regions: mark 1,
    mark 2, the rest (3)."""
    z = _grey_texture(rng, size, base=0.5, smooth=0.6, noise=TEXTURE_GRAIN)
    background = z.copy()
    boxes = _boxes_apart(rng, sides, size)
    regions = np.full((size, size), 3, dtype=np.int32)
    for k, (box, colour) in enumerate(zip(boxes, colours, strict=True)):
        z[box[1] : box[3], box[0] : box[2]] = colour
        regions[box[1] : box[3], box[0] : box[2]] = k + 1
    meta = {"marks": [list(b) for b in boxes]}
    return Scene(z, background, regions < 3, regions, meta, marks=boxes, grain=TEXTURE_GRAIN)


def _interaction(rng: np.random.Generator, size: int, terms: str) -> Scene:
    s1, s2 = rng.uniform(0.7, 1.0, size=2)
    colours = (_q(AXIS1_AMPLITUDE * s1) * W1, _q(AXIS2_AMPLITUDE * s2) * W2)
    return _two_marks(rng, size, colours, [int(rng.integers(8, 13)), int(rng.integers(8, 13))])


def _cancellation(rng: np.random.Generator, size: int, terms: str) -> Scene:
    a = _q(AXIS1_AMPLITUDE * rng.uniform(0.6, 1.0))
    side = int(rng.integers(8, 13))
    return _two_marks(rng, size, (a * W1, -a * W1), [side, side])


DISTRACTOR_GRAIN = 0.05
"""``distractor``'s texture: achromatic pixel noise of this sd in ``z`` (low contrast)."""
DISTRACTOR_LEVEL = 1.0
"""The checkerboard's squares: ``z = ±1.0`` on all three channels (pixels 0.25 and 0.75): the
highest contrast in the image, four times the mark's luminance step at its largest."""
DISTRACTOR_SIDE = (20, 24)
"""The checkerboard's side in pixels (drawn uniformly), centred on the image within ±4 px."""
MARK_REACH = 0.375
"""The mark's centre lies within this fraction of the image side of the image's centre (24 px at
64), beside the checkerboard: a centre prior or an edge map is drawn to the board, yet keeps
some of its mass near the mark (so neither is pushed below a random map by construction)."""
CHECK = 6
"""The checkerboard's square side in pixels."""


def _distractor(rng: np.random.Generator, size: int, terms: str) -> Scene:
    z = _grey_texture(rng, size, base=0.25, smooth=0.25, noise=DISTRACTOR_GRAIN)
    side = int(rng.integers(DISTRACTOR_SIDE[0], DISTRACTOR_SIDE[1] + 1))
    centre = size // 2 + rng.integers(-4, 5, size=2)
    x0, y0 = (int(c) - side // 2 for c in centre)
    board = (x0, y0, x0 + side, y0 + side)
    yy, xx = np.mgrid[0:side, 0:side]
    checks = np.where((yy // CHECK + xx // CHECK) % 2 == 0, DISTRACTOR_LEVEL, -DISTRACTOR_LEVEL)
    z[y0 : y0 + side, x0 : x0 + side] = checks[..., None]
    background = z.copy()
    for _ in range(1000):
        box = _box(rng, int(rng.integers(8, 11)), 0, size)
        middle = np.array([(box[0] + box[2]) / 2, (box[1] + box[3]) / 2]) - size / 2
        if float(np.hypot(*middle)) <= MARK_REACH * size and _apart(box, board, 2):
            break
    else:  # pragma: no cover - the ring around the board always has room
        raise RuntimeError("mechanisms: could not place the distractor's mark")
    mask = _area(box, size)
    strength = rng.uniform(0.8, 1.0)  # stronger than confined's: the mark is smaller (8-10 px)
    z[mask] = _q(AXIS1_AMPLITUDE * strength) * W1
    meta = {"mark": list(box), "distractor": list(board), "strength": float(strength)}
    return Scene(z, background, mask, _one_mark_regions(mask), meta, marks=[box], grain=DISTRACTOR_GRAIN)


def _saturation(rng: np.random.Generator, size: int, terms: str) -> Scene:
    blocks = rng.integers(0, 3, size=(size // 4, size // 4))
    c = (np.asarray(TEXTURE_ROOTS) / 6.0)[np.kron(blocks, np.ones((4, 4), dtype=int))]
    z = c[..., None] * W2
    background = z.copy()
    strength = rng.uniform(0.8, 1.0)
    box = _box(rng, int(rng.integers(10, 15)), 0, size)
    mask = _area(box, size)
    z[mask] += _q(SATURATION_AMPLITUDE * strength) * W1
    meta = {"mark": list(box), "strength": float(strength)}
    return Scene(z, background, mask, _one_mark_regions(mask), meta, marks=[box])


def _surround_luminance(background: np.ndarray, box: Box) -> float:
    """The mean channel mean (luminance, in ``z``) of ``background`` on the 1 px ring around ``box``
    (the pixels that the box's edge borders; cut at the image's border)."""
    size = background.shape[0]
    x0, y0, x1, y1 = box
    ring = _area((max(x0 - 1, 0), max(y0 - 1, 0), min(x1 + 1, size), min(y1 + 1, size)), size) & ~_area(box, size)
    return float(background[ring].mean())


def _lift_marks(scene: Scene, rng: np.random.Generator) -> list[dict[str, float]]:
    """Give every mark an achromatic offset ``k (1, 1, 1)`` in place (the detector is blind to it:
    ``u1``, ``u2`` and ``f`` stay as drawn), so its luminance differs from its surround's.

    Per mark: ``m`` = the surround's luminance (:func:`_surround_luminance` of the background),
    a step ``d`` uniform in :data:`LUMINANCE_STEP` and a random sign; ``k = m ± d``, the other
    sign where one leaves ``[-2, 2]`` on some channel of the mark, else the end of the allowed
    range farthest from ``m`` (at least :data:`MIN_LUMINANCE_STEP` from it). Then, where the
    texture around has a pixel noise (``scene.grain``), the mark carries one of the same sd, so its
    inside is as grainy as its outside: ``k + n`` per pixel, clipped to the allowed range. Every
    offset is a multiple of :data:`Z_STEP`. Returns ``{"surround", "offset"}`` per mark (``m``
    and ``k``, ``z`` units)."""
    lifted = []
    for box in scene.marks:
        x0, y0, x1, y1 = box
        patch = scene.z[y0:y1, x0:x1]
        lo, hi = -2.0 - patch.min(axis=-1), 2.0 - patch.max(axis=-1)  # per pixel
        lo_all, hi_all = float(lo.max()), float(hi.min())
        m = _surround_luminance(scene.background.mean(axis=-1), box)
        step = float(rng.choice([-1.0, 1.0]) * rng.uniform(*LUMINANCE_STEP))
        for k in (m + step, m - step):
            if lo_all <= k <= hi_all:
                break
        else:
            k = lo_all if m - lo_all > hi_all - m else hi_all
        k = float(np.clip(_q(k), lo_all, hi_all))
        grain = scene.grain * rng.standard_normal(patch.shape[:-1]) if scene.grain else 0.0
        patch += np.clip(_q(k + grain), lo, hi)[..., None]
        lifted.append({"surround": m, "offset": k})
    return lifted


DRAW: dict[str, Callable[[np.random.Generator, int, str], Scene]] = {
    "confined": _confined,
    "additive": _additive,
    "interaction": _interaction,
    "cancellation": _cancellation,
    "distractor": _distractor,
    "saturation": _saturation,
}


# ----------------------------------------------------------------------------- the answer


def _region_terms(kind: str, scene: Scene, f: float) -> np.ndarray:
    """Each region's exact Shapley value on ``f`` (relative to ``z = 0``), region ``k`` at ``k - 1``.

    Every kind but ``interaction`` sums a function of each pixel (:func:`pixel_terms`), zero at
    ``z = 0``, so a region's value is its pixels' sum (``additive``: each cell; one-mark kinds: A*
    gets ``f - f(0)``, the rest exactly 0; ``cancellation``: ``+a``, ``-a``, 0).
    ``interaction``: ``f - f(0) = w min(S1, S2)`` needs both marks (AND): half each, 0 for the rest."""
    count = int(scene.regions.max())
    if kind == "interaction":
        half = 0.5 * (f + INTERACTION_C)
        return np.array([half, half, 0.0])
    sums = np.bincount(scene.regions.ravel(), weights=pixel_terms(kind, scene.z).ravel(), minlength=count + 1)
    return sums[1:]


@dataclass(frozen=True)
class MechanismConfig:
    """Everything that determines the generated arrays."""

    kind: str = "confined"
    terms: str = "mixed"
    seed: int = 0
    size: int = SIZE
    generator_version: str = GENERATOR_VERSION

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"mechanisms: unknown kind {self.kind!r}; known: {', '.join(KINDS)}")
        if self.terms not in TERMS:
            raise ValueError(f"mechanisms: unknown terms {self.terms!r}; known: {', '.join(TERMS)}")
        if self.terms != "mixed" and self.kind != "additive":
            raise ValueError("mechanisms: terms is only meaningful for kind='additive'")
        if int(self.size) != SIZE:
            raise ValueError(
                f"mechanisms: size must be {SIZE} px (the mechanism model's input: resizing would blur "
                f"the evidence and the answer would no longer be exact), got {self.size}"
            )

    @property
    def digest(self) -> str:
        """sha256 (16 hex) of the configuration including the generator version."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class Rendered:
    """One labelled sample as arrays."""

    image: np.ndarray
    """``(H, W, 3)`` float32 in [0, 1] (``x = 0.5 + z / 4``)."""
    background: np.ndarray
    """The image before the evidence was drawn, as ``image``."""
    ground_truth: GroundTruth
    label: int
    f: float
    """The decision function on this image (float64)."""
    meta: dict[str, Any]


def _seed(config: MechanismConfig, index: int) -> np.random.SeedSequence:
    return np.random.SeedSequence(
        [STREAM, int(config.seed), KINDS.index(config.kind), TERMS.index(config.terms), int(config.size), int(index)]
    )


def draw_scene(config: MechanismConfig, index: int) -> tuple[Scene, float]:
    """Sample ``index``'s accepted draw and its ``f``, before the marks get their luminance
    (:func:`render` adds it; the detector, so ``f``, cannot tell the two apart)."""
    rng = np.random.default_rng(_seed(config, index))
    for _ in range(1000):
        scene = DRAW[config.kind](rng, config.size, config.terms)
        f = float(mechanism_f(config.kind, scene.z))
        if abs(f) >= F_MIN:
            return scene, f
    raise RuntimeError(f"mechanisms: no {config.kind} sample {index} with |f| >= {F_MIN}")  # pragma: no cover


def render(config: MechanismConfig, index: int) -> Rendered:
    """Generate sample ``index`` of ``config`` (a pure function of both)."""
    scene, f = draw_scene(config, index)
    # The luminance comes from a stream of its own, after the draw: the chromatic content, the
    # background, f, the label and the answer are the draw's alone (generator version 1's, bit for bit).
    lifted = _lift_marks(scene, np.random.default_rng(_seed(config, index).spawn(1)[0]))
    label = int(f > 0)
    # The explained class's logit is +f/2 (class 1) or -f/2 (class 0).
    contributions = (0.5 if label else -0.5) * _region_terms(config.kind, scene, f)
    truth = GroundTruth(
        mask=scene.mask,
        levels=scene.mask.astype(np.float32),
        regions=scene.regions,
        contributions=contributions,
    )
    image = (0.5 + scene.z / 4.0).astype(np.float32)
    background = (0.5 + scene.background / 4.0).astype(np.float32)
    meta = {"kind": config.kind, "f": f, **scene.meta, "luminance": lifted}
    return Rendered(image, background, truth, label, f, meta)


# ----------------------------------------------------------------------------- dataset


class MechanismsDataset(Dataset):
    """Images whose class the ``mechanism`` model decides by a built-in mechanism (DESIGN 11)."""

    name: ClassVar[str] = "mechanisms"
    version: ClassVar[str] = f"1.0.{GENERATOR_VERSION}"
    description: ClassVar[str] = (
        "Synthetic, with a known answer: coloured marks whose class the `mechanism` model decides by a built-in "
        "mechanism (kind: confined, additive, interaction, cancellation, distractor, saturation); A* masks and, "
        "for additive/interaction/cancellation, exact signed contributions per region"
    )
    licence: ClassVar[str] = "Apache-2.0 (generated by xaibench)"
    source: ClassVar[str] = "procedural generator xaibench.datasets.mechanisms"
    synthetic: ClassVar[bool] = True

    def __init__(
        self, mechanism: str = "confined", n: int = 128, seed: int = 0, size: int = SIZE, terms: str = "mixed"
    ) -> None:
        """``mechanism``: the kind, one of :data:`KINDS` (not named ``kind``: the registry's
        ``create(kind, name, **params)`` takes that keyword itself)."""
        self.config = MechanismConfig(kind=str(mechanism), terms=str(terms), seed=int(seed), size=int(size))
        self.n = int(n)
        if self.n < 0:
            raise ValueError(f"mechanisms: n must be >= 0, got {n}")
        self.label_names: Sequence[str] = LABEL_NAMES

    @property
    def revision(self) -> str:
        """Digest of the generator configuration, generator version and ``n``."""
        return hashlib.sha256(f"{self.config.digest}:{self.n}".encode()).hexdigest()[:16]

    def __len__(self) -> int:
        return self.n

    def sample_id(self, index: int) -> str:
        c = self.config
        terms = f"-{c.terms}" if c.terms != "mixed" else ""
        seed = f"s{c.seed}-" if c.seed else ""
        return f"mechanism-{c.kind}{terms}-{seed}{index:04d}"

    def rendered(self, index: int) -> Rendered:
        """Sample ``index`` with its background and ``f`` (for tests and tools)."""
        if not 0 <= index < self.n:
            raise IndexError(f"mechanisms: index {index} out of range [0, {self.n})")
        return render(self.config, index)

    def sample(self, index: int) -> Sample:
        r = self.rendered(index)
        return Sample(id=self.sample_id(index), image=r.image, label=r.label, ground_truth=r.ground_truth, meta=r.meta)

    def samples(self, limit: int | None = None) -> Iterator[Sample]:
        stop = self.n if limit is None else min(self.n, int(limit))
        for index in range(stop):
            yield self.sample(index)
