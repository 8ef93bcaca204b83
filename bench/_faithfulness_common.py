"""Shared set-up of the faithfulness benchmarks: EfficientNet-Lite0 on the 8 real photos.

Saliency maps are input gradients (|d p / d x| summed over channels: fine-grained
and noisy) or, with ``smooth=True``, the same blurred with a Gaussian of sigma 8 px
(CAM-like blobs). Targets are the model's predictions (DESIGN 1).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from scipy.ndimage import gaussian_filter

from xaibench.api import ForwardCounter, MetricInput, Model


def load_model() -> Model:
    from xaibench.models.efficientnet_lite import EfficientNetLite0

    return EfficientNetLite0()


def load_track(n_images: int = 8, smooth: bool = False) -> tuple[Model, Any, np.ndarray, np.ndarray, list]:
    """(model, inputs (B, 3, 224, 224), targets (B,), saliency (B, 224, 224), samples)."""
    from xaibench.datasets.photos import PhotosDataset

    model = load_model()
    samples = list(PhotosDataset().samples(limit=n_images))
    if not samples:
        raise SystemExit("no photos found (xaibench.datasets.photos ships them from installed packages)")
    inputs = model.preprocess([s.image for s in samples])
    x = inputs.clone().requires_grad_(True)
    logits = model.module(x)
    targets = logits.argmax(dim=1)
    torch.softmax(logits, dim=1).gather(1, targets[:, None]).sum().backward()
    saliency = x.grad.abs().sum(dim=1).numpy().astype(np.float64)
    if smooth:
        saliency = np.stack([gaussian_filter(m, 8.0) for m in saliency])
    return model, inputs.detach(), targets.numpy(), saliency, samples


def make_batch(
    model: Model,
    inputs: Any,
    targets: np.ndarray,
    saliency: np.ndarray,
    samples: list,
    batch_size: int,
    device: str = "cpu",
):
    """A fresh MetricInput (nothing memoised); ``inputs`` and the model should already be on ``device``."""
    return MetricInput(
        saliency=saliency,
        concepts=None,
        samples=samples,
        targets=targets,
        inputs=inputs,
        model=model,
        forward=ForwardCounter(model.module, batch_size=batch_size, device=device),
        seed=0,
    )


def sync(device: str) -> None:
    """Wait for the device's queued work (a CUDA timing without it measures the launches only)."""
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def timed(fn: Callable[[], Any], device: str = "cpu") -> tuple[float, Any]:
    """Wall seconds of one call of ``fn`` (the device synchronised before and after), and its result."""
    sync(device)
    start = time.perf_counter()
    result = fn()
    sync(device)
    return time.perf_counter() - start, result


def forward_only_time(model: Model, inputs: Any, count: int, batch_size: int, device: str = "cpu") -> float:
    """Wall time of ``count`` images forwarded by a ForwardCounter (content does not matter)."""
    if count == 0:
        return 0.0
    reps = -(-count // inputs.shape[0])
    images = inputs.repeat(reps, 1, 1, 1)[:count].contiguous()
    counter = ForwardCounter(model.module, batch_size=batch_size, device=device)
    seconds, _ = timed(lambda: counter(images), device)
    return seconds


def quantus_seconds(
    metric: Any,
    model: Model,
    inputs: Any,
    targets: np.ndarray,
    saliency: np.ndarray,
    device: str = "cpu",
    **kwargs: Any,
) -> float:
    """Wall seconds of one call of a Quantus metric on the bench's inputs and maps (``kwargs``: the
    rest of its call, e.g. ``softmax``, ``batch_size``, ``explain_func``), the device synchronised."""
    seconds, _ = timed(
        lambda: metric(
            model=model.module,
            x_batch=inputs.cpu().numpy(),
            y_batch=np.asarray(targets),
            a_batch=saliency[:, None].astype(np.float32),
            device=device,
            channel_first=True,
            **kwargs,
        ),
        device,
    )
    return seconds
