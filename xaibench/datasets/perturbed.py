"""``input-noise``: a built-in dataset with additive Gaussian noise on its images.

Meta-evaluation's input perturbation (DESIGN 9; MetaQuantus's input perturbation test): each
image ``x`` (``H x W x 3`` in [0, 1]) becomes ``clip(x + sigma * e, 0, 1)``, ``e`` standard normal
drawn from ``derive_seed(draw, sample id)``, so a sample's noise does not depend on the others.
Ground truth, labels and metadata are the base sample's. ``targets`` (sample id -> model class)
fixes the class each sample is explained for (``Sample.target``; run the track with ``target =
"label"``): the perturbed runs explain the classes the unperturbed run explained. The base is a
built-in dataset, named by ``base`` with its parameters in ``base_params``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np

from xaibench.api import Dataset, Sample
from xaibench.datasets.builtin import base_dataset_class
from xaibench.seeds import derive_seed


def add_input_noise(image: np.ndarray, sigma: float, seed: int) -> np.ndarray:
    """``clip(image + sigma * N(0, 1), 0, 1)`` in float32, the noise from ``numpy.random.default_rng(seed)``."""
    x = np.asarray(image, dtype=np.float32)
    if sigma == 0:
        return x
    noise = np.random.default_rng(seed).standard_normal(x.shape, dtype=np.float32)
    return np.clip(x + np.float32(sigma) * noise, 0.0, 1.0)


class InputNoiseDataset(Dataset):
    """A built-in dataset with additive Gaussian input noise (meta-evaluation only)."""

    name: ClassVar[str] = "input-noise"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = (
        "Meta-evaluation: a built-in dataset (base, base_params) with images plus sigma * N(0, 1), seeded by draw"
    )
    licence: ClassVar[str] = "Apache-2.0"

    def __init__(
        self,
        base: str,
        sigma: float = 0.0,
        draw: int = 0,
        base_params: Mapping[str, Any] | None = None,
        targets: Mapping[str, int] | None = None,
    ) -> None:
        if not sigma >= 0:
            raise ValueError(f"input-noise: sigma must be at least 0, not {sigma!r}")
        self.inner = base_dataset_class(base)(**dict(base_params or {}))
        self.sigma, self.draw = float(sigma), int(draw)
        self.targets = {str(k): int(v) for k, v in (targets or {}).items()}
        self.label_names = self.inner.label_names
        self.synthetic = self.inner.synthetic  # type: ignore[misc]  # as the base is

    @property
    def revision(self) -> str:
        """The base's revision with the noise and the fixed targets."""
        fixed = hashlib.sha256(json.dumps(self.targets, sort_keys=True).encode()).hexdigest()[:12]
        return f"{self.inner.revision}+input-noise(sigma={self.sigma:g},draw={self.draw},targets={fixed})"

    def __len__(self) -> int:
        return len(self.inner)

    def samples(self, limit: int | None = None) -> Iterator[Sample]:
        for s in self.inner.samples(limit):
            image = add_input_noise(s.image, self.sigma, derive_seed(self.draw, s.id))
            yield replace(s, image=image, target=self.targets.get(s.id, s.target))
