"""Concept explainers for concept-bottleneck models (``kind = "concept"``).

Each returns, per image, a ``{concept: weight}`` dict over the model's ``concept_names``: how much
each concept supports the explained class (higher = more support; any real scale). They need a
model exposing ``concept_names``, ``concept_probs(inputs)`` and ``class_logits(concepts)``, such
as ``shapes-cbm``; on another model they raise a clear error (the runner records n/a).

"Removing" a concept sets its probability to ``baseline`` (default 0: the concept is absent).
The explained quantity ``f`` is the softmax probability of the target class computed by the
model's head from the (perturbed) concept probabilities, except for ``concept-linear``, which
reads the target logit.

- ``concept-linear``: contribution of each concept to the target logit, ``W[target, c] x p_c``.
- ``concept-lime``: LIME (Ribeiro et al. 2016) over concepts: ``n_samples`` seeded random
  on/off masks, exponential kernel on the cosine distance to the unperturbed mask
  (``kernel_width``), weighted ridge regression; the weights are its coefficients.
- ``concept-shap``: exact Shapley values of ``f`` over all ``2^K`` concept coalitions (K <= 20).
- ``concept-rise``: RISE (Petsiuk et al. 2018) over concepts: ``n_masks`` seeded masks keeping each
  concept with probability ``p``; weight ``= E[f(m) m_c] / p``.
"""

from __future__ import annotations

from math import factorial
from typing import Any, ClassVar

import numpy as np
import torch

from xaibench.api import ExplainContext, Explainer, Model
from xaibench.kit import Param, as_targets, sample_rngs

__all__ = ["CONCEPT_EXPLAINERS", "ConceptLIME", "ConceptLinear", "ConceptRISE", "ConceptSHAP"]


def _check_model(model: Model, name: str) -> tuple[str, ...]:
    names = getattr(model, "concept_names", None)
    if not names or not hasattr(model, "concept_probs") or not hasattr(model, "class_logits"):
        raise ValueError(
            f"{name}: model {getattr(model, 'name', type(model).__name__)!r} is not a concept-bottleneck model "
            "(needs concept_names, concept_probs and class_logits; try model shapes-cbm)"
        )
    return tuple(str(n) for n in names)


def _target_prob(model: Any, concepts: torch.Tensor, target: int) -> np.ndarray:
    """Softmax probability of ``target`` for concept vectors ``(M, K)``; returns ``(M,)`` float64,
    computed in float64 from the head's logits: a confident head's 1 - e with e ~ 1e-6 is a few
    float32 ulps, so in float32 the differences between coalitions, the weights, were rounding."""
    module = getattr(model, "module", None)
    device = next(module.parameters()).device if isinstance(module, torch.nn.Module) else concepts.device
    logits = model.class_logits(concepts.float().to(device))
    return torch.softmax(logits.double(), dim=-1)[..., int(target)].cpu().numpy()


