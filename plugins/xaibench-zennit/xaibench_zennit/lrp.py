"""Layer-wise relevance propagation (LRP) through zennit.

Each explainer puts relevance 1 on the target-class logit (zennit's one-hot output
attribution) and propagates it to the input with a zennit *composite* (a rule per layer type);
the map is the input relevance summed over colour channels, ``(B, S, S)`` float32, signed:
positive = evidence for the target class, higher = more relevant. Where every rule on the path
conserves relevance (no biases, no residual additions) a map sums to 1; biases (including those
of folded batch norms) and EfficientNet's residual additions absorb or add some.

Batch norms are folded into the preceding layer first (``canonize=true``,
:mod:`xaibench_zennit.canonize`); the model's parameters are restored afterwards and frozen
meanwhile, every hook is removed, so the model leaves exactly as it came. Deterministic: no
randomness, and an image's map does not depend on its batch (eval-mode batch norms).

Explainers: one per composite the literature ranks (so several rank side by side in one run,
each with only its own parameters) and ``zennit-lrp``, whose ``composite`` parameter selects
any of :data:`COMPOSITES`.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any, ClassVar

import torch

from xaibench.kit import AttributionExplainer, ExplainBatch, Explainer, Model, Param, chunks, forward_batch
from xaibench_zennit.canonize import batch_norm_canonizers

LIBRARY_VERSION = metadata.version("zennit")
VERSION = f"1.0.0+zennit.{LIBRARY_VERSION}"
"""Explainer version: ours plus zennit's, so a library upgrade invalidates cached maps."""

COMPOSITES: tuple[str, ...] = (
    "epsilon_plus_flat",
    "epsilon_gamma_box",
    "excitation_backprop",
    "epsilon_plus",
    "epsilon_alpha2_beta1",
    "epsilon_alpha2_beta1_flat",
)
"""zennit composites ``zennit-lrp`` accepts (zennit's registry names)."""

EPSILON = {"epsilon": Param(float, low=0.0, high=1e3)}
GAMMA = {"gamma": Param(float, low=0.0, high=1e3)}
CANONIZE = {"canonize": Param(bool)}


def make_composite(name: str, *, epsilon: float, gamma: float, low: Any, high: Any, canonizers: list[Any]) -> Any:
    """The zennit composite ``name`` (one of :data:`COMPOSITES`). ``low``/``high``: the lowest and
    highest normalised input values (the ZBox bounds of ``epsilon_gamma_box``'s first layer)."""
    from zennit import composites as zc

    if name == "epsilon_gamma_box":
        return zc.EpsilonGammaBox(low=low, high=high, epsilon=epsilon, gamma=gamma, canonizers=canonizers)
    if name == "excitation_backprop":
        return zc.ExcitationBackprop(canonizers=canonizers)
    classes = {
        "epsilon_plus_flat": zc.EpsilonPlusFlat,
        "epsilon_plus": zc.EpsilonPlus,
        "epsilon_alpha2_beta1": zc.EpsilonAlpha2Beta1,
        "epsilon_alpha2_beta1_flat": zc.EpsilonAlpha2Beta1Flat,
    }
    if name not in classes:
        raise ValueError(f"unknown zennit composite {name!r}; known: {', '.join(COMPOSITES)}")
    return classes[name](epsilon=epsilon, canonizers=canonizers)


