"""Pixel orders, removal masks and perturbed images for the faithfulness metrics.

Conventions (DESIGN 3; documented in ``docs/metrics.md``):

- **Orders.** Pixels are ordered by the signed saliency value (a negative value
  is less salient than zero), ties broken by raster pixel index (lower index
  first) in both directions: ``descending`` = most salient first,
  ``ascending`` = least salient first.
- **Counts.** "The first f of the pixels" is ``floor(f * n)`` pixels, computed
  in exact integer arithmetic (Quantus' convention).
- **Spaces.** Images are ``(C, H, W)`` tensors in the model's normalised input
  space. ``zeros``: 0 in normalised space (the dataset mean; the deletion
  baseline). ``black``: pixel value 0, i.e. ``-mean / std`` per channel.
  ``uniform``: U(0, 1) in pixel space, then normalised. ``gaussian``: N(0, 1)
  in normalised space. ``road``: noisy linear imputation in normalised space.
- **Noise.** Every random field is drawn from a generator seeded by
  ``(seed, sample id, purpose)`` (:func:`xaibench.seeds.sample_rng`), so a sample's result does
  not depend on the batch it is in. One field per (sample, perturbation) serves
  every step and both orders: the replacement value of a pixel does not change
  from one step to the next.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch
from scipy.ndimage import gaussian_filter

from xaibench.metrics.faithfulness.imputation import noisy_linear_imputation
from xaibench.metrics.faithfulness.imputation_torch import noisy_linear_imputation_torch

Order = Literal["descending", "ascending"]
Perturbation = Literal["road", "black", "uniform", "gaussian"]
PERTURBATIONS: tuple[Perturbation, ...] = ("road", "black", "uniform", "gaussian")
Imputation = Literal["auto", "exact", "torch"]

CPU_IMPUTATION_THREADS = 2
"""Worker threads that impute ahead of the forward passes on the CPU (both exact solvers release the
GIL: SuperLU, and the banded Cholesky called through ctypes)."""


# ----------------------------------------------------------------------------- orders and counts


def saliency_order(saliency: np.ndarray, order: Order) -> np.ndarray:
    """Raster pixel indices of each ``(B, H, W)`` map in ``order`` (``(B, H*W)`` int64).

    Ties are broken by pixel index (lower first) in both orders. Raises
    ``ValueError`` on NaN or infinite values.
    """
    flat = np.asarray(saliency, dtype=np.float64).reshape(saliency.shape[0], -1)
    if not np.isfinite(flat).all():
        raise ValueError("saliency map contains NaN or infinite values")
    key = -flat if order == "descending" else flat
    return np.argsort(key, axis=1, kind="stable")


def float64_device(device: torch.device | str) -> torch.device:
    """Where float64 work on the maps runs: ``device`` when it has float64 (CPU, CUDA), else the CPU."""
    device = torch.device(device)
    return device if device.type in ("cpu", "cuda") else torch.device("cpu")


def device_ranks(saliency: np.ndarray, order: Order, device: torch.device | str) -> torch.Tensor:
    """``(B, H*W)`` int64 on ``device``: the position of every pixel of each ``(B, H, W)`` map in
    :func:`saliency_order`'s order (ties by pixel index), from one stable float64 sort of all the
    maps on the device (the same positions on every device; the map must be finite)."""
    n = int(np.prod(saliency.shape[1:]))
    flat = torch.from_numpy(np.ascontiguousarray(saliency, dtype=np.float64).reshape(saliency.shape[0], n))
    where = float64_device(device)
    flat = flat.to(where)
    orders = torch.sort(-flat if order == "descending" else flat, dim=1, stable=True).indices
    ranks = torch.empty_like(orders)
    ranks.scatter_(1, orders, torch.arange(n, device=where).expand_as(orders))
    return ranks.to(device)


def pixel_count(numerator: int | np.ndarray, denominator: int, n: int) -> np.ndarray:
    """``floor(numerator / denominator * n)`` in exact integer arithmetic (int64).

    The floor is Quantus' convention (``int(n * p / 100)``); with it our ROAD
    curves equal Quantus' at any image size, not only when 100 divides n.
    """
    num = np.asarray(numerator, dtype=np.int64)
    return (num * n) // denominator


def imputation_backend(device: torch.device | str, choice: Imputation = "auto") -> Literal["exact", "torch"]:
    """The solver of the ``road`` imputation for images on ``device``.

    ``auto``: the exact direct solve of :func:`~xaibench.metrics.faithfulness.imputation.linear_imputation`
    on the CPU (banded Cholesky for images up to 192 px a side, SuperLU above) and the batched
    multigrid-preconditioned conjugate gradients of
    :mod:`~xaibench.metrics.faithfulness.imputation_torch` on any other device, where the images
    already are. Chosen by measurement (``bench/bench_imputation.py``): on the 2-core CPU, SuperLU
    took 69 ms per 224 px system and the torch solver 88 ms at its best; all agree to 1e-5.
    """
    if choice not in ("auto", "exact", "torch"):
        raise ValueError(f"unknown imputation solver {choice!r}; known: auto, exact, torch")
    if choice != "auto":
        return choice
    return "exact" if torch.device(device).type == "cpu" else "torch"


# ----------------------------------------------------------------------------- fills


def channel_constant(value_pixel: float, mean: Sequence[float], std: Sequence[float]) -> torch.Tensor:
    """``(C, 1, 1)`` normalised value of a constant pixel-space value."""
    m = torch.tensor(mean, dtype=torch.float32).view(-1, 1, 1)
    s = torch.tensor(std, dtype=torch.float32).view(-1, 1, 1)
    return (value_pixel - m) / s


def noise_field(
    perturbation: Perturbation,
    shape: tuple[int, int, int],
    rng: np.random.Generator,
    mean: Sequence[float],
    std: Sequence[float],
) -> torch.Tensor | None:
    """The random field a perturbation needs, ``(C, H, W)`` float32, or None.

    ``uniform``: U(0, 1) pixel values already normalised; ``gaussian``: N(0, 1)
    values (normalised space); ``road``: standard-normal noise, scaled by the
    imputation's sigma later; ``black``: None.
    """
    if perturbation == "black":
        return None
    if perturbation == "uniform":
        pixels = torch.from_numpy(rng.random(shape, dtype=np.float32))
        m = torch.tensor(mean, dtype=torch.float32).view(-1, 1, 1)
        s = torch.tensor(std, dtype=torch.float32).view(-1, 1, 1)
        return (pixels - m) / s
    if perturbation in ("gaussian", "road"):
        return torch.from_numpy(rng.standard_normal(shape, dtype=np.float32))
    raise ValueError(f"unknown perturbation {perturbation!r}; known: {', '.join(PERTURBATIONS)}")


def masks_on(masks: np.ndarray | torch.Tensor, device: torch.device) -> torch.Tensor:
    """``(K, H, W)`` bool masks, from the host or any device, as a tensor on ``device``."""
    if isinstance(masks, torch.Tensor):
        return masks.to(device)
    return torch.from_numpy(np.ascontiguousarray(masks)).to(device, non_blocking=True)


def replace(image: torch.Tensor, masks: np.ndarray | torch.Tensor, fill: torch.Tensor) -> torch.Tensor:
    """``(K, C, H, W)``: ``image`` with the pixels of each ``(K, H, W)`` mask (host or device) taken
    from ``fill``."""
    m = masks_on(masks, image.device)[:, None]
    return torch.where(m, fill.to(image.device, image.dtype).expand_as(image)[None], image[None])


def perturb(
    image: torch.Tensor,
    masks: np.ndarray | torch.Tensor,
    perturbation: Perturbation,
    field: torch.Tensor | None,
    *,
    mean: Sequence[float],
    std: Sequence[float],
    road_noise: float = 0.01,
    imputation: Imputation = "auto",
) -> torch.Tensor:
    """Perturb the masked pixels of one normalised ``(C, H, W)`` image for every mask.

    ``masks``: ``(K, H, W)`` bool, on the host or on any device. ``field`` comes from
    :func:`noise_field` (ignored for ``black``). Returns
    ``(K, C, H, W)`` float32 on the image's device. ``imputation`` picks the solver of
    ``road`` (:func:`imputation_backend`).
    """
    if perturbation == "black":
        return replace(image, masks, channel_constant(0.0, mean, std))
    if field is None:
        raise ValueError(f"perturbation {perturbation!r} needs a noise field")
    if perturbation in ("uniform", "gaussian"):
        return replace(image, masks, field)
    if perturbation == "road":
        if imputation_backend(image.device, imputation) == "torch":
            removed = masks_on(masks, image.device)
            return noisy_linear_imputation_torch(image, removed, field[None], noise_std=road_noise)
        host = masks.cpu().numpy() if isinstance(masks, torch.Tensor) else masks
        out = noisy_linear_imputation(
            image.detach().cpu().numpy(), host, field.detach().cpu().numpy()[None], noise_std=road_noise
        )
        return torch.from_numpy(out).to(image.device)
    raise ValueError(f"unknown perturbation {perturbation!r}; known: {', '.join(PERTURBATIONS)}")


def blurred(image: torch.Tensor, sigma: float) -> torch.Tensor:
    """Gaussian blur of a ``(C, H, W)`` image over H and W (sigma in pixels, scipy
    ``gaussian_filter`` with mode ``reflect`` and truncation at 4 sigma)."""
    arr = image.detach().cpu().numpy().astype(np.float64)
    out = gaussian_filter(arr, sigma=(0.0, float(sigma), float(sigma)), mode="reflect", truncate=4.0)
    return torch.from_numpy(out.astype(np.float32))
