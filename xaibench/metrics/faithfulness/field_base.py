"""What the field's faithfulness metrics (DESIGN 3b) share: the unranked base class, the fills
and the step masks, built on the model's device.

A "step" is ``features_in_step`` pixels of a saliency order (all colour channels of a pixel
together: Quantus issue 75 perturbs one channel value at a time); masks are made on the device
from one ``(H*W,)`` rank tensor per sample, itself sorted there (:func:`pixel_ranks`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from xaibench.api import MetricOutput
from xaibench.metrics.faithfulness.base import FaithfulnessMetric
from xaibench.metrics.faithfulness.context import BatchedScorer, FaithfulnessBatch
from xaibench.metrics.faithfulness.perturbation import Order, channel_constant, device_ranks

BASELINES: tuple[str, ...] = ("zeros", "black")
"""Deletion fills: ``zeros`` = 0 in normalised space (the dataset mean, DESIGN 3's deletion
baseline), ``black`` = pixel value 0."""


class FieldFaithfulnessMetric(FaithfulnessMetric):
    """Base of DESIGN 3b's faithfulness metrics: reported, never ranked, run only when named
    (``default = False``; the ``full`` suite names them)."""

    ranking = False
    default = False

    def score_batch(self, ctx: FaithfulnessBatch) -> MetricOutput:
        raise NotImplementedError


def fill_value(ctx: FaithfulnessBatch, baseline: str) -> torch.Tensor:
    """``(C, 1, 1)`` fill on the model's device for a deletion ``baseline`` (see :data:`BASELINES`)."""
    if baseline == "zeros":
        return torch.zeros(ctx.inputs.shape[1], 1, 1, device=ctx.device)
    if baseline == "black":
        return channel_constant(0.0, ctx.mean, ctx.std).to(ctx.device)
    raise ValueError(f"unknown baseline {baseline!r}; known: {', '.join(BASELINES)}")


def attribution(ctx: FaithfulnessBatch, b: int, absolute: bool) -> np.ndarray:
    """Sample ``b``'s map at input size, flattened (``(H*W,)`` float64), its absolute value when asked."""
    flat = ctx.saliency[b].reshape(-1)
    return np.abs(flat) if absolute else flat


def step_masks(rank: torch.Tensor, fis: int, steps: torch.Tensor, *, cumulative: bool) -> torch.Tensor:
    """``(K, H*W)`` bool masks for the step indices ``steps`` (``(K,)``): the pixels of step k alone,
    or (``cumulative``) of steps 0..k."""
    if cumulative:
        return rank[None, :] < (steps[:, None] + 1) * fis
    return (rank[None, :] // fis) == steps[:, None]


def compose(image: torch.Tensor, masks: torch.Tensor, fill: torch.Tensor) -> torch.Tensor:
    """``(K, C, H, W)``: ``image`` (``(C, H, W)``) with the masked pixels (``(K, H*W)``) taken from
    ``fill`` (broadcastable to ``(K, C, H, W)``), every channel of a pixel together."""
    m = masks.view(masks.shape[0], 1, *image.shape[1:])
    return torch.where(m, fill, image[None])


def pixel_ranks(ctx: FaithfulnessBatch, samples: list[int], absolute: bool, order: Order) -> torch.Tensor:
    """``(len(samples), H*W)`` int64 on the model's device: the position of every pixel of each
    sample's map (absolute value when asked) in ``order`` (``descending`` or ``ascending``), ties
    by pixel index: :func:`~xaibench.metrics.faithfulness.perturbation.device_ranks`, one sort on
    the device for all samples."""
    if not samples:
        return torch.zeros(0, ctx.pixels, dtype=torch.int64, device=ctx.device)
    maps = ctx.saliency[samples]
    return device_ranks(np.abs(maps) if absolute else maps, order, ctx.device)


def orders_from_ranks(ranks: torch.Tensor) -> np.ndarray:
    """``(V, H*W)`` pixel indices in order, on the host, from :func:`pixel_ranks`'s positions."""
    ranks = ranks.cpu()
    orders = torch.empty_like(ranks)
    orders.scatter_(1, ranks, torch.arange(ranks.shape[1]).expand_as(ranks))
    return orders.numpy()


def score_steps(
    ctx: FaithfulnessBatch,
    counts: dict[int, int],
    build: Callable[[int, int, int], torch.Tensor],
) -> dict[int, np.ndarray]:
    """Forward ``counts[b]`` images per sample ``b`` in full batches across samples;
    ``build(b, start, stop)`` makes images ``start..stop-1`` of sample ``b`` on the device.
    Returns ``{b: (counts[b],) target probabilities}``."""
    scorer = BatchedScorer(ctx)
    for b, count in counts.items():
        scorer.add_lazy(b, count, lambda start, stop, b=b: build(b, start, stop), int(ctx.targets[b]))
    return scorer.finish()
