"""The graded-oracle ladder's reference maps (DESIGN 9): ground truth mixed with noise.

``ladder`` with parameter ``a`` in [0, 1] returns E_a = (1 - a) G + a U, G the sample's ground truth
(multi-level where present, else the mask; resized to the input as ``oracle`` does) and U uniform
noise in [0, 1] drawn per sample (seeded by the run seed and the sample, the same for every ``a``).
On text (DESIGN 12) G is the ``(1, L)`` ground truth per token (:func:`xaibench.tokens.tokenized`:
each token its word's level, padding 0; already the input's length, so never resized) and U one
value per token, padding included, as ``random`` draws it.
A valid alignment metric scores E_0 best and worsens as ``a`` grows (``xaibench meta``). It is a
reference, not a method: never ranked; samples without ground truth get n/a.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from xaibench.api import Explainer, Model
from xaibench.imaging import resize_bilinear
from xaibench.kit import Param, sample_rngs


class LadderExplainer(Explainer):
    """E_a = (1 - a) G + a U (see the module doc); a reference for meta-evaluation, not a method."""

    name = "ladder"
    modalities = ("image", "text")
    version = "1.0.0"
    description = "Ground truth mixed with uniform noise, (1 - a) G + a U; reference for xaibench meta, not a method."
    licence = "Apache-2.0"
    needs = ("ground_truth",)
    reference_only = True
    default_params: ClassVar[dict[str, Any]] = {"a": 0.0}
    param_specs: ClassVar[dict[str, Param]] = {"a": Param(float, low=0.0, high=1.0)}

    def explain(self, model: Model, inputs: Any, targets: Any, *, seed: int = 0, context=None) -> np.ndarray:
        if context is None:
            raise ValueError("ladder needs the samples' ground truth")
        a = float(self.params["a"])
        size = tuple(inputs.shape[-2:])
        rngs = sample_rngs(seed, self.name, int(inputs.shape[0]), context)  # by sample: the same for every a
        maps = []
        for sample, rng in zip(context.samples, rngs, strict=True):
            truth = sample.ground_truth.multilevel() if sample.ground_truth is not None else None
            if truth is None:
                raise ValueError(f"sample {sample.id!r} has no ground truth")
            noise = rng.random(size, dtype=np.float32)
            maps.append((1.0 - a) * resize_bilinear(truth, size, antialias=False) + a * noise)
        return np.stack(maps).astype(np.float32)
