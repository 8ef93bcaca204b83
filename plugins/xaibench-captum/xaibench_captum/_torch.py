"""Helpers shared by the Captum explainers: inputs, seeding, baselines, channel reduction,
superpixels, and leak-free gradient state."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from xaibench.api import ExplainContext, Model
from xaibench.seeds import derive_seed

REDUCTIONS = ("sum", "abs_sum", "max_abs")
BASELINES = ("zero", "black")

_BENIGN_WARNINGS = (
    r"(?s).*Setting forward, backward hooks and attributes on non-linear",
    r"(?s).*did not already require gradients",
    r"(?s).*Setting backward hooks on ReLU activations",
)


def forward_batch(size: int) -> int:
    """Images per forward pass for an input side of ``size`` px: about four 224 px images'
    worth of pixels (small batches of large images are faster on CPU), at most 64.
    Speed only: results do not depend on it (up to float rounding)."""
    return max(1, min(64, 4 * 224 * 224 // (size * size)))


@contextmanager
def isolated_grads(module: torch.nn.Module) -> Iterator[None]:
    """Freeze every parameter for the duration (only input gradients are needed) and
    restore each parameter's ``requires_grad`` and ``.grad`` afterwards, even on error."""
    saved = [(p, p.requires_grad, p.grad) for p in module.parameters()]
    try:
        for p, _, _ in saved:
            p.requires_grad_(False)
        with warnings.catch_warnings():
            for pattern in _BENIGN_WARNINGS:
                warnings.filterwarnings("ignore", message=pattern)
            yield
    finally:
        for p, requires_grad, grad in saved:
            p.requires_grad_(requires_grad)
            p.grad = grad


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Seed torch's and numpy's global generators (Captum draws from both) and restore
    their previous states afterwards, so the caller's random streams are untouched."""
    numpy_state = np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        np.random.seed(seed % (2**32))
        try:
            yield
        finally:
            np.random.set_state(numpy_state)


def sample_seeds(seed: int, name: str, batch: int, context: ExplainContext | None) -> list[int]:
    """One seed per image from ``(seed, explainer name, sample id)``: an image's map never
    depends on which other images share its batch. Without a context the index is the id."""
    if context is not None and len(context.samples) == batch:
        ids = [s.id for s in context.samples]
    else:
        ids = [str(i) for i in range(batch)]
    return [derive_seed(seed, name, sample_id) for sample_id in ids]


def as_inputs(inputs: Any) -> torch.Tensor:
    """A detached float32 copy of a ``(B, 3, S, S)`` batch (never the caller's tensor)."""
    x = torch.as_tensor(inputs)
    if x.dim() != 4:
        raise ValueError(f"inputs must be a (B, C, S, S) tensor, got shape {tuple(x.shape)}")
    return x.detach().clone().float()


def as_targets(targets: Any, batch: int) -> torch.Tensor:
    """``(B,)`` class indices as an int64 tensor."""
    t = torch.as_tensor(np.asarray(targets.detach().cpu() if isinstance(targets, torch.Tensor) else targets))
    t = t.reshape(-1).long()
    if int(t.shape[0]) != batch:
        raise ValueError(f"got {int(t.shape[0])} targets for {batch} inputs")
    return t


def baseline(kind: str, x: torch.Tensor, model: Model) -> torch.Tensor:
    """The reference input: ``zero`` is the normalised zero (the dataset mean, also the
    deletion baseline of DESIGN 3); ``black`` is pixel value 0, normalised."""
    if kind == "zero":
        return torch.zeros_like(x)
    if kind == "black":
        mean = torch.tensor(model.mean, dtype=x.dtype).view(1, -1, 1, 1)
        std = torch.tensor(model.std, dtype=x.dtype).view(1, -1, 1, 1)
        return ((0.0 - mean) / std).expand_as(x).clone()
    raise ValueError(f"unknown baseline {kind!r}; known: {', '.join(BASELINES)}")


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
    mean = torch.tensor(model.mean, dtype=x.dtype).view(1, -1, 1, 1)
    std = torch.tensor(model.std, dtype=x.dtype).view(1, -1, 1, 1)
    return (x * std + mean).clamp(0.0, 1.0).permute(0, 2, 3, 1).cpu().numpy()


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
