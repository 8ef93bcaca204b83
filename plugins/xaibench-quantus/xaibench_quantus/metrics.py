"""The Quantus metrics registered as ``quantus_*``: family, direction (Quantus' own
``score_direction``, checked against the papers), needs and parameters.

Quantus' defaults are kept except where they cost too much on a CPU, which are named in each
description (``nr_samples`` and the step size of MonotonicityCorrelation, ``nr_samples`` of
AvgSensitivity). Every metric is unranked and off by default (``default = False``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from xaibench.kit import Explainer, MetricInput, Param, resize_bilinear
from xaibench_quantus.adapter import Call, QuantusMetric, SwappedModel


class FaithfulnessCorrelation(QuantusMetric):
    """Faithfulness correlation (Bhatt et al. 2020): Pearson correlation, over ``nr_runs`` random
    subsets of ``subset_size`` input features set to the ``perturb_baseline``, between the sum of
    the attributions in the subset and the drop of the target logit. In [-1, 1], higher is better."""

    name = "quantus_faithfulness_correlation"
    quantus_class = "FaithfulnessCorrelation"
    family = "faithfulness"
    direction = "higher"
    needs = ("model",)
    unit = "Pearson correlation in [-1, 1]"
    nan_reason = "correlation undefined: the logit did not change under any perturbation (Quantus returned NaN)"
    default_params: ClassVar[Mapping[str, Any]] = {"nr_runs": 100, "subset_size": 224, "perturb_baseline": "black"}
    param_specs: ClassVar[Mapping[str, Param]] = {
        "nr_runs": Param(int, low=2),
        "subset_size": Param(int, low=1),
        "perturb_baseline": Param(str, choices=("black", "white", "mean", "uniform", "random")),
    }
    description = (
        "Quantus FaithfulnessCorrelation (Bhatt et al. 2020): Pearson correlation of attribution sums and logit "
        "drops over 100 random 224-feature subsets; higher is better; not ranked, off by default."
    )


class MonotonicityCorrelation(QuantusMetric):
    """Monotonicity correlation (Nguyen and Martinez 2020): Spearman correlation between the
    attributions of feature groups (in ascending order, ``steps`` groups) and the mean squared
    change of the target probability when the group is replaced by uniform noise
    (``nr_samples`` draws). In [-1, 1], higher is better. Quantus' default is one feature per step
    and 100 draws (C x S x S x 100 forward passes); here about ``steps`` = 32 groups and 10 draws.
    Quantus requires the group size to divide S x S, so it is the divisor of S x S nearest to
    C x S x S / ``steps`` (:func:`group_size`; 42 groups of 3584 features at 224 px)."""

    name = "quantus_monotonicity_correlation"
    quantus_class = "MonotonicityCorrelation"
    family = "faithfulness"
    direction = "higher"
    needs = ("model",)
    unit = "Spearman correlation in [-1, 1]"
    nan_reason = "correlation undefined: constant attributions or probability changes (Quantus returned NaN)"
    default_params: ClassVar[Mapping[str, Any]] = {"steps": 32, "nr_samples": 10}
    param_specs: ClassVar[Mapping[str, Param]] = {"steps": Param(int, low=2), "nr_samples": Param(int, low=1)}
    description = (
        "Quantus MonotonicityCorrelation (Nguyen and Martinez 2020): Spearman correlation of attributions and "
        "prediction changes over 32 feature groups x 10 noise draws; higher is better; not ranked, off by default."
    )

    def quantus_kwargs(self, call: Call, seed: int, batch: MetricInput) -> dict[str, Any]:
        return {
            "nr_samples": self.params["nr_samples"],
            "features_in_step": group_size(call.x.shape, self.params["steps"]),
        }


def group_size(shape: tuple[int, ...], steps: int) -> int:
    """Features per MonotonicityCorrelation step for inputs of ``shape`` ``(1, C, H, W)``: the
    divisor of H x W nearest to C x H x W / ``steps`` (the larger one on a tie)."""
    pixels, features = int(shape[-1] * shape[-2]), int(np.prod(shape[1:]))
    target = features / steps
    divisors = [d for d in range(1, pixels + 1) if pixels % d == 0]
    return min(divisors, key=lambda d: (abs(d - target), -d))


class Complexity(QuantusMetric):
    """Complexity (Bhatt et al. 2020): Shannon entropy of the normalised |attributions|, in nats,
    in [0, ln(S x S)]. Lower is better (a concise explanation)."""

    name = "quantus_complexity"
    quantus_class = "Complexity"
    family = "other"
    direction = "lower"
    needs = ()
    unit = "entropy in nats"
    description = (
        "Quantus Complexity (Bhatt et al. 2020): entropy of the normalised |map| in nats; lower is better; "
        "not ranked, off by default."
    )


class RelevanceRankAccuracy(QuantusMetric):
    """Relevance rank accuracy (Arras et al. 2022): the fraction of the K highest-ranked pixels
    inside the ground-truth mask, K the mask's size; computed at the mask's size (the map resized
    bilinearly, as xaibench's alignment metrics do). In [0, 1], higher is better."""

    name = "quantus_relevance_rank_accuracy"
    quantus_class = "RelevanceRankAccuracy"
    family = "alignment"
    direction = "higher"
    needs = ("mask",)
    unit = "fraction in [0, 1]"
    description = (
        "Quantus RelevanceRankAccuracy (Arras et al. 2022): share of the top-|mask| pixels inside the mask; "
        "higher is better; not ranked, off by default."
    )

    def prepare(self, batch: MetricInput, index: int, inputs: np.ndarray | None) -> Call | str:
        truth = batch.samples[index].ground_truth
        mask = truth.binary() if truth is not None else None
        if mask is None:
            return "no ground-truth mask"
        if not mask.any():
            return "empty ground-truth mask"
        saliency = np.asarray(batch.saliency[index], dtype=np.float32)
        if saliency.shape != mask.shape:
            saliency = resize_bilinear(saliency[None], mask.shape)[0]
        x = np.zeros((1, 1, *mask.shape), np.float32)
        return Call(
            x=x, y=np.asarray(batch.targets[index : index + 1]), a=saliency, s=mask[None, None].astype(np.float32)
        )


class RandomLogit(QuantusMetric):
    """Random logit (Sixt et al. 2020): SSIM between the explanation of the target class and the
    explanation of a random other class (seeded per sample), explainer re-run. Lower is better (an
    explanation that does not change with the class does not explain the class)."""

    name = "quantus_random_logit"
    quantus_class = "RandomLogit"
    family = "sanity"
    direction = "lower"
    needs = ("model", "explainer")
    unit = "SSIM"
    description = (
        "Quantus RandomLogit (Sixt et al. 2020): SSIM of the maps for the target and for a random other class, "
        "explainer re-run; lower is better; not ranked, off by default."
    )

    def quantus_kwargs(self, call: Call, seed: int, batch: MetricInput) -> dict[str, Any]:
        assert batch.model is not None
        classes = batch.memo.get(("quantus", "classes", batch.model.identity), lambda: _classes(batch, call))
        return {"num_classes": classes, "seed": seed}


def _classes(batch: MetricInput, call: Call) -> int:
    import torch

    assert batch.model is not None
    module = batch.model.module
    device = next(iter(module.parameters()), torch.zeros(0)).device
    with torch.inference_mode():
        return int(module(torch.as_tensor(call.x).to(device)).shape[1])


class AvgSensitivity(QuantusMetric):
    """Avg-sensitivity (Yeh et al. 2019): mean over ``nr_samples`` inputs perturbed by uniform noise
    in [-``lower_bound``, ``lower_bound``] (normalised space) of ||E - E'|| / ||E||, explainer
    re-run. Lower is better. Quantus' default is 200 draws; here 10."""

    name = "quantus_avg_sensitivity"
    quantus_class = "AvgSensitivity"
    family = "other"
    direction = "lower"
    needs = ("model", "explainer")
    unit = "relative Frobenius distance"
    default_params: ClassVar[Mapping[str, Any]] = {"nr_samples": 10, "lower_bound": 0.2}
    param_specs: ClassVar[Mapping[str, Param]] = {
        "nr_samples": Param(int, low=1),
        "lower_bound": Param(float, low=0.0),
    }
    description = (
        "Quantus AvgSensitivity (Yeh et al. 2019): mean relative change of the map over 10 inputs with uniform "
        "noise of radius 0.2, explainer re-run; lower is better; not ranked, off by default."
    )


class ModelParameterRandomisation(QuantusMetric):
    """Model parameter randomisation test (Adebayo et al. 2018; Quantus ``MPRT``): Spearman
    correlation of |E| on the model and |E| on Quantus' copy with every layer re-initialised in
    ``layer_order`` (seeded per sample), explainer re-run. Lower is better.

    Quantus randomises the model in this process, so the explainer must run here too: with the
    run's explainer in a worker process (``xaibench run``) the metric answers n/a; xaibench's own
    ``model_randomisation`` is the same test built to randomise models in the workers."""

    name = "quantus_model_parameter_randomisation"
    quantus_class = "MPRT"
    family = "sanity"
    direction = "lower"
    needs = ("model", "explainer")
    unit = "Spearman correlation in [-1, 1]"
    nan_reason = "correlation undefined: a constant map on the randomised model (Quantus returned NaN)"
    default_params: ClassVar[Mapping[str, Any]] = {"layer_order": "top_down"}
    param_specs: ClassVar[Mapping[str, Param]] = {
        "layer_order": Param(str, choices=("top_down", "bottom_up", "independent")),
    }
    description = (
        "Quantus MPRT (Adebayo et al. 2018): Spearman correlation of |E| on the model and on a fully "
        "re-initialised copy, explainer re-run in this process; lower is better; not ranked, off by default."
    )

    def batch_problem(self, batch: MetricInput) -> str | None:
        if batch.saliency is not None and batch.explainer is not None and not isinstance(batch.explainer, Explainer):
            return (
                "Quantus randomises the model in this process but the explainer runs in a worker; "
                "use model_randomisation (the same test, randomised in the workers)"
            )
        return super().batch_problem(batch)

    def quantus_kwargs(self, call: Call, seed: int, batch: MetricInput) -> dict[str, Any]:
        return {
            "layer_order": self.params["layer_order"],
            "seed": seed,
            "return_last_correlation": True,
            "skip_layers": True,
        }

    def changed_model(self, batch: MetricInput, module: Any) -> Any:
        return SwappedModel(batch.model, module, f"quantus-mprt({self.params['layer_order']})")


METRICS: tuple[type[QuantusMetric], ...] = (
    FaithfulnessCorrelation,
    MonotonicityCorrelation,
    Complexity,
    RelevanceRankAccuracy,
    RandomLogit,
    AvgSensitivity,
    ModelParameterRandomisation,
)
