"""Vanilla gradient (Simonyan et al. 2014) on torch autograd."""

from __future__ import annotations

from typing import Any

import numpy as np

from xaibench.api import Explainer, Model
from xaibench.kit import input_gradients


class GradientExplainer(Explainer):
    """|d logit_target / d x|, max over colour channels (Simonyan et al. 2014)."""

    name = "gradient"
    version = "1.0.0"
    description = "Vanilla gradient magnitude of the target logit, max over channels."
    licence = "Apache-2.0"
    needs = ("gradients",)
    modalities = ("image", "text")  # on text: the largest gradient magnitude over a token's channels

    def explain(self, model: Model, inputs: Any, targets: Any, *, seed: int = 0, context=None) -> np.ndarray:
        return input_gradients(model, inputs, targets).abs().amax(dim=1).cpu().numpy()
