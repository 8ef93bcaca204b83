"""The robustness family (DESIGN 3b): how far an explanation moves when the input moves a little.

Every metric shares one seeded perturbation pass per batch (:mod:`.context`): ``n`` inputs
perturbed by uniform noise of radius ``radius`` in the model's normalised space, one batched forward
for the logits, the explainer re-run in chunks on those that keep the predicted class. Perturbations that change the
predicted class are dropped; a sample none of whose perturbations keeps it is tried again with the
same noise halved (at most three times, the radius recorded in its curve), then n/a. Lower is better
for every metric; the family is ranked within itself and stays out of the overall rank."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from xaibench.api import Metric, MetricCost, MetricInput, MetricOutput
from xaibench.metrics.robustness import formulas as fr
from xaibench.metrics.robustness.context import HALVINGS, PerturbedPass, perturbed_pass
from xaibench.params import Param


def explain_chunk(batch: MetricInput) -> int:
    """Perturbed inputs per explainer call: the batch's size, the size the run explains clean inputs
    in (on 2 CPU cores, EfficientNet-Lite0's gradients cost about 25 % more per image in calls of 32
    than of 8: bench/bench_robustness.py)."""
    return max(1, len(batch.samples))


class RobustnessMetric(Metric):
    """Base: subclasses give :meth:`ratios` (``(B, n)``, one per perturbation) and ``reduce``
    (``"max"`` or ``"mean"`` over the kept perturbations)."""

    family = "robustness"
    direction = "lower"
    value_range = (0.0, math.inf)  # a norm over a norm (or a floor)
    cost = MetricCost(forward_passes="n + 1", explanations="n", shared="robustness-perturbed")
    ranking = True
    default = False
    needs = ("model",)
    licence = "Apache-2.0"
    version = "1.1.0"  # 1.1: halving the noise when no perturbation keeps the class
    reduce: ClassVar[str] = "max"
    undefined: ClassVar[str] = "ratio undefined on every kept perturbation"
    default_params: ClassVar[Mapping[str, Any]] = {"n": 10, "radius": 0.02}
    param_specs: ClassVar[Mapping[str, Param]] = {"n": Param(int, low=1), "radius": Param(float, low=0.0)}

    def ratios(self, p: PerturbedPass) -> np.ndarray | str:
        raise NotImplementedError

    def score(self, batch: MetricInput) -> MetricOutput:
        size = len(batch.samples)
        n, radius = int(self.params["n"]), float(self.params["radius"])
        p, built = perturbed_pass(batch, n, radius, explain_chunk(batch))
        if isinstance(p, str):
            return MetricOutput.not_applicable(size, p)
        ratios = self.ratios(p)
        if isinstance(ratios, str):
            return MetricOutput(values=np.full(size, np.nan), reasons=[ratios] * size, forward_passes=p.cost * built)
        kept = p.kept
        values = fr.aggregate(ratios, kept, self.reduce)
        reasons: list[str | None] = [None] * size
        curves: list[dict[str, Any] | None] = [None] * size
        for b in range(size):
            if p.valid[b]:
                reasons[b] = p.valid[b]
            elif not p.same_class[b].any():
                smallest = radius / 2**HALVINGS
                reasons[b] = (
                    f"no perturbation kept the predicted class ({n} of {n} changed it at radius {radius:g} "
                    f"and at every halving down to {smallest:g})"
                )
            elif not kept[b].any():
                reasons[b] = "the explainer returned NaN or infinite values on every perturbed input"
            elif not np.isfinite(values[b]):
                reasons[b] = self.undefined
            else:
                scored = zip(ratios[b], kept[b], strict=True)
                curves[b] = {"ratio": [float(r) if k and np.isfinite(r) else None for r, k in scored]}
                if p.radius[b] != radius:  # the noise was halved until some perturbation kept the class
                    curves[b]["radius"] = float(p.radius[b])
                continue
            values[b] = np.nan
        return MetricOutput(values=values, reasons=reasons, curves=curves, forward_passes=p.cost * built)


class MaxSensitivity(RobustnessMetric):
    """Max-sensitivity (Yeh et al. 2019, "On the (in)fidelity and sensitivity of explanations"):
    max over the kept perturbed inputs x' (uniform noise of radius ``radius`` in normalised space,
    ``n`` draws seeded per sample) of ||E(x) - E(x')||_2 / ||E(x)||_2, the explainer re-run.
    Relative L2 distance, lower is better."""

    name = "max_sensitivity"
    default = True  # in the default suite (one shared pass serves the three default members)
    version = "2.1.0"  # 2.0: robustness family, shared perturbations, class-changing ones dropped; 2.1: halving
    unit = "relative L2 distance"
    undefined = "all-zero saliency map: relative distance undefined"
    description = (
        "Max-sensitivity: max over n = 10 uniformly perturbed inputs (radius 0.02, normalised space) that keep "
        "the predicted class of ||E - E'|| / ||E||, explainer re-run; relative L2 distance, lower is better."
    )

    def ratios(self, p: PerturbedPass) -> np.ndarray:
        return fr.relative_sensitivity(p.e, p.e_p)


class AvgSensitivity(MaxSensitivity):
    """Avg-sensitivity (Yeh et al. 2019): the mean instead of the max of max-sensitivity's ratios
    ||E(x) - E(x')||_2 / ||E(x)||_2 over the kept perturbed inputs. Relative L2 distance, lower is better."""

    name = "avg_sensitivity"
    default = True
    version = "1.1.0"
    reduce = "mean"
    description = (
        "Avg-sensitivity: mean over n = 10 uniformly perturbed inputs (radius 0.02) that keep the predicted "
        "class of ||E - E'|| / ||E||, explainer re-run; relative L2 distance, lower is better."
    )


class LocalLipschitzEstimate(RobustnessMetric):
    """Local Lipschitz estimate (Alvarez-Melis and Jaakkola 2018, "On the robustness of
    interpretability methods"): max over the kept perturbed inputs x' of
    ||E(x) - E(x')||_2 / ||x - x'||_2 (x in the model's normalised space). Explanation units per
    input unit, lower is better."""

    name = "local_lipschitz_estimate"
    default = True
    unit = "map L2 per input L2"
    description = (
        "Local Lipschitz estimate: max over n = 10 uniformly perturbed inputs (radius 0.02) that keep the "
        "predicted class of ||E - E'||_2 / ||x - x'||_2; lower is better."
    )

    def ratios(self, p: PerturbedPass) -> np.ndarray:
        return fr.lipschitz_ratio(p.e, p.e_p, p.x, p.x_p)


class Continuity(RobustnessMetric):
    """Explanation continuity (Montavon et al. 2018, "Methods for interpreting and understanding
    deep neural networks", section 7.2): the strongest variation of the explanation in the input
    domain, max over the kept perturbed inputs x' of ||E(x) - E(x')||_1 / ||x - x'||_2. Follows the
    paper, not Quantus's ``Continuity`` (patch-wise correlations under translation; Quantus issue
    357). Map L1 per input L2, lower is better."""

    name = "continuity"
    unit = "map L1 per input L2"
    description = (
        "Continuity (Montavon 2018): max over n = 10 uniformly perturbed inputs (radius 0.02) that keep the "
        "predicted class of ||E - E'||_1 / ||x - x'||_2; lower is better."
    )

    def ratios(self, p: PerturbedPass) -> np.ndarray:
        return fr.lipschitz_ratio(p.e, p.e_p, p.x, p.x_p, order=1)


class RelativeInputStability(RobustnessMetric):
    """Relative input stability (Agarwal et al. 2022, "Rethinking stability for attribution-based
    explanations"): max over the kept perturbed inputs x' of
    ||(E - E')/E||_2 / max(||(x - x')/x||_2, eps_min), divisions elementwise (zeros replaced by
    eps_min = 1e-6). Unitless ratio, lower is better."""

    name = "relative_input_stability"
    unit = "relative change ratio"
    description = (
        "Relative input stability (Agarwal 2022): max over n = 10 perturbed inputs (radius 0.02) that keep the "
        "predicted class of ||(E - E')/E|| / max(||(x - x')/x||, 1e-6); lower is better."
    )

    def ratios(self, p: PerturbedPass) -> np.ndarray:
        return fr.relative_input_stability(p.e, p.e_p, p.x, p.x_p)


class RelativeOutputStability(RobustnessMetric):
    """Relative output stability (Agarwal et al. 2022): max over the kept perturbed inputs x' of
    ||(E - E')/E||_2 / max(||h(x) - h(x')||_2, eps_min), h the logits. Relative change per logit
    L2, lower is better."""

    name = "relative_output_stability"
    unit = "relative change per logit L2"
    description = (
        "Relative output stability (Agarwal 2022): max over n = 10 perturbed inputs (radius 0.02) that keep the "
        "predicted class of ||(E - E')/E|| / max(||h(x) - h(x')||, 1e-6), h the logits; lower is better."
    )

    def ratios(self, p: PerturbedPass) -> np.ndarray:
        return fr.relative_output_stability(p.e, p.e_p, p.h, p.h_p)


class RelativeRepresentationStability(RobustnessMetric):
    """Relative representation stability (Agarwal et al. 2022): max over the kept perturbed inputs x'
    of ||(E - E')/E||_2 / max(||(L - L')/L||_2, eps_min), L the input of the model's last linear
    layer (its penultimate representation). Unitless ratio, lower is better."""

    name = "relative_representation_stability"
    unit = "relative change ratio"
    description = (
        "Relative representation stability (Agarwal 2022): max over n = 10 perturbed inputs (radius 0.02) that "
        "keep the predicted class of ||(E - E')/E|| / max(||(L - L')/L||, 1e-6), L the last linear layer's "
        "input; lower is better."
    )

    def ratios(self, p: PerturbedPass) -> np.ndarray | str:
        if p.r is None or p.r_p is None:
            return "the model has no linear layer whose input serves as the representation"
        return fr.relative_representation_stability(p.e, p.e_p, p.r, p.r_p)
