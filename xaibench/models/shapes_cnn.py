"""``shapes-cnn``: a small CNN trained by xaibench on the synthetic shapes datasets.

Weights (the ``weights`` parameter): ``shipped`` (the default) loads the reference weights that
ship with the package (:mod:`xaibench.models.shipped`), the same on every machine, with no
training; ``train`` trains on the ``train`` split of ``shapes`` or ``shapes-shortcut`` (the
``variant``) on first use and caches the result on disk, keyed by a digest of the generator
configuration and the training configuration (see :func:`cache_key`). Trained weights depend on
the CPU's kernels, so their identity differs between machines (DESIGN 6). Cache folder: the
``cache_dir`` parameter, else ``$XAIBENCH_CACHE``, else ``~/.cache/xaibench``; files are
``shapes-cnn/<variant>-<key>.safetensors`` (a ``state_dict`` as data, written atomically with
an integrity tag, checked on reading: :func:`xaibench.models.trained.load_state`).

Architecture (:class:`ShapesNet`): four conv blocks (3x3 conv, batch norm, ReLU) of
widths 16, 32, 64, 64; the first has stride 2 and the first two end in a 2x2 max-pool,
so the last conv layer, ``features.11`` (the CAM target), runs at 8 x 8 for a 64 px
input; then global average pooling and one linear layer. Input: 64 x 64 RGB
normalised with mean 0.5 and std 0.25 per channel (so [0, 1] maps to [-2, 2]; the
deletion baseline, the normalised zero, is mid grey).

Training: AdamW (lr 3e-3 one-cycle, weight decay 1e-4), 6 epochs over 4096 generated
images, batch 32, one CPU thread -- about 30 s including data generation, and at least
97 % held-out accuracy on both variants (see the report in ``tests/test_shapes.py``).
Training is deterministic for a given configuration: fixed seed, fixed thread count,
deterministic torch algorithms, data from the seeded generator.
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
from xaibench.datasets.shapes import CLASSES, GENERATOR_VERSION, ShapesConfig, generate_arrays
from xaibench.models.shipped import WEIGHTS_CHOICES, load_shipped
from xaibench.models.trained import (
    default_cache_dir,
    deterministic,
    fit,
    load_or_train,
    normalised_batch,
    weights_digest,
)

ARCH_VERSION = "2"
"""Bump on any change of the architecture or the training procedure."""
VARIANTS = ("shapes", "shapes-shortcut")
MEAN = (0.5, 0.5, 0.5)
STD = (0.25, 0.25, 0.25)


@dataclass(frozen=True)
class TrainConfig:
    """Everything that determines the trained weights besides the generator."""

    n_train: int = 4096
    epochs: int = 6
    batch_size: int = 32
    lr: float = 3e-3
    weight_decay: float = 1e-4
    widths: tuple[int, ...] = (16, 32, 64, 64)
    stem_stride: int = 2
    pool_after: tuple[int, ...] = (0, 1)
    seed: int = 0
    threads: int = 1
    """One thread: deterministic and, on a loaded 2-core machine, faster than two (no spinning)."""
    size: int = 64
    shape_noise: float = 0.8
    """Only for ``shapes-shortcut``: fraction of training images whose shape is random."""

    def generator(self, variant: str, split: str = "train", seed: int | None = None) -> ShapesConfig:
        noise = self.shape_noise if (variant == "shapes-shortcut" and split == "train") else 0.0
        return ShapesConfig(
            variant=variant, split=split, seed=self.seed if seed is None else seed, size=self.size, shape_noise=noise
        )


class ShapesNet(nn.Module):
    """Conv blocks (conv 3x3, batch norm, ReLU; the first with stride ``stem_stride``; a
    2x2 max-pool after the blocks in ``pool_after``), global average pooling, a linear
    classifier. Maps normalised ``(B, 3, S, S)`` tensors to logits."""

    def __init__(
        self,
        widths: tuple[int, ...] = TrainConfig.widths,
        stem_stride: int = TrainConfig.stem_stride,
        pool_after: tuple[int, ...] = TrainConfig.pool_after,
        n_classes: int = len(CLASSES),
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        channels = 3
        for k, width in enumerate(widths):
            stride = stem_stride if k == 0 else 1
            layers += [nn.Conv2d(channels, width, 3, stride, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
            if k in pool_after:
                layers.append(nn.MaxPool2d(2))
            channels = width
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(channels, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.pool(self.features(x)).flatten(1))

    @classmethod
    def from_config(cls, config: TrainConfig) -> ShapesNet:
        return cls(config.widths, config.stem_stride, config.pool_after)

    def last_conv(self) -> str:
        """Dotted path of the last conv layer (the CAM target)."""
        return [name for name, m in self.named_modules() if isinstance(m, nn.Conv2d)][-1]


def cache_key(variant: str, config: TrainConfig) -> str:
    """sha256 (16 hex) of the architecture version, training config and train-split generator config."""
    payload = {
        "arch": ARCH_VERSION,
        "variant": variant,
        "train": asdict(config),
        "generator": config.generator(variant).digest,
        "generator_version": GENERATOR_VERSION,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def normalise(images: np.ndarray) -> torch.Tensor:
    """``(N, H, W, 3)`` [0, 1] arrays to normalised ``(N, 3, H, W)`` tensors."""
    return normalised_batch(images, MEAN, STD)


def train(variant: str, config: TrainConfig, log: Any = None) -> dict[str, torch.Tensor]:
    """Train the network on the variant's train split; returns the eval-ready ``state_dict``."""
    if variant not in VARIANTS:
        raise ValueError(f"shapes-cnn: unknown variant {variant!r}; known: {', '.join(VARIANTS)}")
    with deterministic(config.threads):
        t0 = time.perf_counter()
        images, labels = generate_arrays(config.generator(variant), config.n_train)
        x, y = normalise(images), torch.from_numpy(labels)
        t_data = time.perf_counter() - t0
        torch.manual_seed(config.seed)
        net = ShapesNet.from_config(config)

        def step(idx: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
            logits = net(x[idx])
            loss = nn.functional.cross_entropy(logits, y[idx])
            correct = int((logits.argmax(1) == y[idx]).sum())
            return loss, {"loss": float(loss.detach()) * len(idx), "correct": correct}

        def report(epoch: int, sums: dict[str, float]) -> None:
            if log is not None:
                seconds = time.perf_counter() - t0
                log(
                    f"epoch {epoch}/{config.epochs} loss {sums['loss'] / config.n_train:.3f} "
                    f"acc {sums['correct'] / config.n_train:.3f} ({seconds:.1f} s, data {t_data:.1f} s)"
                )

        fit(net, config, step, log=report)
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


class ShapesCNN(Model):
    """A small CNN trained by xaibench on the synthetic shapes datasets (clean or shortcut)."""

    name: ClassVar[str] = "shapes-cnn"
    version: ClassVar[str] = f"1.{ARCH_VERSION}.{GENERATOR_VERSION}"
    description: ClassVar[str] = (
        "Synthetic: a 4-block CNN with global average pooling on the shapes or shapes-shortcut train split; "
        "reference weights shipped with xaibench (weights=train: trained here, about 30 s on one CPU core, cached)"
    )
    licence: ClassVar[str] = "Apache-2.0 (weights trained by xaibench)"
    synthetic: ClassVar[bool] = True

    def __init__(
        self,
        variant: str = "shapes",
        cache_dir: str | os.PathLike[str] | None = None,
        train_config: TrainConfig | None = None,
        weights: str | None = None,
    ) -> None:
        """``weights``: ``shipped`` (default, the package's reference weights) or ``train`` (trained
        here on first use and cached); a ``train_config`` other than the default implies ``train``."""
        if variant not in VARIANTS:
            raise ValueError(f"shapes-cnn: unknown variant {variant!r}; known: {', '.join(VARIANTS)}")
        self.variant = variant
        self.train_config = train_config or TrainConfig()
        self.cache_key = cache_key(variant, self.train_config)
        self.weights = weights or ("shipped" if self.train_config == TrainConfig() else "train")
        if self.weights not in WEIGHTS_CHOICES:
            raise ValueError(f"shapes-cnn: weights must be one of {', '.join(WEIGHTS_CHOICES)}, not {weights!r}")
        root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.weights_path = root / "shapes-cnn" / f"{variant}-{self.cache_key}.safetensors"
        net = ShapesNet.from_config(self.train_config)
        if self.weights == "shipped":
            net.load_state_dict(load_shipped(f"shapes-cnn/{variant}", self.cache_key).state)
            net.eval()
            self.trained_now = False
        else:
            self.trained_now = load_or_train(net, self.weights_path, lambda: train(variant, self.train_config))
        self.module = net
        self.input_size = self.train_config.size
        self.mean = MEAN
        self.std = STD
        self.label_names = CLASSES
        self.target_layers = (net.last_conv(),)
        self._digest = weights_digest(net.state_dict())

    @property
    def identity(self) -> str:
        """``shapes-cnn/<variant>@<first 12 hex of the weights' sha256>``."""
        return f"{self.name}/{self.variant}@{self._digest[:12]}"