class _ConceptExplainer(Explainer):
    kind: ClassVar[str] = "concept"  # type: ignore[assignment]
    licence: ClassVar[str] = "Apache-2.0"
    needs: ClassVar[tuple[str, ...]] = ("concept_model",)

    def explain(
        self, model: Model, inputs: Any, targets: Any, *, seed: int = 0, context: ExplainContext | None = None
    ) -> list[dict[str, float]]:
        names = _check_model(model, self.name)
        probs = model.concept_probs(inputs).double().cpu()  # type: ignore[attr-defined]
        classes = as_targets(targets, int(probs.shape[0])).tolist()
        rngs = sample_rngs(seed, self.name, len(classes), context)
        out = []
        for p, t, rng in zip(probs, classes, rngs, strict=True):
            weights = self._weights(model, p, t, rng)
            out.append({n: float(w) for n, w in zip(names, weights, strict=True)})
        return out

    def _weights(self, model: Any, p: torch.Tensor, target: int, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def _perturbed(self, p: torch.Tensor, masks: np.ndarray) -> torch.Tensor:
        m = torch.from_numpy(masks.astype(np.float64))
        return m * p[None] + (1.0 - m) * float(self.params.get("baseline", 0.0))


class ConceptLinear(_ConceptExplainer):
    """Linear contributions to the target logit: ``W[target, c] x p_c``."""

    name: ClassVar[str] = "concept-linear"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = "Concept contributions to the target logit of a CBM's linear head (W x p)."

    def _weights(self, model: Any, p: torch.Tensor, target: int, rng: np.random.Generator) -> np.ndarray:
        head = model.module.head
        w = head.weight.detach().double().cpu()[target]
        return (w * p).numpy()


class ConceptLIME(_ConceptExplainer):
    """LIME over concepts: weighted ridge regression of the target probability on concept on/off masks."""

    name: ClassVar[str] = "concept-lime"
    version: ClassVar[str] = "1.1.0"  # 1.1: the target probability in float64 (_target_prob)
    description: ClassVar[str] = "LIME over a CBM's concepts: seeded on/off masks, kernel-weighted ridge regression."
    default_params: ClassVar[dict[str, Any]] = {"n_samples": 256, "kernel_width": 0.25, "alpha": 1.0, "baseline": 0.0}

    def _weights(self, model: Any, p: torch.Tensor, target: int, rng: np.random.Generator) -> np.ndarray:
        k = p.shape[0]
        masks = rng.integers(0, 2, size=(int(self.params["n_samples"]), k)).astype(np.float64)
        masks[0] = 1.0
        f = _target_prob(model, self._perturbed(p, masks), target)
        cos = masks.sum(1) / (np.sqrt(np.maximum(masks.sum(1), 1e-12)) * np.sqrt(k))
        dist = 1.0 - cos
        sw = np.exp(-(dist**2) / float(self.params["kernel_width"]) ** 2)
        x = np.hstack([masks, np.ones((len(masks), 1))])
        reg = float(self.params["alpha"]) * np.eye(k + 1)
        reg[-1, -1] = 0.0  # no penalty on the intercept
        xtw = x.T * sw
        coef = np.linalg.solve(xtw @ x + reg, xtw @ f)
        return coef[:k]


class ConceptSHAP(_ConceptExplainer):
    """Exact Shapley values of the target probability over concept coalitions."""

    name: ClassVar[str] = "concept-shap"
    version: ClassVar[str] = "1.1.0"  # 1.1: the target probability in float64 (_target_prob)
    description: ClassVar[str] = "Exact Shapley values over a CBM's concepts (all 2^K coalitions, absent = baseline)."
    default_params: ClassVar[dict[str, Any]] = {"baseline": 0.0}
    max_concepts: ClassVar[int] = 20

    def _weights(self, model: Any, p: torch.Tensor, target: int, rng: np.random.Generator) -> np.ndarray:
        k = int(p.shape[0])
        if k > self.max_concepts:
            raise ValueError(f"{self.name}: exact Shapley values need at most {self.max_concepts} concepts, got {k}")
        codes = np.arange(2**k, dtype=np.int64)
        masks = ((codes[:, None] >> np.arange(k)[None, :]) & 1).astype(np.float64)
        v = _target_prob(model, self._perturbed(p, masks), target)
        sizes = masks.sum(1).astype(int)
        fact = np.array([factorial(s) for s in range(k + 1)], dtype=np.float64)
        phi = np.zeros(k)
        for i in range(k):
            with_i = (codes >> i) & 1 == 1
            s = sizes[with_i] - 1  # coalition size without i
            w = fact[s] * fact[k - s - 1] / fact[k]
            phi[i] = float(np.sum(w * (v[with_i] - v[codes[with_i] ^ (1 << i)])))
        return phi


class ConceptRISE(_ConceptExplainer):
    """RISE over concepts: probability-weighted random concept masks."""

    name: ClassVar[str] = "concept-rise"
    version: ClassVar[str] = "1.1.0"  # 1.1: the target probability in float64 (_target_prob)
    description: ClassVar[str] = "RISE over a CBM's concepts: seeded keep-masks, weight = E[f(m) m_c] / p."
    default_params: ClassVar[dict[str, Any]] = {"n_masks": 500, "p": 0.5, "baseline": 0.0}
    param_specs: ClassVar[dict[str, Param]] = {"p": Param(float, low=0.0, high=1.0)}

    def validate_params(self, params: dict[str, Any]) -> dict[str, Any]:
        if params["p"] in (0.0, 1.0):  # the spec's bounds are inclusive; p = 0 or 1 masks nothing apart
            raise ValueError(f"explainer {self.name!r}: parameter 'p' must be a number in (0, 1), got {params['p']}")
        return params

    def _weights(self, model: Any, p: torch.Tensor, target: int, rng: np.random.Generator) -> np.ndarray:
        keep = float(self.params["p"])
        masks = (rng.random((int(self.params["n_masks"]), int(p.shape[0]))) < keep).astype(np.float64)
        f = _target_prob(model, self._perturbed(p, masks), target)
        return (f[:, None] * masks).mean(0) / keep


CONCEPT_EXPLAINERS: tuple[type[Explainer], ...] = (ConceptLinear, ConceptLIME, ConceptSHAP, ConceptRISE)
