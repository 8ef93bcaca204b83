"""CAM explainers through pytorch-grad-cam.

Every explainer returns ``(B, S, S)`` float32 maps in [0, 1] (the library's ReLU and
per-image min-max scaling; higher = more relevant to the target class). Targets are
the target-class logits. Target layers come from ``Model.target_layers``; token
outputs (ViT) are folded into a grid by the ``reshape`` parameter: ``model`` uses the
model's ``reshape_transform`` attribute when it has one (else ``vit`` for a network with
``num_prefix_tokens``, such as timm's ViTs), ``vit`` drops
``num_prefix_tokens`` (default 1) tokens and folds the rest, ``none`` never reshapes.
Parameters are frozen during a call (only the input needs gradients) and every hook
is removed afterwards, so the model leaves exactly as it came.
"""

from __future__ import annotations

import re
from dataclasses import replace
from importlib import metadata
from typing import Any, ClassVar

import numpy as np
import torch

from xaibench.kit import AttributionExplainer, ExplainBatch, Explainer, Model, Param, resolve_target_layers
from xaibench_gradcam.reshape import reshape_for

LIBRARY_VERSION = metadata.version("grad-cam")
VERSION = f"1.0.0+gradcam.{LIBRARY_VERSION}"
"""Explainer version: ours plus the library's, so a library upgrade invalidates caches."""
EIGEN_VERSION = f"1.1.0+gradcam.{LIBRARY_VERSION}"
"""Eigen-CAM and EigenGrad-CAM: 1.1.0 fixes the principal component's sign by a convention."""

SMOOTH = {"aug_smooth": Param(bool), "eigen_smooth": Param(bool)}
RESHAPE = {"reshape": Param(str, choices=("model", "none", "vit"))}
MAX_CHANNELS = {"max_channels": Param(int, low=1, high=100_000, optional=True)}


class CamExplainer(AttributionExplainer):
    """Base of the CAM explainers: one pytorch-grad-cam class each (the kit's base class checks
    the inputs and maps and keeps the model's gradient state untouched).

    ``aug_smooth``: average over test-time augmentation (flip x 3 brightness; 6x cost).
    ``eigen_smooth``: first principal component of the weighted activations.
    """

    version = VERSION
    licence = "Apache-2.0"
    needs: ClassVar[tuple[str, ...]] = ("gradients", "target_layer")
    default_params: ClassVar[dict[str, Any]] = {"aug_smooth": False, "eigen_smooth": False, "reshape": "model"}
    param_specs: ClassVar[dict[str, Param]] = {**SMOOTH, **RESHAPE}
    cam_class: ClassVar[str] = ""
    """Class name in ``pytorch_grad_cam`` (or in ``xaibench_gradcam._lib``)."""
    input_grad: ClassVar[bool] = True
    """Make the input require grad (FullGrad does it itself)."""

    @property
    def uses_gradients(self) -> bool:
        return "gradients" in self.needs

    def _build(self, module: torch.nn.Module, layers: list[torch.nn.Module], reshape: Any) -> Any:
        if self.cam_class.startswith("Lean"):
            from xaibench_gradcam import _lib as source
        else:
            import pytorch_grad_cam as source

        return getattr(source, self.cam_class)(module, layers, reshape_transform=reshape)

    def _call_kwargs(self) -> dict[str, Any]:
        return {
            "aug_smooth": bool(self.params.get("aug_smooth", False)),
            "eigen_smooth": bool(self.params.get("eigen_smooth", False)),
        }

    def attribute(self, model: Model, batch: ExplainBatch) -> np.ndarray:
        from pytorch_grad_cam.utils.model_targets import ClassifierOutputTarget

        x, classes = batch.x, batch.targets.tolist()
        layers = resolve_target_layers(model, self.name) if "target_layer" in self.needs else []
        override = self.params.get("target_layer")
        if layers and override:  # a dotted path into model.module overrides the model's target layers
            try:
                layers = [model.module.get_submodule(str(override))]
            except AttributeError:
                raise ValueError(f"{self.name}: target_layer {override!r} is not a submodule of the model") from None
        reshape = reshape_for(model, self.params.get("reshape", "none"))
        with torch.set_grad_enabled(self.uses_gradients):
            if self.uses_gradients and self.input_grad:
                x.requires_grad_(True)
            cam = self._build(model.module, layers, reshape)
            try:
                maps = cam(x, targets=[ClassifierOutputTarget(c) for c in classes], **self._call_kwargs())
            except ValueError as exc:
                if re.search(r"Invalid (activation|grads) shape", str(exc)):
                    raise ValueError(
                        f"explainer {self.name!r}: the target layer of model {model.name!r} outputs tokens, not a "
                        "(B, C, h, w) map; set reshape='vit' or give the model a reshape_transform"
                    ) from exc
                raise
            finally:
                cam.activations_and_grads.release()
        return maps


