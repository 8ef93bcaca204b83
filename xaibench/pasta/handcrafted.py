"""The handcrafted PASTA variant (seed 001, appendix D): interpretable criteria as an encoder.

Instead of a foundation-model embedding, each overlay render gets a short vector of named,
interpretable criteria, and the scoring network is trained on those (``xaibench pasta train
--image-encoder pasta-handcrafted``), so it trains and evaluates like any other encoder.

An encoder only sees the render (DESIGN 5), so every criterion is computed from it:

1. **Decode.** The overlay ``0.5 x image + 0.5 x jet(s)`` is inverted on a ``grid x grid`` block
   average: for each pixel the jet entry ``s`` (256 levels) whose implied image ``2 x overlay -
   jet(s)`` is closest to a grey pixel (the grey level fitted, clipped to [0, 1]; infeasible
   images penalised) gives the map value; the image is then ``clip(2 x overlay - jet(s))``.
   Exact for grey images, approximate for colourful ones.
2. **Variance under three sets of augmentations** (``var_photometric``, ``var_geometric``,
   ``var_degradation``): the decoded map (min-max normalised as the renderer does) under
   intensity changes (gamma 0.5 and 2, an offset of -0.25 clipped), geometric changes (left-right
   and up-down flips, shifts by 1/8 of the side) and degradations (Gaussian blur of 1 and 2
   cells, 4x down-and-up sampling); each augmented map is min-max normalised again; the
   statistic is the mean over cells of the variance across the set (identity included).
   Unitless, in [0, 0.25]; 0 for a constant map, higher for a map that changes more.
   The paper augments the *input image* and re-explains; an encoder cannot re-run an
   explainer, so the augmentations act on the explanation itself (docs/pasta.md).
3. **PCA complexity** (``pca_components``, ``pca_first``): principal component analysis of the
   decoded map (rows as observations): the number of components reaching 90 % of its variance,
   divided by ``grid`` (in (0, 1], higher = more complex; 0 for a constant map), and the share of
   variance of the first component (higher = simpler). A single blob needs few components; noise
   needs many.
4. **Classification criterion** (``cls_agreement``, ``cls_masked_prob``, ``cls_masked_entropy``):
   the bundled ImageNet classifier (``efficientnet-lite0``) classifies the decoded image and the
   decoded image multiplied by the decoded map. Agreement of the two top-1 classes (0 or 1), the
   probability the masked image gives to the full image's top-1 class (higher = the highlighted
   region suffices for the decision), and the entropy of the masked prediction in nats.
   ``classifier=none`` leaves the three at 0.
5. **The project's statistics** (``features=all``, the default): sparseness as the Gini index of the
   map (:func:`xaibench.metrics.other.formulas.gini`, higher = sparser, 0 for a constant map) and
   roughness, the mean absolute difference between neighbouring cells (lower = smoother).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import torch

from xaibench.api import Encoder
from xaibench.imaging import resize_bilinear
from xaibench.metrics.other.formulas import gini
from xaibench.pasta.render import JET_LUT

__all__ = [
    "FEATURE_SETS",
    "HandcraftedFeatures",
    "augmentation_variances",
    "classification_criterion",
    "classifier_inputs",
    "criterion_from_probs",
    "decode_overlay",
    "map_features",
    "normalise_map",
    "pca_complexity",
    "roughness",
    "sparseness",
]

PAPER_FEATURES: tuple[str, ...] = (
    "var_photometric",
    "var_geometric",
    "var_degradation",
    "pca_components",
    "pca_first",
    "cls_agreement",
    "cls_masked_prob",
    "cls_masked_entropy",
)
PROJECT_FEATURES: tuple[str, ...] = ("sparseness", "roughness")
FEATURE_SETS: dict[str, tuple[str, ...]] = {"paper": PAPER_FEATURES, "all": PAPER_FEATURES + PROJECT_FEATURES}
"""Feature names, in embedding order, of each ``features`` setting."""

_JET = JET_LUT.astype(np.float64) / 255.0  # (256, 3)
_BATCH = 16
Predict = Callable[[np.ndarray], np.ndarray]
"""``(N, S, S, 3)`` float images in [0, 1] -> ``(N, C)`` class probabilities."""


# ----------------------------------------------------------------------------- decoding


def _batched(n: int, batch: int) -> list[slice]:
    return [slice(i, min(n, i + batch)) for i in range(0, n, batch)]


def normalise_map(saliency: np.ndarray) -> np.ndarray:
    """Positive part, min-max scaled to [0, 1], float64; a constant map becomes all zeros (as rendered)."""
    m = np.maximum(np.asarray(saliency, dtype=np.float64), 0.0)
    lo, hi = float(m.min()), float(m.max())
    return (m - lo) / (hi - lo) if hi > lo else np.zeros_like(m)


def _decode_cells(overlay01: np.ndarray) -> np.ndarray:
    """``(H, W, 3)`` overlay in [0, 1] -> ``(H, W)`` jet levels in [0, 1] (grey-image prior)."""
    h, w, _ = overlay01.shape
    target = 2.0 * overlay01.reshape(-1, 1, 3) - _JET[None]  # implied image per candidate level (P, 256, 3)
    grey = np.clip(target.mean(axis=2, keepdims=True), 0.0, 1.0)
    cost = ((target - grey) ** 2).sum(axis=2)
    cost += 10.0 * ((np.clip(target, 0.0, 1.0) - target) ** 2).sum(axis=2)  # outside [0, 1]: not an image
    return (np.argmin(cost, axis=1).astype(np.float64) / 255.0).reshape(h, w)


def decode_overlay(render: np.ndarray, grid: int = 56) -> tuple[np.ndarray, np.ndarray]:
    """Invert an ``xaibench-jet-overlay/1`` render: ``(map, image)``.

    ``map`` is ``(grid, grid)`` in [0, 1] (the rendered, min-max scaled map, block-averaged);
    ``image`` is ``(S, S, 3)`` in [0, 1] at the render's size (the map upsampled, colour removed).
    """
    r = np.asarray(render)
    if r.ndim != 3 or r.shape[-1] != 3:
        raise ValueError(f"decode_overlay: expected an (S, S, 3) render, got shape {r.shape}")
    o = r.astype(np.float64) / 255.0 if r.dtype == np.uint8 else np.clip(r.astype(np.float64), 0.0, 1.0)
    small = np.clip(resize_bilinear(o, (grid, grid), channels_last=True, dtype=np.float64), 0.0, 1.0)
    levels = _decode_cells(small)
    full = np.clip(resize_bilinear(levels, o.shape[:2], dtype=np.float64), 0.0, 1.0)
    colour = _JET[np.rint(full * 255.0).astype(int)]
    image = np.clip(2.0 * o - colour, 0.0, 1.0)
    return levels, image


# ----------------------------------------------------------------------------- criteria on a map


def _shift(m: np.ndarray, dy: int, dx: int) -> np.ndarray:
    """Shift with edge replication (no wrap-around)."""
    h, w = m.shape
    p = max(abs(dy), abs(dx))
    padded = np.pad(m, p, mode="edge")
    return padded[p - dy : p - dy + h, p - dx : p - dx + w]


def _augmentation_sets(m: np.ndarray) -> dict[str, list[np.ndarray]]:
    from scipy.ndimage import gaussian_filter  # lazy: keeps scipy.ndimage out of plugin registration

    h, w = m.shape
    s = max(1, h // 8)
    down = resize_bilinear(m, (max(1, h // 4), max(1, w // 4)), dtype=np.float64)
    return {
        "var_photometric": [m, m**0.5, m**2.0, np.clip(m - 0.25, 0.0, 1.0)],
        "var_geometric": [m, m[:, ::-1], m[::-1, :], _shift(m, s, 0), _shift(m, 0, s)],
        "var_degradation": [
            m,
            gaussian_filter(m, 1.0, mode="nearest", truncate=3.0),
            gaussian_filter(m, 2.0, mode="nearest", truncate=3.0),
            resize_bilinear(down, (h, w), dtype=np.float64),
        ],
    }


def augmentation_variances(saliency: np.ndarray) -> dict[str, float]:
    """Mean over cells of the variance across each augmentation set (each member min-max normalised).

    Unitless, in [0, 0.25]; 0 for a constant map; higher means the map changes more under that set.
    """
    m = normalise_map(saliency)
    out = {}
    for name, members in _augmentation_sets(m).items():
        stack = np.stack([normalise_map(a) for a in members])
        out[name] = float(stack.var(axis=0).mean())
    return out


def pca_complexity(saliency: np.ndarray, threshold: float = 0.9) -> tuple[float, float]:
    """``(components, first)``: the number of principal components (rows of the normalised map as
    observations) needed to reach ``threshold`` of its variance, divided by the number of columns,
    and the first component's share of variance. ``(0, 1)`` for a constant map."""
    m = normalise_map(saliency)
    centred = m - m.mean(axis=0, keepdims=True)
    sv = np.linalg.svd(centred, compute_uv=False)
    energy = sv**2
    total = float(energy.sum())
    if total <= 1e-12:
        return 0.0, 1.0
    ratio = np.cumsum(energy) / total
    k = int(np.searchsorted(ratio, threshold - 1e-12) + 1)
    return k / m.shape[1], float(energy[0] / total)


