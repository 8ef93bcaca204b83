"""Sparseness (Chalasani et al. 2020): the Gini index of the explanation's magnitudes."""

from __future__ import annotations

import numpy as np

from xaibench.api import Metric, MetricCost, MetricInput, MetricOutput
from xaibench.metrics.other import formulas as fo


class Sparseness(Metric):
    """Sparseness (Chalasani et al. 2020): Gini index of |E| over all pixels, in [0, 1]. Higher is
    sparser; not ranked."""

    name = "sparseness"
    family = "other"
    direction = "higher"
    ranking = False
    needs = ()
    licence = "Apache-2.0"
    version = "1.0.0"
    unit = "Gini index in [0, 1]"
    value_range = (0.0, 1.0)
    cost = MetricCost()  # the map alone
    description = "Sparseness: Gini index of |E| over all pixels, in [0, 1]; higher is sparser."

    def score(self, batch: MetricInput) -> MetricOutput:
        size = len(batch.samples)
        if batch.saliency is None:
            return MetricOutput.not_applicable(size, "needs a saliency map")
        values = np.full(size, np.nan)
        reasons: list[str | None] = [None] * size
        for b, emap in enumerate(np.asarray(batch.saliency, dtype=np.float64)):
            if not np.isfinite(emap).all():
                reasons[b] = "saliency map contains NaN or infinite values"
                continue
            values[b] = fo.gini(emap)
            if np.isnan(values[b]):
                reasons[b] = "all-zero saliency map: Gini index undefined (0 / 0)"
        return MetricOutput(values=values, reasons=reasons)
