"""``mechanism``: a classifier whose decision is built in, not trained (DESIGN 11, the mechanism tracks).

For each ``kind`` of :mod:`xaibench.datasets.mechanisms`, :class:`MechanismNet` computes that
kind's decision function ``f`` from the constants shared with the generator and outputs the two
logits ``[-f/2, f/2]`` (class 1 when ``f > 0``). Layers:

- ``detect``: a 1 x 1 convolution, 3 -> 2 channels, no bias, weights :data:`DETECT`
  (``u1 = W1 . z``, ``u2 = W2 . z``, both blind to grey); the CAM target layer;
- a per-pixel function of ``(u1, u2)`` and sum pooling (every kind but ``interaction`` is
  exactly additive over pixels), then the kind's bias; ``interaction`` takes the ``min`` of two
  thresholded sums.

No weight is learnt: they are exact constants, and the kind's constants are buffers, so the
identity (``mechanism/<kind>@<weights digest>``) changes with any of them. Input 64 px, mean 0.5
and std 0.25 per channel: pixel ``x`` in [0, 1] maps to ``z = 4x - 2`` in [-2, 2], and the
explainers' baseline ``z = 0`` is mid grey. The generator's pixels are multiples of 1/256, so that
normalisation is exact in float32 and the model agrees with the float64 reference
(:func:`xaibench.datasets.mechanisms.mechanism_f`) to float32 rounding of the final sums.
"""

from __future__ import annotations

import hashlib
from typing import ClassVar

import torch
from torch import nn

from xaibench.api import Model
from xaibench.datasets.mechanisms import (
    ADDITIVE_W1,
    ADDITIVE_W2,
    CANCELLATION_B,
    CANCELLATION_W,
    CONFINED_C,
    CONFINED_W,
    DETECT,
    GENERATOR_VERSION,
    INTERACTION_C,
    INTERACTION_W,
    KINDS,
    LABEL_NAMES,
    SATURATION_C,
    SATURATION_EPS,
    SATURATION_H,
    SATURATION_W,
    SIZE,
    TEXTURE_ROOTS,
    THRESHOLD,
)
from xaibench.models.trained import weights_digest

__all__ = ["ARCH_VERSION", "MEAN", "STD", "MechanismModel", "MechanismNet", "kind_constants"]

ARCH_VERSION = "2"
"""Bump on any change of the architecture (the constants are versioned by the generator)."""
MEAN = (0.5, 0.5, 0.5)
STD = (0.25, 0.25, 0.25)


def kind_constants(kind: str) -> dict[str, float]:
    """The constants of ``kind``'s head, by name (all from :mod:`xaibench.datasets.mechanisms`)."""
    table: dict[str, dict[str, float]] = {
        "confined": {"w": CONFINED_W, "t": THRESHOLD, "c": CONFINED_C},
        "distractor": {"w": CONFINED_W, "t": THRESHOLD, "c": CONFINED_C},
        "additive": {"w1": ADDITIVE_W1, "w2": ADDITIVE_W2},
        "interaction": {"w": INTERACTION_W, "t": THRESHOLD, "c": INTERACTION_C},
        "cancellation": {"w": CANCELLATION_W, "b": CANCELLATION_B, "t": THRESHOLD},
        "saturation": {
            "w": SATURATION_W,
            "t": THRESHOLD,
            "h": SATURATION_H,
            "c": SATURATION_C,
            "eps": SATURATION_EPS,
            "r0": TEXTURE_ROOTS[0],
            "r2": TEXTURE_ROOTS[2],
        },
    }
    if kind not in table:
        raise ValueError(f"mechanism: unknown kind {kind!r}; known: {', '.join(KINDS)}")
    return table[kind]


class MechanismNet(nn.Module):
    """``detect`` (1 x 1 conv, 3 -> 2, no bias), then ``kind``'s head; maps normalised
    ``(B, 3, S, S)`` tensors to the logits ``[-f/2, f/2]``, ``(B, 2)``."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        constants = kind_constants(kind)
        self.kind = kind
        self.detect = nn.Conv2d(3, 2, kernel_size=1, bias=False)
        with torch.no_grad():
            self.detect.weight.copy_(torch.tensor(DETECT, dtype=torch.float32).view(2, 3, 1, 1))
        for name, value in constants.items():
            self.register_buffer(name, torch.tensor(value, dtype=torch.float32))

    def decision(self, x: torch.Tensor) -> torch.Tensor:
        """``f``, ``(B,)``: the kind's decision function of normalised images."""
        u = self.detect(x)
        u1, u2 = u[:, 0], u[:, 1]
        k = self.kind
        if k in ("confined", "distractor"):
            return self.w * torch.relu(u1 - self.t).sum(dim=(1, 2)) - self.c
        if k == "additive":
            return (self.w1 * u1 + self.w2 * u2 * u2.abs()).sum(dim=(1, 2))
        if k == "interaction":
            s1 = torch.relu(u1 - self.t).sum(dim=(1, 2))
            s2 = torch.relu(u2 - self.t).sum(dim=(1, 2))
            return self.w * torch.minimum(s1, s2) - self.c
        if k == "cancellation":  # odd, with a dead zone: equal and opposite marks cancel exactly
            return (self.w * (torch.relu(u1 - self.t) - torch.relu(-u1 - self.t))).sum(dim=(1, 2)) + self.b
        # saturation: every evidence pixel lies beyond the clamp; the texture sits at q's roots
        evidence = self.w * torch.clamp(u1 - self.t, min=0.0, max=float(self.h))
        texture = self.eps * u2 * (u2 - self.r2) * (u2 - self.r0)
        return (evidence + texture).sum(dim=(1, 2)) - self.c

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.decision(x)
        return torch.stack([-0.5 * f, 0.5 * f], dim=1)


class MechanismModel(Model):
    """A classifier whose decision is a mechanism built in (no training): the ``mechanisms`` tracks' model."""

    name: ClassVar[str] = "mechanism"
    version: ClassVar[str] = f"1.{ARCH_VERSION}.{GENERATOR_VERSION}"
    description: ClassVar[str] = (
        "Synthetic, built by construction (no training): a 1x1 opponent-colour detector and a kind-specific "
        "pooled function with exact constants (kind: confined, additive, interaction, cancellation, distractor, "
        "saturation); logits [-f/2, f/2] of the mechanisms dataset's decision function f"
    )
    licence: ClassVar[str] = "Apache-2.0 (constructed by xaibench)"
    synthetic: ClassVar[bool] = True

    def __init__(self, mechanism: str = "confined") -> None:
        """``mechanism``: the kind, one of :data:`xaibench.datasets.mechanisms.KINDS` (the parameter
        is not named ``kind``: the registry's ``create(kind, name, **params)`` takes that keyword)."""
        net = MechanismNet(str(mechanism))
        net.eval()
        self.kind = str(mechanism)
        self.module = net
        self.input_size = SIZE
        self.mean = MEAN
        self.std = STD
        self.label_names = LABEL_NAMES
        self.target_layers = ("detect",)
        # the function is versioned with the weights: a change of either is a new identity
        self._digest = hashlib.sha256(f"{ARCH_VERSION}:{weights_digest(net.state_dict())}".encode()).hexdigest()

    @property
    def identity(self) -> str:
        """``mechanism/<kind>@<first 12 hex of the sha256 of the architecture version and the
        weights' digest>`` (constants included)."""
        return f"{self.name}/{self.kind}@{self._digest[:12]}"
