"""A synthetic PASTA-dataset release whose votes follow known, visible properties of the maps.

:func:`write_synthetic_release` writes a folder in the release format that
:func:`xaibench.pasta.training.data.load_release` reads (``human_annotations.json`` plus the
images and the overlay renders shown to the "raters"), so a PASTA training recipe can be checked
against a ground truth: how much of the raters' judgement is learnable is known in advance.

Items are images x techniques. Every image is a smooth background with one disc (the object).
Every technique draws its saliency map with its own recipe, jittered per item:

========== =====================================================================
technique  map
========== =====================================================================
precise    one smooth blob on the object
blurry     one very wide blob on the object (low concentration)
noisy      a blob on the object plus strong pixel noise (rough)
offset     a smooth blob beside the object (off the object)
scattered  three to five smooth blobs anywhere
blocky     a blob on the object seen through a coarse 6 x 6 grid (LIME-like cells)
========== =====================================================================

Every map is scaled to a maximum of 1 and gets uniform pixel noise of a per-technique amplitude
(:data:`NOISE`, jittered per item), so the properties vary within techniques as well as between them.
Each map is rendered with the project's overlay (:func:`xaibench.pasta.render.render_overlay`),
and three **visible properties** are measured on the map itself (not on the recipe's knobs):
``concentration`` (share of the [0, 1]-scaled map's mass in its 10 % highest pixels),
``smoothness`` (minus the log of the mean absolute difference between neighbour pixels) and
``centre`` (1 minus the normalised distance of the mass centroid from the image centre). Each
question's latent judgement is a fixed positive combination of the properties' z-scores
(:data:`QUESTION_WEIGHTS`, scaled to unit variance); rater ``r`` votes
``round(3 + 1.1 x latent + bias_r + noise)`` clipped to 1..5, with ``bias_r ~ N(0, rater_bias)``
per rater and ``noise ~ N(0, rater_noise)`` per vote (stars).

**Standard configuration** (:data:`STANDARD`): 24 images x 6 techniques = 144 items, 5 raters,
rater noise 0.7 stars, rater bias 0.3 stars, 64 px renders, seed 0. On it the label (the mode
of 5 votes) follows the noise-free latent with a Spearman of 0.90 for Q1 (0.88 to 0.90 for the
others; :attr:`SyntheticRelease.oracle_spearman`): the ceiling for any scorer. Ridge on the true
properties reaches 0.89 held out (leave one technique out x 3 image folds).
:class:`RandomConvFeatures` is a weight-free stand-in for a pretrained image encoder to train on it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from xaibench.api import Encoder

__all__ = [
    "PROPERTIES",
    "QUESTION_WEIGHTS",
    "STANDARD",
    "TECHNIQUES",
    "RandomConvFeatures",
    "ReleaseConfig",
    "SyntheticRelease",
    "map_properties",
    "write_synthetic_release",
]

TECHNIQUES: tuple[str, ...] = ("precise", "blurry", "noisy", "offset", "scattered", "blocky")
PROPERTIES: tuple[str, ...] = ("concentration", "smoothness", "centre")
QUESTION_WEIGHTS: dict[str, tuple[float, float, float]] = {
    "Q1": (1.0, 0.6, 0.2),
    "Q2": (0.8, 0.5, 0.2),
    "Q3": (0.5, 0.8, 0.2),
    "Q4": (0.4, 0.2, 0.8),
    "Q5": (0.2, 1.0, 0.3),
    "Q6": (0.4, 0.8, 0.2),
}
"""Weights of the (concentration, smoothness, centre) z-scores in each question's latent judgement."""


NOISE: dict[str, float] = {
    "precise": 0.05,
    "blurry": 0.1,
    "noisy": 0.6,
    "offset": 0.1,
    "scattered": 0.15,
    "blocky": 0.2,
}
"""Mean amplitude of the uniform pixel noise added to each technique's map (scaled to max 1), jittered per item."""


