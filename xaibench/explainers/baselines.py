"""Built-in baseline explainers: ``random``, ``center``, ``sobel`` and ``oracle``.

They need no plugin and bound the leaderboard: ``random`` should rank last,
``oracle`` (the ground truth itself, a reference, not a method) first on alignment.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from xaibench.api import ExplainContext, Explainer, Model
from xaibench.imaging import resize_bilinear
from xaibench.seeds import rng_for


def _sample_ids(inputs: torch.Tensor, context: ExplainContext | None) -> list[str]:
    if context is not None and len(context.samples) == int(inputs.shape[0]):
        return [s.id for s in context.samples]
    return [str(i) for i in range(int(inputs.shape[0]))]


class RandomExplainer(Explainer):
    """Seeded uniform noise: the floor every method should beat."""

    name = "random"
    version = "1.0.0"
    description = "Seeded U(0, 1) noise per pixel; a lower bound, not a method."
    licence = "Apache-2.0"
    needs = ("model_agnostic",)

    def explain(self, model: Model, inputs: Any, targets: Any, *, seed: int = 0, context=None) -> np.ndarray:
        size = inputs.shape[-2:]
        ids = _sample_ids(inputs, context)
        return np.stack([rng_for(seed, "random", i).random(size, dtype=np.float32) for i in ids])


class CenterExplainer(Explainer):
    """A centred isotropic Gaussian prior (photographers centre their subjects)."""

    name = "center"
    version = "1.0.0"
    description = "Centred Gaussian prior, sigma = `sigma` x image side; model-independent."
    licence = "Apache-2.0"
    needs = ("model_agnostic",)
    default_params: ClassVar[dict[str, Any]] = {"sigma": 0.25}

    def validate_params(self, params: dict[str, Any]) -> dict[str, Any]:
        params = super().validate_params(params)
        if not 0 < float(params["sigma"]) <= 10:
            raise ValueError(f"sigma must be in (0, 10], got {params['sigma']!r}")
        return params

    def explain(self, model: Model, inputs: Any, targets: Any, *, seed: int = 0, context=None) -> np.ndarray:
        h, w = inputs.shape[-2:]
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
        sy, sx = self.params["sigma"] * h, self.params["sigma"] * w
        prior = np.exp(-(((yy - (h - 1) / 2) / sy) ** 2 + ((xx - (w - 1) / 2) / sx) ** 2) / 2)
        return np.repeat(prior[None], inputs.shape[0], axis=0)


class SobelExplainer(Explainer):
    """Edge magnitude of the grey image: a model-independent 'looks plausible' baseline."""

    name = "sobel"
    version = "1.0.0"
    description = "Sobel gradient magnitude of the channel-mean image; model-independent."
    licence = "Apache-2.0"
    needs = ("model_agnostic",)

    def explain(self, model: Model, inputs: Any, targets: Any, *, seed: int = 0, context=None) -> np.ndarray:
        grey = inputs.float().mean(dim=1, keepdim=True)
        kx = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]]).view(1, 1, 3, 3)
        padded = F.pad(grey, (1, 1, 1, 1), mode="replicate")
        gx = F.conv2d(padded, kx)
        gy = F.conv2d(padded, kx.transpose(2, 3))
        return torch.sqrt(gx**2 + gy**2)[:, 0].numpy()


class OracleExplainer(Explainer):
    """Returns the track's ground truth (multi-level map, else mask): an upper bound.

    Flagged "reference, not a method"; samples without ground truth raise and get n/a.
    """

    name = "oracle"
    version = "1.0.0"
    description = "The ground truth itself, resized to the input; reference, not a method."
    licence = "Apache-2.0"
    needs = ("ground_truth",)
    reference_only = True

    def explain(self, model: Model, inputs: Any, targets: Any, *, seed: int = 0, context=None) -> np.ndarray:
        if context is None:
            raise ValueError("oracle needs the samples' ground truth")
        size = tuple(inputs.shape[-2:])
        maps = []
        for sample in context.samples:
            truth = sample.ground_truth.multilevel() if sample.ground_truth is not None else None
            if truth is None:
                raise ValueError(f"sample {sample.id!r} has no ground truth")
            # Plain bilinear (no antialiasing), as recorded in the golden values; see docs/metrics.md.
            maps.append(resize_bilinear(truth, size, antialias=False))
        return np.stack(maps)
