"""Images and maps: the one bilinear resize, and the conversion of images to model inputs.

Every resize in xaibench goes through :func:`resize_bilinear`: half-pixel centres
(``align_corners=False``) and antialiased when shrinking (a triangle filter widened by the
scale factor, as PIL does). Upsampling is plain bilinear either way. Models squash-resize images
to their square input (no crop) with the same function, so a saliency map at input size maps
back onto the native image pixel for pixel.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F


def resize_tensor(t: torch.Tensor, size: tuple[int, int], *, antialias: bool = True) -> torch.Tensor:
    """Resize a ``(N, C, H, W)`` tensor to ``size = (H', W')`` (bilinear; see the module doc)."""
    if tuple(t.shape[-2:]) == tuple(size):
        return t
    return F.interpolate(
        t, size=(int(size[0]), int(size[1])), mode="bilinear", align_corners=False, antialias=antialias
    )


def resize_bilinear(
    array: np.ndarray,
    size: tuple[int, int],
    *,
    channels_last: bool = False,
    antialias: bool = True,
    dtype: type[np.floating] = np.float32,
) -> np.ndarray:
    """Resize a map ``(H, W)``, a batch of maps ``(N, H, W)`` or, with ``channels_last``, an image
    ``(H, W, C)`` to ``size = (H', W')``, computed and returned in ``dtype`` (float32 or float64).
    Returns a new array (a copy when the size already matches)."""
    a = np.ascontiguousarray(array, dtype=dtype)
    if channels_last:
        if a.ndim != 3:
            raise ValueError(f"resize_bilinear: expected an H x W x C image, got shape {a.shape}")
        t = torch.from_numpy(a).permute(2, 0, 1)[None]
    elif a.ndim == 2:
        t = torch.from_numpy(a)[None, None]
    elif a.ndim == 3:
        t = torch.from_numpy(a)[:, None]
    else:
        raise ValueError(f"resize_bilinear: expected a 2-D map or an (N, H, W) batch, got shape {a.shape}")
    if tuple(a.shape[:2] if channels_last else a.shape[-2:]) == tuple(size):
        return a.copy()
    out = resize_tensor(t, size, antialias=antialias)
    if channels_last:
        return out[0].permute(1, 2, 0).contiguous().numpy()
    return out[0, 0].numpy() if a.ndim == 2 else out[:, 0].numpy()


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
        batch.append(resize_tensor(t, (size, size))[0])
    x = torch.stack(batch).clamp_(0.0, 1.0)
    m = torch.tensor(mean, dtype=torch.float32).view(1, 3, 1, 1)
    s = torch.tensor(std, dtype=torch.float32).view(1, 3, 1, 1)
    return (x - m) / s


def from_model_input(x: torch.Tensor, mean: Sequence[float], std: Sequence[float]) -> torch.Tensor:
    """Inverse of the normalisation: back to [0, 1] pixel space."""
    m = torch.tensor(mean, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    s = torch.tensor(std, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    return x * s + m