def pixel_bounds(model: Model, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The normalised values of pixel values 0 and 1, ``(1, C, 1, 1)`` each, on ``x``'s device."""
    mean = torch.tensor(model.mean, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
    std = torch.tensor(model.std, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
    return (0.0 - mean) / std, (1.0 - mean) / std


class ZennitLRP(AttributionExplainer):
    """LRP with any zennit composite of :data:`COMPOSITES` (``composite`` parameter)."""

    name = "zennit-lrp"
    version = VERSION
    description = "Layer-wise relevance propagation via zennit; composite=NAME picks the rules."
    licence = "Apache-2.0"
    needs: ClassVar[tuple[str, ...]] = ("gradients",)
    default_params: ClassVar[dict[str, Any]] = {
        "composite": "epsilon_plus_flat",
        "epsilon": 1e-6,
        "gamma": 0.25,
        "canonize": True,
    }
    param_specs: ClassVar[dict[str, Param]] = {
        "composite": Param(str, choices=COMPOSITES),
        **EPSILON,
        **GAMMA,
        **CANONIZE,
    }
    composite: ClassVar[str] = ""
    """The fixed composite of a named explainer (``zennit-lrp`` takes it as a parameter)."""

    def composite_for(self, model: Model, x: torch.Tensor) -> Any:
        """This explainer's zennit composite for ``model`` and normalised inputs like ``x``."""
        name = self.params.get("composite", self.composite)
        low, high = pixel_bounds(model, x)
        canonizers = batch_norm_canonizers(model.module) if self.params["canonize"] else []
        return make_composite(
            name,
            epsilon=float(self.params.get("epsilon", 1e-6)),
            gamma=float(self.params.get("gamma", 0.25)),
            low=low,
            high=high,
            canonizers=canonizers,
        )

    def attribute(self, model: Model, batch: ExplainBatch) -> torch.Tensor:
        x, t = batch.x, batch.targets
        maps = []
        composite = self.composite_for(model, x)
        with torch.enable_grad(), composite.context(model.module) as modified:
            for part in chunks(int(x.shape[0]), forward_batch(int(x.shape[-1]))):
                xs = x[part].clone().requires_grad_(True)
                out = modified(xs)
                one_hot = torch.zeros_like(out).scatter_(1, t[part].view(-1, 1), 1.0)
                (relevance,) = torch.autograd.grad(out, xs, grad_outputs=one_hot)
                maps.append(relevance.detach().sum(dim=1).cpu())
        return torch.cat(maps) if maps else torch.zeros(0, *x.shape[-2:])


class LRPEpsilonPlusFlat(ZennitLRP):
    """LRP with zennit's EpsilonPlusFlat: epsilon rule on dense layers, z+ on convolutions, flat
    rule on the first layer (Kohlbrenner et al. 2020's recommended composite)."""

    name = "lrp-epsilon-plus-flat"
    description = "LRP (zennit EpsilonPlusFlat): epsilon on dense, z+ on conv, flat on the first layer."
    composite = "epsilon_plus_flat"
    default_params: ClassVar[dict[str, Any]] = {"epsilon": 1e-6, "canonize": True}
    param_specs: ClassVar[dict[str, Param]] = {**EPSILON, **CANONIZE}


class LRPEpsilonGammaBox(ZennitLRP):
    """LRP with zennit's EpsilonGammaBox: epsilon rule on dense layers, gamma rule on convolutions,
    z^B (box) rule on the first layer, bounded by the normalised pixel values 0 and 1."""

    name = "lrp-epsilon-gamma-box"
    description = "LRP (zennit EpsilonGammaBox): epsilon on dense, gamma on conv, z-box on the first layer."
    composite = "epsilon_gamma_box"
    default_params: ClassVar[dict[str, Any]] = {"epsilon": 1e-6, "gamma": 0.25, "canonize": True}
    param_specs: ClassVar[dict[str, Param]] = {**EPSILON, **GAMMA, **CANONIZE}


class ExcitationBackprop(ZennitLRP):
    """Excitation Backprop (Zhang et al. 2016) through zennit: the z+ rule on every linear and
    convolution layer, activations passed by their gradient."""

    name = "excitation-backprop"
    description = "Excitation Backprop (Zhang et al. 2016) via zennit: z+ on every layer."
    composite = "excitation_backprop"
    default_params: ClassVar[dict[str, Any]] = {"canonize": True}
    param_specs: ClassVar[dict[str, Param]] = dict(CANONIZE)


EXPLAINERS: tuple[type[Explainer], ...] = (LRPEpsilonPlusFlat, LRPEpsilonGammaBox, ExcitationBackprop, ZennitLRP)