class GradCAM(CamExplainer):
    """Grad-CAM (Selvaraju et al. 2017): activations weighted by spatially averaged gradients."""

    name = "gradcam"
    description = "Grad-CAM (Selvaraju et al. 2017) via pytorch-grad-cam."
    cam_class = "GradCAM"
    default_params: ClassVar[dict[str, Any]] = {**CamExplainer.default_params, "target_layer": None}


class HiResCAM(CamExplainer):
    """HiResCAM (Draelos & Carin 2020): element-wise gradient x activation, summed over channels."""

    name = "hirescam"
    description = "HiResCAM (Draelos & Carin 2020) via pytorch-grad-cam."
    cam_class = "HiResCAM"
    # eigen smoothing voids HiResCAM's faithfulness guarantee (the library prints a warning)
    default_params: ClassVar[dict[str, Any]] = {"aug_smooth": False, "reshape": "model"}
    param_specs: ClassVar[dict[str, Param]] = {"aug_smooth": Param(bool), **RESHAPE}


class GradCAMElementWise(CamExplainer):
    """Grad-CAM element-wise: ReLU(gradient x activation) summed over channels."""

    name = "gradcam-elementwise"
    description = "Element-wise Grad-CAM (ReLU of gradient x activation) via pytorch-grad-cam."
    cam_class = "GradCAMElementWise"


class GradCAMPlusPlus(CamExplainer):
    """Grad-CAM++ (Chattopadhay et al. 2018): higher-order gradient weights."""

    name = "gradcampp"
    description = "Grad-CAM++ (Chattopadhay et al. 2018) via pytorch-grad-cam."
    cam_class = "GradCAMPlusPlus"


class XGradCAM(CamExplainer):
    """XGrad-CAM (Fu et al. 2020): activation-normalised gradient weights."""

    name = "xgradcam"
    description = "XGrad-CAM (Fu et al. 2020) via pytorch-grad-cam."
    cam_class = "XGradCAM"


class LayerCAM(CamExplainer):
    """LayerCAM (Jiang et al. 2021): ReLU(gradient) x activation, summed over channels."""

    name = "layercam"
    description = "LayerCAM (Jiang et al. 2021) via pytorch-grad-cam."
    cam_class = "LayerCAM"


class EigenGradCAM(CamExplainer):
    """EigenGrad-CAM: first principal component of gradient x activation, its sign fixed as
    :class:`EigenCAM`'s (since 1.1.0)."""

    name = "eigengradcam"
    version = EIGEN_VERSION
    description = "EigenGrad-CAM (principal component of gradient x activation) via pytorch-grad-cam."
    cam_class = "LeanEigenGradCAM"
    default_params: ClassVar[dict[str, Any]] = {"aug_smooth": False, "reshape": "model"}
    param_specs: ClassVar[dict[str, Param]] = {"aug_smooth": Param(bool), **RESHAPE}


class EigenCAM(CamExplainer):
    """Eigen-CAM (Muhammad & Yeasin 2020): first principal component of the activations.

    Class-agnostic (ignores the target). The component's sign, which the library leaves to
    LAPACK (a map could come out inverted on one machine and not on another), follows a
    convention since 1.1.0: the projection's entry of largest magnitude is positive
    (``xaibench_gradcam._lib.first_component_projection``). The map can still be inverted
    relative to the object, as in the library, but it is the same on every machine.
    """

    name = "eigencam"
    version = EIGEN_VERSION
    description = "Eigen-CAM (Muhammad & Yeasin 2020), class-agnostic, via pytorch-grad-cam."
    cam_class = "LeanEigenCAM"
    needs: ClassVar[tuple[str, ...]] = ("target_layer",)
    default_params: ClassVar[dict[str, Any]] = {"aug_smooth": False, "reshape": "model"}
    param_specs: ClassVar[dict[str, Param]] = {"aug_smooth": Param(bool), **RESHAPE}


