"""``shapes-cbm``: a concept-bottleneck model on the synthetic ``shapes`` dataset.

A joint concept-bottleneck model (Koh et al. 2020): a small CNN (:class:`ConceptCNN`, the
first ``shapes-cnn`` architecture) predicts the 15 concepts of
:mod:`xaibench.datasets.shape_concepts` as sigmoid probabilities, and a linear layer maps those
probabilities to the 4 classes; both are trained together with
``concept_weight x BCE(concepts) + CE(class)``. ``module`` maps normalised images to class logits, so
saliency explainers work on it too; concept explainers use :meth:`ShapesCBM.concept_probs` and
:meth:`ShapesCBM.class_logits`.

Weights as for ``shapes-cnn``: ``weights="shipped"`` (default) loads the package's reference
weights (:mod:`xaibench.models.shipped`); ``weights="train"`` trains on the ``shapes`` train split
on first use and caches the result (``<cache>/shapes-cbm/shapes-<key>.safetensors``, with an
integrity tag, checked on reading); deterministic for a given configuration on one machine. Input 64 px, mean
0.5 and std 0.25 per channel.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from xaibench.api import Model
from xaibench.datasets.shape_concepts import CONCEPTS, concept_vector
from xaibench.datasets.shapes import CLASSES, GENERATOR_VERSION, ShapesConfig, render
from xaibench.models.shipped import WEIGHTS_CHOICES, load_shipped
from xaibench.models.trained import (
    default_cache_dir,
    deterministic,
    fit,
    load_or_train,
    normalised_batch,
    weights_digest,
)

__all__ = ["CBMNet", "CBMTrainConfig", "ConceptCNN", "ShapesCBM", "generate_concept_data", "train_cbm"]

ARCH_VERSION = "2"
MEAN = (0.5, 0.5, 0.5)
STD = (0.25, 0.25, 0.25)


def normalise(images: np.ndarray) -> torch.Tensor:
    """``(N, H, W, 3)`` [0, 1] arrays to normalised ``(N, 3, H, W)`` tensors."""
    return normalised_batch(images, MEAN, STD)


class ConceptCNN(nn.Module):
    """Conv blocks (3x3 conv, batch norm, ReLU; max-pool 2 after all but the first and last),
    global average pooling and a linear layer with one output per concept (logits)."""

    def __init__(self, widths: tuple[int, ...], stem_stride: int = 2, n_outputs: int = len(CONCEPTS)) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        channels = 3
        for k, width in enumerate(widths):
            stride = stem_stride if k == 0 else 1
            layers += [nn.Conv2d(channels, width, 3, stride, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
            if 0 < k < len(widths) - 1:
                layers.append(nn.MaxPool2d(2))
            channels = width
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(channels, n_outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.pool(self.features(x)).flatten(1))


def last_conv_path(widths: tuple[int, ...]) -> str:
    """Dotted path of the last conv layer inside :class:`ConceptCNN` (the CAM target)."""
    return f"features.{3 + 4 * (len(widths) - 2)}"


@dataclass(frozen=True)
class CBMTrainConfig:
    """Everything that determines the trained weights besides the generator."""

    n_train: int = 3072
    epochs: int = 14
    batch_size: int = 32
    lr: float = 3e-3
    concept_weight: float = 2.0
    weight_decay: float = 1e-4
    widths: tuple[int, ...] = (16, 32, 64, 64)
    stem_stride: int = 2
    seed: int = 0
    threads: int = 2
    size: int = 64


class CBMNet(nn.Module):
    """Concept network + linear class head. ``forward`` returns class logits."""

    def __init__(self, widths: tuple[int, ...] = CBMTrainConfig.widths, stem_stride: int = 2) -> None:
        super().__init__()
        self.concepts = ConceptCNN(widths, stem_stride, n_outputs=len(CONCEPTS))
        self.head = nn.Linear(len(CONCEPTS), len(CLASSES))

    def concept_logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.concepts(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.sigmoid(self.concepts(x)))


def generate_concept_data(config: ShapesConfig, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Images ``(n, S, S, 3)``, concept labels ``(n, 15)`` and class labels ``(n,)`` of a shapes split."""
    images = np.empty((n, config.size, config.size, 3), dtype=np.float32)
    concepts = np.empty((n, len(CONCEPTS)), dtype=np.float32)
    labels = np.empty(n, dtype=np.int64)
    for i in range(n):
        r = render(config, i)
        images[i], labels[i] = r.image, r.label
        colour = np.median(r.image[r.mask], axis=0)
        concepts[i] = concept_vector(str(r.meta["shape"]), colour, float(r.meta["radius"]), config.size)
    return images, concepts, labels


