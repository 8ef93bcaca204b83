"""Built-in baseline explainers: ``random``, ``center``, ``sobel`` and ``oracle``.

They need no plugin and bound the leaderboard: ``random`` should rank last,
``oracle`` (the ground truth itself, a reference, not a method) first on alignment.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from xaibench.api import Explainer, GroundTruth, Model
from xaibench.imaging import resize_bilinear
from xaibench.kit import Param, sample_rngs


class RandomExplainer(Explainer):
    """Seeded uniform noise: the floor every method should beat."""

    name = "random"
    modalities = ("image", "text")
    version = "1.0.0"
    description = "Seeded U(0, 1) noise per pixel; a lower bound, not a method."
    licence = "Apache-2.0"
    needs = ("model_agnostic",)

    def explain(self, model: Model, inputs: Any, targets: Any, *, seed: int = 0, context=None) -> np.ndarray:
        size = inputs.shape[-2:]
        rngs = sample_rngs(seed, self.name, int(inputs.shape[0]), context)
        return np.stack([rng.random(size, dtype=np.float32) for rng in rngs])


class CenterExplainer(Explainer):
    """A centred isotropic Gaussian prior (photographers centre their subjects)."""

    name = "center"
    version = "1.0.0"
    description = "Centred Gaussian prior, sigma = `sigma` x image side; model-independent."
    licence = "Apache-2.0"
    needs = ("model_agnostic",)
    default_params: ClassVar[dict[str, Any]] = {"sigma": 0.25}
    param_specs: ClassVar[dict[str, Param]] = {"sigma": Param(float, low=0.0, high=10.0)}

    def validate_params(self, params: dict[str, Any]) -> dict[str, Any]:
        if params["sigma"] == 0.0:  # the spec's bounds are inclusive; a zero-width Gaussian is no map
            raise ValueError(f"explainer {self.name!r}: parameter 'sigma' must be a number in (0, 10], got 0.0")
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
        kx = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]], device=grey.device).view(1, 1, 3, 3)
        padded = F.pad(grey, (1, 1, 1, 1), mode="replicate")
        gx = F.conv2d(padded, kx)
        gy = F.conv2d(padded, kx.transpose(2, 3))
        return torch.sqrt(gx**2 + gy**2)[:, 0].cpu().numpy()


class OracleExplainer(Explainer):
    """Returns the track's ground truth (multi-level map, else mask): an upper bound.

    Where the ground truth is a known answer with exact per-region contributions (a mechanism
    track, DESIGN 11), the map is the exact attribution instead (:func:`exact_attribution`): the
    reference that scores at the optimum of every ``ground_truth`` metric.
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
            gt = sample.ground_truth
            truth = None if gt is None else (exact_attribution(gt) if gt.contributions is not None else gt.multilevel())
            if truth is None:
                raise ValueError(f"sample {sample.id!r} has no ground truth")
            # Plain bilinear (no antialiasing), as recorded in the golden values; see docs/metrics.md.
            maps.append(resize_bilinear(truth, size, antialias=False))
        return np.stack(maps)


def exact_attribution(truth: GroundTruth) -> np.ndarray:
    """The exact, signed attribution map of a known answer (DESIGN 11), at the ground truth's size:
    region ``k``'s contribution (logit units) spread evenly over its pixels inside A* (the mask),
    or over the whole region where it has none there; 0 outside every region. Summed per region it
    gives the contributions back, and nothing lies outside A* but zero-contribution regions."""
    if truth.regions is None or truth.contributions is None:
        raise ValueError("an exact attribution needs the ground truth's regions and contributions")
    regions = np.asarray(truth.regions, dtype=np.int64)
    contributions = np.asarray(truth.contributions, dtype=np.float64)
    inside = np.ones(regions.shape, dtype=bool) if truth.mask is None else np.asarray(truth.mask, dtype=bool)
    k = len(contributions)
    labelled = (regions >= 1) & (regions <= k)
    in_mask = np.bincount(regions[labelled & inside], minlength=k + 1)[1:]
    spread = labelled & np.where(in_mask[np.clip(regions, 1, k) - 1] > 0, inside, True)
    counts = np.bincount(regions[spread], minlength=k + 1)[1:]
    per_pixel = np.divide(contributions, counts, out=np.zeros(k), where=counts > 0)
    out = np.zeros(regions.shape, dtype=np.float32)
    out[spread] = per_pixel[regions[spread] - 1]
    return out