class ScoreCAM(CamExplainer):
    """Score-CAM (Wang et al. 2020): channel weights = softmax of the target logit on the
    input masked by each upsampled channel. Costs one forward pass per scored channel, so
    ``max_channels`` (default 32) keeps the highest-variance channels; ``None`` = all."""

    name = "scorecam"
    description = "Score-CAM (Wang et al. 2020) via pytorch-grad-cam; top-variance channels only (max_channels)."
    cam_class = "ScoreCAMTopK"
    needs: ClassVar[tuple[str, ...]] = ("target_layer",)
    default_params: ClassVar[dict[str, Any]] = {
        "max_channels": 32,
        "aug_smooth": False,
        "eigen_smooth": False,
        "reshape": "model",
    }
    param_specs: ClassVar[dict[str, Param]] = {**MAX_CHANNELS, **SMOOTH, **RESHAPE}

    def _build(self, module: torch.nn.Module, layers: list[torch.nn.Module], reshape: Any) -> Any:
        from xaibench_gradcam import _lib

        return getattr(_lib, self.cam_class)(module, layers, reshape, max_channels=self.params["max_channels"])


class AblationCAM(ScoreCAM):
    """Ablation-CAM (Desai & Ramaswamy 2020): channel weight = relative drop of the target
    logit when the channel is ablated. One forward pass per ablated channel; at most
    ``max_channels`` (default 32, the highest-variance channels as for Score-CAM), ``None`` = all."""

    name = "ablationcam"
    description = "Ablation-CAM (Desai & Ramaswamy 2020) via pytorch-grad-cam; at most max_channels ablated."
    cam_class = "AblationCAMTopK"


class FullGrad(CamExplainer):
    """FullGrad (Srinivas & Fleuret 2019): |input-gradient x input| plus |bias-gradient x bias|
    of every Conv2d/BatchNorm2d layer (exact types), each channel min-max scaled. Uses no
    target layer and does not apply to token (ViT) models."""

    name = "fullgrad"
    description = "FullGrad (Srinivas & Fleuret 2019) via pytorch-grad-cam (lean aggregation)."
    cam_class = "LeanFullGrad"
    needs: ClassVar[tuple[str, ...]] = ("gradients",)
    input_grad = False
    default_params: ClassVar[dict[str, Any]] = {"aug_smooth": False, "eigen_smooth": False}
    param_specs: ClassVar[dict[str, Param]] = dict(SMOOTH)

    def _build(self, module: torch.nn.Module, layers: list[torch.nn.Module], reshape: Any) -> Any:
        from xaibench_gradcam._lib import LeanFullGrad

        return LeanFullGrad(module)

    def attribute(self, model: Model, batch: ExplainBatch) -> np.ndarray:
        # FullGrad makes the input a leaf that requires grad itself; hand it a plain tensor (a copy).
        # One image per call: the library keeps every bias layer's gradients in memory.
        x = batch.x
        parts = []
        for i in range(int(x.shape[0])):
            one = slice(i, i + 1)
            part = replace(batch, x=x[one].clone(), targets=batch.targets[one], seeds=batch.seeds[one])
            parts.append(super().attribute(model, part))
        return np.concatenate(parts) if parts else np.zeros((0, *x.shape[-2:]), dtype=np.float32)


class DeepFeatureFactorization(CamExplainer):
    """Deep Feature Factorization (Collins et al. 2018) made class-specific: NMF concepts of
    the target layer weighted by their Grad-CAM relevance to the target class (see
    ``xaibench_gradcam._lib.class_dff``; the class weighting is this plugin's, the paper's
    DFF is class-agnostic). ``n_components``: number of NMF concepts (default 5), at most the
    target layer's channels (1.1: a factorisation into more concepts than channels is not unique,
    and its maps moved with float rounding)."""

    name = "dff"
    version = f"1.1.0+gradcam.{LIBRARY_VERSION}"
    description = "Deep Feature Factorization (Collins et al. 2018), concepts weighted by class relevance."
    default_params: ClassVar[dict[str, Any]] = {"n_components": 5, "reshape": "model"}
    param_specs: ClassVar[dict[str, Param]] = {"n_components": Param(int, low=1, high=64), **RESHAPE}

    def attribute(self, model: Model, batch: ExplainBatch) -> np.ndarray:
        from xaibench_gradcam._lib import class_dff

        x, classes = batch.x, batch.targets.tolist()
        layers = resolve_target_layers(model, self.name)
        reshape = reshape_for(model, self.params["reshape"])
        x.requires_grad_(True)
        return class_dff(model.module, layers[-1], reshape, x, classes, self.params["n_components"])


EXPLAINERS: tuple[type[Explainer], ...] = (
    GradCAM,
    HiResCAM,
    GradCAMElementWise,
    GradCAMPlusPlus,
    XGradCAM,
    AblationCAM,
    ScoreCAM,
    EigenCAM,
    EigenGradCAM,
    LayerCAM,
    FullGrad,
    DeepFeatureFactorization,
)