@dataclass(frozen=True)
class ReleaseConfig:
    """What :func:`write_synthetic_release` generates (see the module docstring)."""

    n_images: int = 24
    techniques: tuple[str, ...] = TECHNIQUES
    n_raters: int = 5
    rater_noise: float = 0.7
    """Standard deviation of each vote's noise, in stars."""
    rater_bias: float = 0.3
    """Standard deviation of each rater's constant offset, in stars."""
    size: int = 64
    """Side of the images, maps and renders, in pixels."""
    seed: int = 0
    dataset: str = "synth"

    def __post_init__(self) -> None:
        unknown = sorted(set(self.techniques) - set(TECHNIQUES))
        if unknown:
            raise ValueError(f"ReleaseConfig: unknown technique(s) {unknown}; choose from {list(TECHNIQUES)}")
        if self.n_images < 1 or self.n_raters < 1 or self.size < 16:
            raise ValueError("ReleaseConfig: need n_images >= 1, n_raters >= 1 and size >= 16")


STANDARD = ReleaseConfig()


@dataclass
class SyntheticRelease:
    """What was written: the release folder and the ground truth behind its votes (item order = the JSON's)."""

    root: Path
    config: ReleaseConfig
    images: list[str]
    techniques: list[str]
    properties: np.ndarray  # (N, 3) raw property values, columns PROPERTIES
    latent: np.ndarray  # (N, 6) noise-free judgement, unit variance per question
    labels: np.ndarray  # (N, 6) mode of the votes, as load_release computes it
    oracle_spearman: dict[str, float] = field(default_factory=dict)
    """Spearman between the noise-free latent and the labels, per question: the best any scorer can expect."""


def _blob(size: int, cy: float, cx: float, sigma: float) -> np.ndarray:
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64)
    return np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2.0 * sigma**2))