def sparseness(saliency: np.ndarray) -> float:
    """Gini index of the normalised map (higher = sparser), 0 for a constant map."""
    g = gini(normalise_map(saliency))
    return 0.0 if g != g else g


def roughness(saliency: np.ndarray) -> float:
    """Mean absolute difference between 4-neighbouring cells of the normalised map (lower = smoother)."""
    m = normalise_map(saliency)
    if m.shape[0] < 2 or m.shape[1] < 2:
        return 0.0
    return float((np.abs(np.diff(m, axis=0)).mean() + np.abs(np.diff(m, axis=1)).mean()) / 2.0)


def map_features(saliency: np.ndarray) -> dict[str, float]:
    """Every criterion that needs only the map (augmentation variances, PCA complexity, project statistics)."""
    out = augmentation_variances(saliency)
    out["pca_components"], out["pca_first"] = pca_complexity(saliency)
    out["sparseness"] = sparseness(saliency)
    out["roughness"] = roughness(saliency)
    return out


def classifier_inputs(image: np.ndarray, saliency: np.ndarray) -> np.ndarray:
    """``(2, S, S, 3)`` float32: the image and the image multiplied by the normalised map (resized to it)."""
    img = np.clip(np.asarray(image, dtype=np.float64), 0.0, 1.0)
    mask = np.clip(resize_bilinear(normalise_map(saliency), img.shape[:2], dtype=np.float64), 0.0, 1.0)
    return np.stack([img, img * mask[..., None]]).astype(np.float32)


