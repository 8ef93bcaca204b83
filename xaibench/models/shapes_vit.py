"""``shapes-vit``: a small Vision Transformer trained by xaibench on the synthetic ``shapes`` dataset.

The transformer counterpart of ``shapes-cnn``, so that attention explainers (``attention-rollout``
of the ``xaibench-vit`` plugin) and every saliency explainer can be ranked on a trained transformer.

Weights as for ``shapes-cnn``: ``weights="shipped"`` (the default) loads the package's reference
weights (:mod:`xaibench.models.shipped`), the same on every machine, with no training;
``weights="train"`` trains on the ``train`` split of ``shapes`` on first use and caches the result
on disk, keyed by a digest of the generator configuration and the training configuration (see
:func:`cache_key`). Trained weights depend on the CPU's kernels, so their identity differs between
machines (DESIGN 6). Cache folder: the ``cache_dir`` parameter, else ``$XAIBENCH_CACHE``, else
``~/.cache/xaibench``; files are ``shapes-vit/shapes-<key>.safetensors`` (a ``state_dict`` as
data, written atomically with an integrity tag, checked on reading:
:func:`xaibench.models.trained.load_state`).

Architecture (:func:`build_net`): timm's own ``VisionTransformer`` (so timm's attention modules,
which ``attention-rollout`` reads), built from the class with random initialisation -- no
pretrained weights, nothing is ever downloaded. Tokens: a convolutional stem (:func:`conv_stem`,
Xiao et al. 2021, "Early convolutions help transformers see better": three stride-2 blocks of
3x3 conv, batch norm and ReLU, widths 16, 32, 64) turns the 64 x 64 px input into an 8 x 8 grid
of 64 patch tokens, one per 8 x 8 px patch, each projected to 64 dims by timm's ``HybridEmbed``
(a 1x1 conv); then a class token and learned position embeddings, 4 pre-norm transformer blocks
of width 64 with 4 heads (16 dims each) and an MLP of width 128, class-token pooling and a linear
head over the 4 shape classes; 0.17 M parameters (0.67 MB of float32 weights). A plain linear
patch embedding (``conv_stem=()``) learns too slowly for the training budget (held-out accuracy
0.36 after 6 epochs of 4096 images, against 0.67 with the stem). Input: 64 x 64 RGB normalised
with mean 0.5 and std 0.25 per channel, as ``shapes-cnn`` (so [0, 1] maps to [-2, 2]; the
deletion baseline, the normalised zero, is mid grey). CAM target: ``blocks.3.norm1``, the last
block's token input (with class-token pooling the patch tokens after the last block do not
reach the logits, so their gradients are zero there).

Training (:class:`TrainConfig`): AdamW (one-cycle, peak lr 2e-3, weight decay 0.05) with the
project's one training loop (:func:`xaibench.models.trained.fit`), 8 epochs over 16384 generated
images of the ``shapes`` train split, batch 64, one CPU thread, with random horizontal and
vertical flips (the four shapes keep their class under flips; the flips come from a generator
seeded with ``seed + 1``) -- about 5 min including data generation on one core of a loaded
2-core machine. Held-out accuracy (:func:`xaibench.models.ship.held_out_accuracy`, recorded in the
shipped manifest): 0.985 with AVX-512 kernels, 0.978 retrained with ``ATEN_CPU_CAPABILITY=avx2``
(other weights, the same skill; with half the images and 12 epochs the two were 0.96 and 0.99).
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

__all__ = ["ARCH_VERSION", "MEAN", "STD", "ShapesViT", "TrainConfig", "build_net", "cache_key", "conv_stem", "train"]

ARCH_VERSION = "1"
"""Bump on any change of the architecture or the training procedure."""
MEAN = (0.5, 0.5, 0.5)
STD = (0.25, 0.25, 0.25)


@dataclass(frozen=True)
class TrainConfig:
    """Everything that determines the trained weights besides the generator."""

    n_train: int = 16384
    epochs: int = 8
    batch_size: int = 64
    lr: float = 2e-3
    weight_decay: float = 0.05
    patch_size: int = 8
    """Side of a square patch in px; ``size`` must be a multiple of it."""
    embed_dim: int = 64
    depth: int = 4
    num_heads: int = 4
    mlp_ratio: float = 2.0
    conv_stem: tuple[int, ...] = (16, 32, 64)
    """Widths of the convolutional stem's stride-2 3x3 conv layers (their product of strides must
    equal ``patch_size``); ``()``: the plain linear patch embedding."""
    flips: bool = True
    """Random horizontal and vertical flips of the training images (label-preserving for all four shapes)."""
    seed: int = 0
    threads: int = 1
    """One thread: deterministic and, on a loaded 2-core machine, faster than two (no spinning)."""
    size: int = 64

    def generator(self, split: str = "train", seed: int | None = None) -> ShapesConfig:
        return ShapesConfig(variant="shapes", split=split, seed=self.seed if seed is None else seed, size=self.size)


def build_net(config: TrainConfig) -> nn.Module:
    """timm ``VisionTransformer`` of ``config``'s shape (with :func:`conv_stem` as its patch embedding
    unless ``conv_stem=()``) and timm's random initialisation under the caller's torch seed; maps
    normalised ``(B, 3, S, S)`` tensors to ``(B, 4)`` logits. Never downloads anything (the class is
    built directly; there are no pretrained weights)."""
    from functools import partial

    from timm.layers import HybridEmbed
    from timm.models.vision_transformer import VisionTransformer

    embed: dict[str, Any] = {"patch_size": config.patch_size}  # timm's linear patch embedding
    if config.conv_stem:
        if 2 ** len(config.conv_stem) != config.patch_size:
            raise ValueError(
                f"shapes-vit: {len(config.conv_stem)} stride-2 stem convs do not make {config.patch_size} px patches"
            )
        # the stem's feature map is the token grid: one token per feature pixel, projected by a 1x1 conv
        embed = {"embed_layer": partial(HybridEmbed, backbone=conv_stem(config.conv_stem)), "patch_size": 1}
    return VisionTransformer(
        img_size=config.size,
        **embed,
        num_classes=len(CLASSES),
        embed_dim=config.embed_dim,
        depth=config.depth,
        num_heads=config.num_heads,
        mlp_ratio=config.mlp_ratio,
        global_pool="token",
        class_token=True,
    )


def conv_stem(widths: tuple[int, ...]) -> nn.Sequential:
    """Stride-2 blocks (3x3 conv, batch norm, ReLU), as ``shapes-cnn``'s: ``S`` px images to
    ``S / 2**len(widths)`` px feature maps of ``widths[-1]`` channels (the patch tokens' grid)."""
    layers: list[nn.Module] = []
    channels = 3
    for width in widths:
        layers += [nn.Conv2d(channels, width, 3, 2, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
        channels = width
    return nn.Sequential(*layers)


def cache_key(config: TrainConfig) -> str:
    """sha256 (16 hex) of the architecture version, training config and train-split generator config."""
    payload = {
        "arch": ARCH_VERSION,
        "model": "shapes-vit",
        "train": asdict(config),
        "generator": config.generator().digest,
        "generator_version": GENERATOR_VERSION,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def normalise(images: np.ndarray) -> torch.Tensor:
    """``(N, H, W, 3)`` [0, 1] arrays to normalised ``(N, 3, H, W)`` tensors."""
    return normalised_batch(images, MEAN, STD)


def train(config: TrainConfig, log: Any = None) -> dict[str, torch.Tensor]:
    """Train the transformer on the ``shapes`` train split; returns the eval-ready ``state_dict``."""
    with deterministic(config.threads):
        t0 = time.perf_counter()
        images, labels = generate_arrays(config.generator(), config.n_train)
        x, y = normalise(images), torch.from_numpy(labels)
        t_data = time.perf_counter() - t0
        torch.manual_seed(config.seed)
        net = build_net(config)
        flips = torch.Generator().manual_seed(config.seed + 1)

        def step(idx: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
            batch = x[idx]
            if config.flips:
                flip = torch.rand(2, len(idx), generator=flips) < 0.5
                batch = torch.where(flip[0].view(-1, 1, 1, 1), batch.flip(3), batch)
                batch = torch.where(flip[1].view(-1, 1, 1, 1), batch.flip(2), batch)
            logits = net(batch)
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


class ShapesViT(Model):
    """A small Vision Transformer (timm) trained by xaibench on the synthetic ``shapes`` dataset."""

    name: ClassVar[str] = "shapes-vit"
    version: ClassVar[str] = f"1.{ARCH_VERSION}.{GENERATOR_VERSION}"
    description: ClassVar[str] = (
        "Synthetic: a 4-block timm Vision Transformer (conv stem, 8 px patch tokens, class token) on the "
        "shapes train split; reference weights shipped with xaibench (weights=train: trained here, about "
        "5 min on one CPU core, cached)"
    )
    licence: ClassVar[str] = "Apache-2.0 (weights trained by xaibench)"
    synthetic: ClassVar[bool] = True

    def __init__(
        self,
        cache_dir: str | os.PathLike[str] | None = None,
        train_config: TrainConfig | None = None,
        weights: str | None = None,
    ) -> None:
        """``weights``: ``shipped`` (default, the package's reference weights) or ``train`` (trained
        here on first use and cached); a ``train_config`` other than the default implies ``train``."""
        self.train_config = train_config or TrainConfig()
        self.cache_key = cache_key(self.train_config)
        self.weights = weights or ("shipped" if self.train_config == TrainConfig() else "train")
        if self.weights not in WEIGHTS_CHOICES:
            raise ValueError(f"shapes-vit: weights must be one of {', '.join(WEIGHTS_CHOICES)}, not {weights!r}")
        root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.weights_path = root / "shapes-vit" / f"shapes-{self.cache_key}.safetensors"
        with torch.random.fork_rng(devices=[]):  # building draws random initial weights: leave the caller's RNG
            torch.manual_seed(self.train_config.seed)
            net = build_net(self.train_config)
        if self.weights == "shipped":
            net.load_state_dict(load_shipped("shapes-vit", self.cache_key).state)
            net.eval()
            self.trained_now = False
        else:
            self.trained_now = load_or_train(net, self.weights_path, lambda: train(self.train_config))
        self.module = net
        self.input_size = self.train_config.size
        self.mean = MEAN
        self.std = STD
        self.label_names = CLASSES
        self.target_layers = (f"blocks.{self.train_config.depth - 1}.norm1",)
        self._digest = weights_digest(net.state_dict())

    @property
    def identity(self) -> str:
        """``shapes-vit@<first 12 hex of the weights' sha256>``."""
        return f"{self.name}@{self._digest[:12]}"