def cache_key(config: CBMTrainConfig) -> str:
    payload = {
        "arch": ARCH_VERSION,
        "train": asdict(config),
        "concepts": list(CONCEPTS),
        "generator": ShapesConfig(split="train", seed=config.seed, size=config.size).digest,
        "generator_version": GENERATOR_VERSION,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def train_cbm(config: CBMTrainConfig, log: Any = None) -> dict[str, torch.Tensor]:
    """Train concept network and head jointly: ``concept_weight x BCE(concepts) + CE(classes)``."""
    with deterministic(config.threads):
        t0 = time.perf_counter()
        images, concepts, labels = generate_concept_data(
            ShapesConfig(split="train", seed=config.seed, size=config.size), config.n_train
        )
        x, c, y = normalise(images), torch.from_numpy(concepts), torch.from_numpy(labels)
        torch.manual_seed(config.seed)
        net = CBMNet(config.widths, config.stem_stride)

        def step(idx: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
            logits = net.concepts(x[idx])
            bce = nn.functional.binary_cross_entropy_with_logits(logits, c[idx])
            ce = nn.functional.cross_entropy(net.head(torch.sigmoid(logits)), y[idx])
            loss = config.concept_weight * bce + ce
            return loss, {"bce": float(bce.detach()) * len(idx), "ce": float(ce.detach()) * len(idx)}

        def report(epoch: int, sums: dict[str, float]) -> None:
            if log is not None:
                log(
                    f"epoch {epoch}/{config.epochs} concept bce {sums['bce'] / config.n_train:.4f} "
                    f"class ce {sums['ce'] / config.n_train:.4f} ({time.perf_counter() - t0:.1f} s)"
                )

        fit(net, config, step, log=report)
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


class ShapesCBM(Model):
    """Concept-bottleneck model on ``shapes``: 15 attribute concepts, then a linear class head."""

    name: ClassVar[str] = "shapes-cbm"
    version: ClassVar[str] = f"1.{ARCH_VERSION}.{GENERATOR_VERSION}"
    description: ClassVar[str] = (
        "Synthetic: concept-bottleneck model on shapes (15 concepts: outline, colour, size -> linear head); "
        "reference weights shipped with xaibench (weights=train: trained here, about 1-4 min on 2 CPU cores, cached)"
    )
    licence: ClassVar[str] = "Apache-2.0 (weights trained by xaibench)"
    synthetic: ClassVar[bool] = True

    def __init__(
        self,
        cache_dir: str | os.PathLike[str] | None = None,
        train_config: CBMTrainConfig | None = None,
        weights: str | None = None,
    ) -> None:
        """``weights``: ``shipped`` (default, the package's reference weights) or ``train`` (trained
        here on first use and cached); a ``train_config`` other than the default implies ``train``."""
        self.train_config = train_config or CBMTrainConfig()
        self.cache_key = cache_key(self.train_config)
        self.weights = weights or ("shipped" if self.train_config == CBMTrainConfig() else "train")
        if self.weights not in WEIGHTS_CHOICES:
            raise ValueError(f"shapes-cbm: weights must be one of {', '.join(WEIGHTS_CHOICES)}, not {weights!r}")
        root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.weights_path = root / "shapes-cbm" / f"shapes-{self.cache_key}.safetensors"
        net = CBMNet(self.train_config.widths, self.train_config.stem_stride)
        if self.weights == "shipped":
            net.load_state_dict(load_shipped("shapes-cbm", self.cache_key).state)
            net.eval()
            self.trained_now = False
        else:
            self.trained_now = load_or_train(net, self.weights_path, lambda: train_cbm(self.train_config))
        self.module = net
        self.input_size = self.train_config.size
        self.mean = MEAN
        self.std = STD
        self.label_names = CLASSES
        self.concept_names: tuple[str, ...] = CONCEPTS
        self.target_layers = ("concepts." + last_conv_path(self.train_config.widths),)
        self._digest = weights_digest(net.state_dict())

    @property
    def identity(self) -> str:
        """``shapes-cbm@<first 12 hex of the weights' sha256>``."""
        return f"{self.name}@{self._digest[:12]}"

    def concept_probs(self, inputs: torch.Tensor) -> torch.Tensor:
        """``(B, 15)`` concept probabilities of normalised inputs."""
        with torch.no_grad():
            return torch.sigmoid(self.module.concept_logits(inputs))

    def class_logits(self, concepts: torch.Tensor) -> torch.Tensor:
        """Class logits ``(..., 4)`` from concept probabilities ``(..., 15)`` (the linear head)."""
        with torch.no_grad():
            return self.module.head(concepts)
