"""RISE: Randomized Input Sampling for Explanation (Petsiuk et al. 2018).

``n_masks`` random masks are drawn once per (seed, input size): a ``grid x grid`` binary
grid, each cell kept with probability ``p``, bilinearly upsampled to
``(grid + 1) x cell`` pixels (``cell = ceil(S / grid)``) and cropped at a random offset
in ``[0, cell)`` (smooth masks whose cell edges fall anywhere). The saliency of pixel u is

    S(u) = sum_i p_target(x * M_i + b * (1 - M_i)) * M_i(u) / (n_masks * p)

with ``p_target`` the softmax probability of the target class (in float64, as is the sum: a
confident model's 1 - e with e ~ 1e-6 is a few ulps in float32) and ``b`` the baseline
(``zero``: the normalised zero, i.e. the dataset mean, as in the reference code which
masks the normalised tensor; ``black``: pixel value 0). Higher = more relevant.
Every image uses the same masks, so a map never depends on the rest of its batch; the
masks are a pure function of ``(seed, S, n_masks, grid, p)``. Cost: ``n_masks`` forward
passes per image, batched.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from xaibench.kit import (
    BASELINES,
    AttributionExplainer,
    ExplainBatch,
    Explainer,
    Model,
    Param,
    baseline_input,
    chunks,
    derive_seed,
    forward_batch,
)


def rise_masks(n_masks: int, size: int, grid: int, p: float, seed: int) -> torch.Tensor:
    """``(n_masks, size, size)`` float32 masks in [0, 1] (see the module docstring)."""
    rng = np.random.default_rng(derive_seed(seed, "rise-masks", size, n_masks, grid, p))
    cells = (rng.random((n_masks, grid, grid)) < p).astype(np.float32)
    cell = math.ceil(size / grid)
    up_size = (grid + 1) * cell
    up = F.interpolate(torch.from_numpy(cells)[:, None], size=(up_size, up_size), mode="bilinear", align_corners=False)
    up = up[:, 0].numpy()
    dy, dx = rng.integers(0, cell, size=(2, n_masks))
    rows = dy[:, None] + np.arange(size)[None, :]
    cols = dx[:, None] + np.arange(size)[None, :]
    crops = up[np.arange(n_masks)[:, None, None], rows[:, :, None], cols[:, None, :]]
    return torch.from_numpy(np.ascontiguousarray(crops, dtype=np.float32))


class Rise(AttributionExplainer):
    """RISE (Petsiuk et al. 2018): probability-weighted sum of random smooth masks."""

    name = "rise"
    version = "1.1.0"  # 1.1: probabilities and the weighted sum in float64
    description = "RISE (Petsiuk et al. 2018): seeded random masks, probability-weighted."
    licence = "Apache-2.0"
    needs: ClassVar[tuple[str, ...]] = ("model_agnostic",)
    default_params: ClassVar[dict[str, Any]] = {"n_masks": 256, "grid": 7, "p": 0.5, "baseline": "zero"}
    param_specs: ClassVar[dict[str, Param]] = {
        "n_masks": Param(int, low=1, high=100_000),
        "grid": Param(int, low=2, high=64),
        "p": Param(float, low=0.01, high=0.99),
        "baseline": Param(str, choices=BASELINES),
    }

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._masks: dict[tuple[int, int], torch.Tensor] = {}

    def masks(self, size: int, seed: int) -> torch.Tensor:
        """The mask set for an input size and seed (cached on the instance)."""
        key = (size, seed)
        if key not in self._masks:
            self._masks.clear()
            self._masks[key] = rise_masks(self.params["n_masks"], size, self.params["grid"], self.params["p"], seed)
        return self._masks[key]

    def attribute(self, model: Model, batch: ExplainBatch) -> np.ndarray:
        x = batch.x
        size = int(x.shape[-1])
        # the run's seed: every image gets the same masks (made on the CPU, used on the inputs' device)
        masks = self.masks(size, batch.seed).to(x.device)
        flat = masks.reshape(masks.shape[0], -1).double()  # once: every image's weighted sum is float64
        base = baseline_input(self.params["baseline"], x[:1], model)
        # on the device until the last image: one copy to the host for the batch, not one per image
        maps = torch.zeros((x.shape[0], size, size), dtype=torch.float64, device=x.device)
        with torch.no_grad():
            for b, target in enumerate(batch.targets.tolist()):
                scores = []
                for part in chunks(masks.shape[0], forward_batch(size)):
                    logits = model.module(base + (x[b : b + 1] - base) * masks[part, None])
                    probs = torch.softmax(logits.double(), dim=1)
                    scores.append(probs[:, target])
                weights = torch.cat(scores)
                sal = (weights @ flat) / (masks.shape[0] * self.params["p"])
                maps[b] = sal.reshape(size, size)
        return maps.float().cpu().numpy()


EXPLAINERS: tuple[type[Explainer], ...] = (Rise,)