def criterion_from_probs(full: np.ndarray, masked: np.ndarray) -> dict[str, float]:
    """``cls_agreement``: 1 when the top-1 classes of the full and masked images agree, else 0;
    ``cls_masked_prob``: the masked image's probability of the full image's top-1 class;
    ``cls_masked_entropy``: entropy (nats) of the masked prediction."""
    full, masked = np.asarray(full, dtype=np.float64), np.asarray(masked, dtype=np.float64)
    top = int(np.argmax(full))
    p = np.clip(masked, 1e-12, 1.0)
    return {
        "cls_agreement": float(int(np.argmax(masked)) == top),
        "cls_masked_prob": float(masked[top]),
        "cls_masked_entropy": float(-(p * np.log(p)).sum()),
    }


def classification_criterion(image: np.ndarray, saliency: np.ndarray, predict: Predict) -> dict[str, float]:
    """The classifier on the image and on the image masked by the map (:func:`criterion_from_probs`)."""
    probs = np.asarray(predict(classifier_inputs(image, saliency)))
    return criterion_from_probs(probs[0], probs[1])


# ----------------------------------------------------------------------------- the encoder


class HandcraftedFeatures(Encoder):
    """Interpretable criteria per overlay render (appendix D's handcrafted variant); see the module docstring."""

    name: ClassVar[str] = "pasta-handcrafted"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = (
        "Image: the handcrafted PASTA variant (appendix D): variance under 3 augmentation sets, PCA complexity, "
        "a classification criterion (efficientnet-lite0), plus Gini sparseness and roughness (features=all)"
    )
    licence: ClassVar[str] = "Apache-2.0 (classifier weights)"
    modalities: ClassVar[tuple[str, ...]] = ("image",)
    default_params: ClassVar[dict[str, Any]] = {"features": "all", "classifier": "efficientnet-lite0", "grid": 56}

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._model: Any = None
        self._error: str | None = None
        if self.params["features"] not in FEATURE_SETS:
            raise ValueError(
                f"{self.name}: features must be one of {sorted(FEATURE_SETS)}, got {self.params['features']!r}"
            )
        if self.params["classifier"] not in ("efficientnet-lite0", "none", None):
            raise ValueError(f"{self.name}: classifier must be 'efficientnet-lite0' or 'none'")
        if int(self.params["grid"]) < 8:
            raise ValueError(f"{self.name}: grid must be at least 8, got {self.params['grid']!r}")

    @property
    def feature_names(self) -> tuple[str, ...]:
        return FEATURE_SETS[str(self.params["features"])]

    def _uses_classifier(self) -> bool:
        return self.params["classifier"] not in ("none", None)

    def _load(self) -> Any:
        """The classifier (or a marker without one); raises ``RuntimeError`` with the reason it cannot load."""
        if self._model is None and self._error is None:
            if not self._uses_classifier():
                self._model = "no-classifier"
            else:
                try:
                    from xaibench.models.efficientnet_lite import EfficientNetLite0

                    self._model = EfficientNetLite0()
                except Exception as exc:  # noqa: BLE001 - reported as the reason the encoder is unavailable
                    self._error = f"{self.name}: classifier efficientnet-lite0: {type(exc).__name__}: {exc}"
        if self._model is None:
            raise RuntimeError(self._error)
        return self._model

    def unavailable(self) -> str | None:
        try:
            self._load()
        except RuntimeError as exc:
            return str(exc)
        return None

    @property
    def identity(self) -> str:
        model = self._load()
        cls = model.identity if self._uses_classifier() else "none"
        return f"{self.name}/{self.version}@{cls}/{self.params['features']}/grid{int(self.params['grid'])}"

    def _predict(self, images: np.ndarray) -> np.ndarray:
        model = self._load()
        with torch.no_grad():
            x = model.preprocess([im.astype(np.float32) for im in images])
            return torch.softmax(model.module(x).float(), dim=-1).numpy()

    def features(self, render: np.ndarray) -> dict[str, float]:
        """Every criterion of one render, by name."""
        return self._features_batch(np.asarray(render)[None])[0]

    def _features_batch(self, renders: np.ndarray) -> list[dict[str, float]]:
        decoded = [decode_overlay(r, int(self.params["grid"])) for r in renders]
        rows = [map_features(saliency) for saliency, _ in decoded]
        if not self._uses_classifier():
            for row in rows:
                row.update({"cls_agreement": 0.0, "cls_masked_prob": 0.0, "cls_masked_entropy": 0.0})
            return rows
        # Batched classifier passes: render i's image and masked image are rows 2i and 2i + 1.
        stacked = np.concatenate([classifier_inputs(image, saliency) for saliency, image in decoded])
        probs = np.concatenate([self._predict(stacked[sl]) for sl in _batched(len(stacked), _BATCH)])
        for i, row in enumerate(rows):
            row.update(criterion_from_probs(probs[2 * i], probs[2 * i + 1]))
        return rows

    def encode_images(self, images: np.ndarray) -> np.ndarray:
        self._load()
        images = np.asarray(images)
        if images.ndim != 4 or images.shape[-1] != 3:
            raise ValueError(f"{self.name}: expected (N, S, S, 3) uint8 renders, got shape {images.shape}")
        names = self.feature_names
        rows = [[row[n] for n in names] for row in self._features_batch(images)]
        return np.asarray(rows, dtype=np.float32).reshape(len(images), len(names))
