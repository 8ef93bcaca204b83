"""Concept explainers on a confident concept-bottleneck head: the weights are the differences
between coalitions' target probabilities, computed in float64 (a hand-computed oracle)."""

from __future__ import annotations

from itertools import product
from math import factorial
from typing import Any

import numpy as np
import torch

from xaibench.api import ExplainContext, Sample
from xaibench.explainers.concepts import ConceptSHAP

WEIGHTS = np.array([0.5, 1.0, 1.5, 2.0])
MARGIN = 25.0


class ConfidentHead:
    """Four concepts, all present; class 0's logit ``MARGIN + WEIGHTS . c``, class 1's 0: class 0's
    probability is 1 - e with e = exp(-30) ~ 1e-13, a float32 1.0 for every coalition."""

    name = "confident-head"
    concept_names = ("a", "b", "c", "d")

    def __init__(self) -> None:
        self.module = torch.nn.Linear(4, 2)

    def concept_probs(self, inputs: torch.Tensor) -> torch.Tensor:
        return torch.ones((inputs.shape[0], 4))

    def class_logits(self, concepts: torch.Tensor) -> torch.Tensor:
        first = MARGIN + concepts @ torch.as_tensor(WEIGHTS, dtype=concepts.dtype)
        return torch.stack([first, torch.zeros_like(first)], dim=-1)


def probability(present: np.ndarray) -> float:
    return float(1.0 / (1.0 + np.exp(-(MARGIN + present @ WEIGHTS))))


def explain(explainer: Any) -> dict[str, float]:
    samples = [Sample(id="s0", image=np.zeros((4, 4, 3), dtype=np.float32), label=0)]
    (weights,) = explainer.explain(ConfidentHead(), torch.zeros((1, 3, 4, 4)), [0], context=ExplainContext(samples))
    return weights


def test_concept_shap_on_a_confident_head_is_the_exact_shapley_value_of_the_float64_probability() -> None:
    k = len(WEIGHTS)
    expected = np.zeros(k)
    for i in range(k):
        for rest in product((0.0, 1.0), repeat=k - 1):
            without = np.insert(np.array(rest), i, 0.0)
            s = int(without.sum())
            with_i = without.copy()
            with_i[i] = 1.0
            weight = factorial(s) * factorial(k - s - 1) / factorial(k)
            expected[i] += weight * (probability(with_i) - probability(without))
    got = np.array(list(explain(ConceptSHAP()).values()))
    assert np.all(np.diff(expected) > 0) and expected[0] > 1e-14  # the oracle ranks the concepts by weight
    np.testing.assert_allclose(got, expected, rtol=1e-3)
