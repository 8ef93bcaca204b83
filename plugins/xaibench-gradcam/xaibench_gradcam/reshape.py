"""Token outputs (ViT) as CAM maps: the activation reshape for the ``reshape`` parameter."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from xaibench.kit import Model


def vit_reshape(prefix_tokens: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """Drop ``prefix_tokens`` leading tokens of ``(B, N, C)`` activations and fold the rest
    into a square ``(B, C, h, w)`` grid (h = w = sqrt(N - prefix))."""

    def reshape(tokens: torch.Tensor) -> torch.Tensor:
        if tokens.dim() == 4:
            return tokens
        grid = tokens[:, prefix_tokens:, :]
        side = math.isqrt(int(grid.shape[1]))
        if side * side != int(grid.shape[1]):
            raise ValueError(
                f"reshape='vit': {int(grid.shape[1])} tokens after dropping {prefix_tokens} prefix token(s) "
                "do not form a square grid"
            )
        return grid.reshape(grid.shape[0], side, side, grid.shape[2]).permute(0, 3, 1, 2)

    return reshape


def reshape_for(model: Model, mode: str) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """The activation reshape for ``mode``: ``model`` (the model's ``reshape_transform``
    attribute; without one, the ``vit`` reshape for a network that declares
    ``num_prefix_tokens``, as timm's vision transformers do; else none), ``none``, or ``vit``
    (``num_prefix_tokens`` of the model, else of its network, default 1)."""
    if mode == "none":
        return None
    if mode == "vit":
        prefix = getattr(model, "num_prefix_tokens", None)
        if prefix is None:
            prefix = getattr(model.module, "num_prefix_tokens", 1)
        return vit_reshape(int(prefix))
    transform = getattr(model, "reshape_transform", None)
    if callable(transform):
        return transform
    return reshape_for(model, "vit") if hasattr(model.module, "num_prefix_tokens") else None
