"""Complexity of an explanation (DESIGN 3b): entropy (Bhatt et al. 2020) and effective complexity
(Nguyen and Rodriguez Martinez 2020). Family ``other``: shown, never ranked. Model-free: no
forward pass."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np

from xaibench.api import Metric, MetricCost, MetricInput, MetricOutput
from xaibench.metrics.other import complexity_formulas as fc
from xaibench.params import Param

ZERO_REASON = "all-zero saliency map: complexity undefined"


def _score_rows(batch: MetricInput, formula: Callable[[np.ndarray], np.ndarray]) -> MetricOutput:
    size = len(batch.samples)
    if batch.saliency is None:
        return MetricOutput.not_applicable(size, "needs a saliency map")
    maps = np.asarray(batch.saliency, dtype=np.float64).reshape(size, -1)
    finite = np.isfinite(maps).all(axis=1)
    values = np.full(size, np.nan)
    if finite.any():
        values[finite] = formula(maps[finite])
    reasons: list[str | None] = [None] * size
    for b in range(size):
        if not finite[b]:
            reasons[b] = "saliency map contains NaN or infinite values"
        elif np.isnan(values[b]):
            reasons[b] = ZERO_REASON
    return MetricOutput(values=values, reasons=reasons)


class Complexity(Metric):
    """Complexity (Bhatt et al. 2020, "Evaluating and aggregating feature-based model
    explanations"): the Shannon entropy of the fractional contributions p_i = |E_i| / sum_j |E_j|
    over all pixels, -sum p_i ln p_i, in nats, in [0, ln(H W)]. Lower is better (a less complex,
    more concentrated explanation); not ranked. Equal to Quantus 0.6 ``Complexity`` (which adds
    1e-12 inside the logarithm: a difference below 1e-6 for maps up to 224 x 224)."""

    name = "complexity"
    family = "other"
    direction = "lower"
    ranking = False
    default = False
    needs = ()
    licence = "Apache-2.0"
    version = "1.0.0"
    unit = "entropy in nats, in [0, ln(pixels)]"
    value_range = (0.0, math.inf)
    cost = MetricCost()  # the map alone
    description = "Complexity (Bhatt 2020): entropy of |E| / sum |E| over pixels, in nats; lower is better."

    def score(self, batch: MetricInput) -> MetricOutput:
        return _score_rows(batch, fc.entropy_rows)


class EffectiveComplexity(Metric):
    """Effective complexity (Nguyen and Rodriguez Martinez 2020, "On quantitative aspects of model
    interpretability"): the number of pixels whose attribution |E_i| / max_j |E_j| exceeds
    ``eps`` (default 1e-5, Quantus's default). A pixel count in [0, H W]; lower is better (fewer
    features carry the explanation); not ranked. Equal to Quantus 0.6 ``EffectiveComplexity``
    (whose default normalises by the maximum and takes the absolute value, as here)."""

    name = "effective_complexity"
    family = "other"
    direction = "lower"
    ranking = False
    default = False
    needs = ()
    licence = "Apache-2.0"
    version = "1.0.0"
    unit = "pixels with |E| / max |E| > eps"
    value_range = (0.0, math.inf)
    cost = MetricCost()  # the map alone
    default_params: ClassVar[Mapping[str, Any]] = {"eps": 1e-5}
    param_specs: ClassVar[Mapping[str, Param]] = {"eps": Param(float, low=0.0)}
    description = (
        "Effective complexity (Nguyen 2020): number of pixels with |E| / max |E| > eps (1e-5); lower is better."
    )

    def score(self, batch: MetricInput) -> MetricOutput:
        eps = float(self.params["eps"])
        return _score_rows(batch, lambda maps: fc.effective_complexity_rows(maps, eps))
