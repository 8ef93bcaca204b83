"""Image to model-input conversion shared by every model plugin."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F


def to_model_input(
    images: Sequence[np.ndarray],
    size: int,
    mean: Sequence[float],
    std: Sequence[float],
) -> torch.Tensor:
    """Squash-resize ``H x W x 3`` [0, 1] images to ``size`` (bilinear) and normalise.

    Squashing (no crop) keeps a one-to-one map between input pixels and ground
    truth pixels, so saliency maps can be resized back exactly.
    """
    batch = []
    for image in images:
        t = torch.from_numpy(np.ascontiguousarray(image, dtype=np.float32)).permute(2, 0, 1)[None]
        if t.shape[-2:] != (size, size):
            t = F.interpolate(t, size=(size, size), mode="bilinear", align_corners=False, antialias=True)
        batch.append(t[0])
    x = torch.stack(batch).clamp_(0.0, 1.0)
    m = torch.tensor(mean, dtype=torch.float32).view(1, 3, 1, 1)
    s = torch.tensor(std, dtype=torch.float32).view(1, 3, 1, 1)
    return (x - m) / s


def from_model_input(x: torch.Tensor, mean: Sequence[float], std: Sequence[float]) -> torch.Tensor:
    """Inverse of the normalisation: back to [0, 1] pixel space."""
    m = torch.tensor(mean, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    s = torch.tensor(std, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    return x * s + m
