"""From Captum's attributions to maps: channel reduction, and the superpixels (on the image in
pixel space) that LIME and KernelSHAP perturb."""

from __future__ import annotations

import numpy as np
import torch

from xaibench.kit import Model, from_model_input

REDUCTIONS = ("sum", "abs_sum", "max_abs")


def reduce_channels(attributions: torch.Tensor, how: str) -> np.ndarray:
    """``(B, C, S, S)`` attributions to ``(B, S, S)``: ``sum`` keeps the sign (and the
    completeness of IG/DeepLift/SHAP), ``abs_sum`` sums magnitudes, ``max_abs`` is the
    largest magnitude over channels (Simonyan et al. 2014)."""
    a = attributions.detach().float()
    if how == "sum":
        out = a.sum(dim=1)
    elif how == "abs_sum":
        out = a.abs().sum(dim=1)
    elif how == "max_abs":
        out = a.abs().amax(dim=1)
    else:
        raise ValueError(f"unknown channel reduction {how!r}; known: {', '.join(REDUCTIONS)}")
    return out.cpu().numpy().astype(np.float32)


def pixel_images(x: torch.Tensor, model: Model) -> np.ndarray:
    """Normalised ``(B, 3, S, S)`` inputs back to ``(B, S, S, 3)`` pixel arrays in [0, 1]."""
    return from_model_input(x, model.mean, model.std).clamp(0.0, 1.0).permute(0, 2, 3, 1).cpu().numpy()


def superpixels(image: np.ndarray, method: str, n_segments: int, compactness: float) -> np.ndarray:
    """A fixed segmentation of one ``(S, S, 3)`` pixel image into labels ``0..K-1``.

    ``slic``: skimage SLIC with ``n_segments``, ``compactness``, ``sigma=1``,
    ``start_label=0`` (deterministic). ``grid``: a ``g x g`` grid of equal cells with
    ``g = round(sqrt(n_segments))``. Labels are made contiguous.
    """
    h, w = image.shape[:2]
    if method == "slic":
        from skimage.segmentation import slic

        labels = slic(
            image.astype(np.float64),
            n_segments=n_segments,
            compactness=compactness,
            sigma=1.0,
            start_label=0,
            channel_axis=-1,
        )
    elif method == "grid":
        g = max(1, round(n_segments**0.5))
        rows = np.minimum(np.arange(h) * g // h, g - 1)
        cols = np.minimum(np.arange(w) * g // w, g - 1)
        labels = rows[:, None] * g + cols[None, :]
    else:
        raise ValueError(f"unknown segmentation {method!r}; known: slic, grid")
    _, contiguous = np.unique(labels, return_inverse=True)
    return contiguous.reshape(h, w).astype(np.int64)
