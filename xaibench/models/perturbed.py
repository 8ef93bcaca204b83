"""``weight-noise``: a built-in model with multiplicative Gaussian noise on its weights.

Meta-evaluation's model perturbation (DESIGN 9; MetaQuantus's model perturbation test): every
parameter ``w`` of the base model becomes ``w * (1 + sigma * e)``, ``e`` standard normal, drawn on
the CPU from ``torch.Generator().manual_seed(draw)`` in the order of ``module.parameters()`` (batch
norm's running statistics are buffers and stay). The base is a built-in model, named by ``base``
with its parameters in ``base_params``; a third-party model runs in a worker of its own and its
weights are out of reach. The identity is the base's with ``+weight-noise(sigma=...,draw=...)``,
so every cache entry and record of a perturbed model is its own.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, ClassVar

from xaibench.api import Model
from xaibench.models.builtin import base_model_class


def add_weight_noise(module: Any, sigma: float, draw: int) -> Any:
    """A copy of ``module`` whose parameters are multiplied by ``1 + sigma * N(0, 1)`` noise drawn
    from a generator seeded with ``draw`` (the same noise on every machine); ``module`` is untouched."""
    import torch

    noisy = copy.deepcopy(module)
    generator = torch.Generator().manual_seed(int(draw))
    with torch.no_grad():
        for p in noisy.parameters():
            noise = torch.randn(p.shape, generator=generator, dtype=torch.float32)
            p.mul_((1.0 + sigma * noise).to(device=p.device, dtype=p.dtype))
    return noisy.eval()


class WeightNoiseModel(Model):
    """A built-in model with multiplicative Gaussian weight noise (meta-evaluation only)."""

    name: ClassVar[str] = "weight-noise"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = (
        "Meta-evaluation: a built-in model (base, base_params) with weights times 1 + sigma * N(0, 1), seeded by draw"
    )
    licence: ClassVar[str] = "Apache-2.0"

    def __init__(self, base: str, sigma: float, draw: int = 0, base_params: Mapping[str, Any] | None = None) -> None:
        if not sigma >= 0:
            raise ValueError(f"weight-noise: sigma must be at least 0, not {sigma!r}")
        inner = base_model_class(base)(**dict(base_params or {}))
        self.base, self.sigma, self.draw = base, float(sigma), int(draw)
        self.module = add_weight_noise(inner.module, self.sigma, self.draw)
        self.input_size, self.mean, self.std = inner.input_size, inner.mean, inner.std
        self.label_names, self.target_layers = inner.label_names, inner.target_layers
        self.synthetic = inner.synthetic  # type: ignore[misc]  # as the base is
        self._identity = f"{inner.identity}+weight-noise(sigma={self.sigma:g},draw={self.draw})"

    @property
    def identity(self) -> str:
        """The base model's identity with ``+weight-noise(sigma=<sigma>,draw=<draw>)``."""
        return self._identity