def _image(size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, tuple[float, float, float]]:
    """A smooth two-colour background with one disc; returns (image in [0, 1], disc mask, (cy, cx, radius))."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64) / size
    c0, c1 = rng.uniform(0.2, 0.8, 3), rng.uniform(0.2, 0.8, 3)
    angle = rng.uniform(0, 2 * np.pi)
    t = np.clip(0.5 + (np.cos(angle) * (xx - 0.5) + np.sin(angle) * (yy - 0.5)), 0, 1)[..., None]
    img = (1 - t) * c0 + t * c1
    radius = rng.uniform(0.12, 0.2) * size
    cy, cx = rng.uniform(radius + 2, size - radius - 2, 2)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64)
    mask = (yy - cy) ** 2 + (xx - cx) ** 2 <= radius**2
    img[mask] = rng.uniform(0.0, 1.0, 3)
    return np.clip(img, 0, 1), mask, (float(cy), float(cx), float(radius))


def _map(technique: str, size: int, disc: tuple[float, float, float], rng: np.random.Generator) -> np.ndarray:
    """One technique's saliency map (non-negative, ``size x size``), jittered per item."""
    cy, cx, r = disc
    jitter = rng.uniform(0.7, 1.4)
    if technique == "precise":
        m = _blob(size, cy + rng.normal(0, 1), cx + rng.normal(0, 1), 0.6 * r * jitter)
    elif technique == "blurry":
        m = _blob(size, cy + rng.normal(0, 2), cx + rng.normal(0, 2), 2.0 * r * jitter)
    elif technique == "noisy":
        m = _blob(size, cy, cx, 0.7 * r * jitter)
    elif technique == "offset":
        angle = rng.uniform(0, 2 * np.pi)
        dist = rng.uniform(1.5, 2.5) * r
        oy = float(np.clip(cy + dist * np.sin(angle), 0, size - 1))
        ox = float(np.clip(cx + dist * np.cos(angle), 0, size - 1))
        m = _blob(size, oy, ox, 0.7 * r * jitter)
    elif technique == "scattered":
        m = np.zeros((size, size))
        for _ in range(int(rng.integers(3, 6))):
            y, x = rng.uniform(0, size, 2)
            m += rng.uniform(0.5, 1.0) * _blob(size, y, x, rng.uniform(0.3, 0.6) * r)
    elif technique == "blocky":
        cells = 6
        fine = _blob(size, cy + rng.normal(0, 2), cx + rng.normal(0, 2), 0.9 * r * jitter)
        step = int(np.ceil(size / cells))
        coarse = fine.reshape(cells, -1, cells, step).mean(axis=(1, 3)) if size % cells == 0 else None
        if coarse is None:
            idx = np.minimum(np.arange(size) // step, cells - 1)
            coarse = np.zeros((cells, cells))
            np.add.at(coarse, (idx[:, None], idx[None, :]), fine)
        coarse = coarse + rng.uniform(0.0, 0.3) * rng.random((cells, cells)) * coarse.max()
        m = np.kron(coarse, np.ones((step, step)))[:size, :size]
    else:  # pragma: no cover - ReleaseConfig validates techniques
        raise ValueError(technique)
    m = m / max(float(m.max()), 1e-12)
    noise = NOISE[technique] * rng.uniform(0.2, 1.8)
    return np.maximum(m + noise * rng.random((size, size)), 0.0)


def map_properties(saliency: np.ndarray) -> np.ndarray:
    """``(concentration, smoothness, centre)`` of a non-negative map (see the module docstring)."""
    m = np.asarray(saliency, dtype=np.float64)
    m = (m - m.min()) / max(float(np.ptp(m)), 1e-12)
    total = max(float(m.sum()), 1e-12)
    flat = np.sort(m.ravel())[::-1]
    concentration = float(flat[: max(1, len(flat) // 10)].sum()) / total
    roughness = float(np.abs(np.diff(m, axis=0)).mean() + np.abs(np.diff(m, axis=1)).mean())
    smoothness = -float(np.log(roughness + 1e-3))
    h, w = m.shape
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    cy, cx = float((m * yy).sum()) / total, float((m * xx).sum()) / total
    centre = 1.0 - np.hypot((cy - (h - 1) / 2) / h, (cx - (w - 1) / 2) / w) / np.sqrt(0.5)
    return np.array([concentration, smoothness, centre])


def _zscore(x: np.ndarray) -> np.ndarray:
    return (x - x.mean(0)) / np.maximum(x.std(0), 1e-12)


def write_synthetic_release(root: Path, config: ReleaseConfig = STANDARD) -> SyntheticRelease:
    """Write a release folder at ``root`` (created; ``human_annotations.json``, ``images/``,
    ``explanations/``, and ``synthetic_truth.json`` with the properties, latents and oracle
    Spearman) and return its ground truth. Deterministic for a given ``config``."""
    from PIL import Image

    from xaibench.pasta.render import render_overlay
    from xaibench.pasta.training.data import mode_rating
    from xaibench.pasta.training.evaluation import spearman

    root = Path(root)
    (root / "images").mkdir(parents=True, exist_ok=True)
    (root / "explanations").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(config.seed)
    size = config.size
    rows: list[tuple[str, str, str, str, np.ndarray]] = []
    for i in range(config.n_images):
        image, _, disc = _image(size, rng)
        image_id = f"im{i:03d}"
        image_file = f"images/{image_id}.png"
        Image.fromarray(np.rint(image * 255).astype(np.uint8)).save(root / image_file)
        for tech in config.techniques:
            saliency = _map(tech, size, disc, rng)
            exp_file = f"explanations/{config.dataset}_{image_id}_{tech}.png"
            Image.fromarray(render_overlay(image, saliency, size)).save(root / exp_file)
            rows.append((image_id, tech, image_file, exp_file, map_properties(saliency)))
    props = np.array([r[4] for r in rows])
    weights = np.array([QUESTION_WEIGHTS[q] for q in QUESTION_WEIGHTS])  # (6, 3)
    latent = _zscore(props) @ weights.T
    latent = latent / np.maximum(latent.std(0), 1e-12)
    bias = rng.normal(0.0, config.rater_bias, config.n_raters)
    noise = rng.normal(0.0, config.rater_noise, (len(rows), config.n_raters, len(QUESTION_WEIGHTS)))
    votes = np.clip(np.rint(3.0 + 1.1 * latent[:, None, :] + bias[None, :, None] + noise), 1, 5).astype(int)
    entries, labels = [], []
    for n, (_, _, image_file, exp_file, _) in enumerate(rows):
        annotation = [{q: int(votes[n, r, j]) for j, q in enumerate(QUESTION_WEIGHTS)} for r in range(config.n_raters)]
        entries.append(
            {
                "img": image_file,
                "explication": exp_file,
                "GTclass": "disc",
                "predictedclass": "disc",
                "Annotation": annotation,
            }
        )
        labels.append([mode_rating(votes[n, :, j].tolist()) for j in range(len(QUESTION_WEIGHTS))])
    label_arr = np.array(labels)
    oracle = {q: round(spearman(latent[:, j], label_arr[:, j]), 4) for j, q in enumerate(QUESTION_WEIGHTS)}
    (root / "human_annotations.json").write_text(json.dumps(entries), encoding="utf-8")
    truth = {
        "config": {**asdict(config), "techniques": list(config.techniques)},
        "properties": list(PROPERTIES),
        "question_weights": {q: list(w) for q, w in QUESTION_WEIGHTS.items()},
        "oracle_spearman": oracle,
        "items": [{"explication": r[3], "properties": [round(float(v), 6) for v in r[4]]} for r in rows],
    }
    (root / "synthetic_truth.json").write_text(json.dumps(truth, indent=1), encoding="utf-8")
    return SyntheticRelease(
        root=root,
        config=config,
        images=[f"{config.dataset}_{r[0]}" for r in rows],
        techniques=[r[1] for r in rows],
        properties=props,
        latent=latent,
        labels=label_arr,
        oracle_spearman=oracle,
    )


class RandomConvFeatures(Encoder):
    """A cheap, offline, generic image encoder for tests: 48 fixed random 5 x 5 filters on the render
    resized to 32 x 32, ReLU, average-pooled on a 4 x 4 grid plus global mean and max (864-d).

    Like a pretrained CNN's embedding it is high-dimensional and spreads the visible properties
    over many correlated features, so a scoring network trained on it can overfit; it needs no weights.
    """

    name: ClassVar[str] = "random-conv-features"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = "Image: 864-d pooled responses of 48 seeded random 5x5 filters (test kit, no weights)"
    licence: ClassVar[str] = "Apache-2.0"
    modalities: ClassVar[tuple[str, ...]] = ("image",)
    default_params: ClassVar[dict[str, Any]] = {"seed": 0}

    @property
    def identity(self) -> str:
        return f"{self.name}/{self.version}@seed{int(self.params['seed'])}"

    def encode_images(self, images: np.ndarray) -> np.ndarray:
        import torch
        import torch.nn.functional as F

        x = np.asarray(images)
        if x.ndim != 4 or x.shape[-1] != 3:
            raise ValueError(f"{self.name}: expected (N, S, S, 3) uint8 renders, got shape {x.shape}")
        gen = torch.Generator().manual_seed(int(self.params["seed"]))
        filters = torch.randn(48, 3, 5, 5, generator=gen, dtype=torch.float64) / 7.5
        t = torch.as_tensor(x, dtype=torch.float64).permute(0, 3, 1, 2) / 255.0
        t = F.interpolate(t, size=(32, 32), mode="bilinear", antialias=True, align_corners=False)
        r = torch.relu(F.conv2d(t - 0.5, filters, padding=2))
        grid = F.adaptive_avg_pool2d(r, 4).flatten(1)
        feats = torch.cat([grid, r.mean((2, 3)), r.amax((2, 3))], dim=1)
        return feats.float().numpy()
