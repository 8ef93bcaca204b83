"""Attribution explainers through Captum.

Every explainer returns ``(B, S, S)`` float32 maps; higher = more evidence for the
target class. Captum attributes per input element ``(B, 3, S, S)``; the ``reduce``
parameter turns that into one value per pixel: ``sum`` (signed; default for methods
whose attributions add up to an output difference: Integrated Gradients, Input x
Gradient, DeepLift, GradientSHAP), ``max_abs`` (default for gradient-magnitude
methods: Saliency, Guided Backprop, SmoothGrad) or ``abs_sum``. Occlusion, LIME and
KernelSHAP perturb all channels of a region together, so their attributions are
equal across channels and the map is that value (no ``reduce``).

``baseline`` ``zero`` is the normalised zero (the dataset mean: the deletion
baseline); ``black`` is pixel value 0. Gradient methods explain the target logit;
perturbation methods explain the target's softmax probability unless
``output="logit"``. Random draws (noise, baselines, coalitions) are seeded per image
from ``(seed, explainer name, sample id)``; parameters are frozen during a call and
Captum's hooks are removed, so the model leaves exactly as it came.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import metadata
from typing import Any, ClassVar

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from xaibench.kit import (
    BASELINES,
    AttributionExplainer,
    ExplainBatch,
    Explainer,
    Model,
    Param,
    baseline_input,
    forward_batch,
    model_modality,
    seeded,
)
from xaibench_captum.maps import REDUCTIONS, pixel_images, reduce_channels, superpixels

LIBRARY_VERSION = metadata.version("captum")
VERSION = f"1.0.0+captum.{LIBRARY_VERSION}"
"""Explainer version: ours plus the library's, so a library upgrade invalidates caches."""
PERTURBATION_VERSION = f"1.1.0+captum.{LIBRARY_VERSION}"
"""Occlusion, LIME and KernelSHAP: 1.1 scores the output in float64 (:func:`_forward`) and fits the
surrogates to the change from the explained input (:func:`_centred`)."""


REDUCE = {"reduce": Param(str, choices=REDUCTIONS)}
BASELINE = {"baseline": Param(str, choices=BASELINES)}
OUTPUT = {"output": Param(str, choices=("probability", "logit"))}
SEGMENTS = {
    "segmentation": Param(str, choices=("slic", "grid")),
    "n_segments": Param(int, low=2, high=1024),
    "compactness": Param(float, low=1e-3, high=1e4),
}


class CaptumExplainer(AttributionExplainer):
    """Base of the Captum explainers: each implements ``attribute(model, batch)`` with one Captum
    method; the kit's base class checks the inputs and maps, derives the per-image seeds and
    keeps the model's gradient state untouched."""

    version = VERSION
    licence = "Apache-2.0"
    needs: ClassVar[tuple[str, ...]] = ("gradients",)

    def per_image(self, batch: ExplainBatch, fn: Callable[[torch.Tensor, int], torch.Tensor]) -> torch.Tensor:
        """Run ``fn(x_i[None], target_i)`` image by image under that image's seed (the targets read
        to the host once, not once per image)."""
        parts = []
        for i, (s, target) in enumerate(zip(batch.seeds, batch.targets.tolist(), strict=True)):
            with seeded(s):
                parts.append(fn(batch.x[i : i + 1], target))
        return torch.cat(parts)


# ----------------------------------------------------------------------------- gradients


class Saliency(CaptumExplainer):
    """Saliency (Simonyan et al. 2014): the gradient of the target logit; by default its
    largest magnitude over channels (the built-in ``gradient`` explainer computes the same
    with plain autograd: a cross-check)."""

    name = "saliency"
    description = "Saliency (Simonyan et al. 2014), gradient magnitude, via Captum."
    default_params: ClassVar[dict[str, Any]] = {"reduce": "max_abs"}
    param_specs: ClassVar[dict[str, Param]] = dict(REDUCE)

    def attribute(self, model, batch):
        from captum.attr import Saliency as Method

        x, targets = batch.x, batch.targets
        grads = Method(model.module).attribute(x, target=targets, abs=False)
        return reduce_channels(grads, self.params["reduce"])


class InputXGradient(CaptumExplainer):
    """Input x Gradient (Shrikumar et al. 2016): the input times the target-logit gradient."""

    name = "input-x-gradient"
    modalities: ClassVar[tuple[str, ...]] = ("image", "text")
    description = "Input x Gradient (Shrikumar et al. 2016) via Captum."
    default_params: ClassVar[dict[str, Any]] = {"reduce": "sum"}
    param_specs: ClassVar[dict[str, Param]] = dict(REDUCE)

    def attribute(self, model, batch):
        from captum.attr import InputXGradient as Method

        x, targets = batch.x, batch.targets
        return reduce_channels(Method(model.module).attribute(x, target=targets), self.params["reduce"])


class GuidedBackprop(CaptumExplainer):
    """Guided Backpropagation (Springenberg et al. 2015): the gradient with negative
    gradients stopped at every ``torch.nn.ReLU`` module. Captum only overrides ReLU
    modules: functional ReLUs and other activations (e.g. ReLU6, SiLU) pass plain
    gradients, so on such models this is (partly) the plain gradient."""

    name = "guided-backprop"
    description = "Guided Backpropagation (Springenberg et al. 2015) via Captum (nn.ReLU modules only)."
    default_params: ClassVar[dict[str, Any]] = {"reduce": "max_abs"}
    param_specs: ClassVar[dict[str, Param]] = dict(REDUCE)

    def attribute(self, model, batch):
        from captum.attr import GuidedBackprop as Method

        x, targets = batch.x, batch.targets
        return reduce_channels(Method(model.module).attribute(x, target=targets), self.params["reduce"])


class IntegratedGradients(CaptumExplainer):
    """Integrated Gradients (Sundararajan et al. 2017): (x - baseline) times the path
    integral of gradients, Gauss-Legendre quadrature with ``n_steps`` points."""

    name = "integrated-gradients"
    modalities: ClassVar[tuple[str, ...]] = ("image", "text")
    description = "Integrated Gradients (Sundararajan et al. 2017) via Captum."
    default_params: ClassVar[dict[str, Any]] = {"n_steps": 16, "baseline": "zero", "reduce": "sum"}
    param_specs: ClassVar[dict[str, Param]] = {"n_steps": Param(int, low=1, high=4096), **BASELINE, **REDUCE}

    def attribute(self, model, batch):
        from captum.attr import IntegratedGradients as Method

        x, targets = batch.x, batch.targets
        attributions = Method(model.module).attribute(
            x,
            baselines=baseline_input(self.params["baseline"], x, model),
            target=targets,
            n_steps=self.params["n_steps"],
            method="gausslegendre",
            internal_batch_size=max(int(x.shape[0]), forward_batch(int(x.shape[-1]))),
        )
        return reduce_channels(attributions, self.params["reduce"])


class DeepLift(CaptumExplainer):
    """DeepLIFT, Rescale rule (Shrikumar et al. 2017), against ``baseline``. Captum applies
    the rule to its supported non-linear modules (ReLU, ELU, Sigmoid, Tanh, Softmax,
    max-pool); other activations pass plain gradients."""

    name = "deeplift"
    description = "DeepLIFT Rescale (Shrikumar et al. 2017) via Captum."
    default_params: ClassVar[dict[str, Any]] = {"baseline": "zero", "reduce": "sum"}
    param_specs: ClassVar[dict[str, Param]] = {**BASELINE, **REDUCE}

    def attribute(self, model, batch):
        from captum.attr import DeepLift as Method

        x, targets = batch.x, batch.targets
        attributions = Method(model.module).attribute(
            x, baselines=baseline_input(self.params["baseline"], x, model), target=targets
        )
        return reduce_channels(attributions, self.params["reduce"])


class GradientShap(CaptumExplainer):
    """GradientSHAP (Lundberg & Lee 2017; expected gradients): ``n_samples`` gradients at
    random points between the input (plus N(0, ``noise``) noise, normalised units) and
    a baseline drawn from ``baselines`` (``zero+black``: the mean and the black image),
    times (input - baseline)."""

    name = "gradient-shap"
    description = "GradientSHAP (Lundberg & Lee 2017) via Captum."
    default_params: ClassVar[dict[str, Any]] = {
        "n_samples": 8,
        "noise": 0.0,
        "baselines": "zero+black",
        "reduce": "sum",
    }
    param_specs: ClassVar[dict[str, Param]] = {
        "n_samples": Param(int, low=1, high=4096),
        "noise": Param(float, low=0.0, high=100.0),
        "baselines": Param(str, choices=("zero", "black", "zero+black")),
        **REDUCE,
    }

    def attribute(self, model, batch):
        from captum.attr import GradientShap as Method

        method = Method(model.module)
        kinds = self.params["baselines"].split("+")

        def one(xi: torch.Tensor, target: int) -> torch.Tensor:
            refs = torch.cat([baseline_input(kind, xi, model) for kind in kinds])
            return method.attribute(
                xi,
                baselines=refs,
                n_samples=self.params["n_samples"],
                stdevs=self.params["noise"],
                target=target,
            )

        return reduce_channels(self.per_image(batch, one), self.params["reduce"])


class SmoothGrad(CaptumExplainer):
    """SmoothGrad (Smilkov et al. 2017) through Captum's NoiseTunnel over Saliency: the
    mean gradient magnitude over ``n_samples`` noisy copies, noise sigma =
    ``noise_level`` x (max - min) of the image in normalised units."""

    name = "smoothgrad"
    description = "SmoothGrad (Smilkov et al. 2017) via Captum NoiseTunnel(Saliency)."
    default_params: ClassVar[dict[str, Any]] = {"n_samples": 10, "noise_level": 0.15, "reduce": "max_abs"}
    param_specs: ClassVar[dict[str, Param]] = {
        "n_samples": Param(int, low=1, high=4096),
        "noise_level": Param(float, low=0.0, high=10.0),
        **REDUCE,
    }

    def attribute(self, model, batch):
        from captum.attr import NoiseTunnel
        from captum.attr import Saliency as Method

        tunnel = NoiseTunnel(Method(model.module))
        # every image's value range, read to the host at once
        ranges = iter((batch.x.amax(dim=(1, 2, 3)) - batch.x.amin(dim=(1, 2, 3))).tolist())

        def one(xi: torch.Tensor, target: int) -> torch.Tensor:
            sigma = float(self.params["noise_level"]) * next(ranges)
            return tunnel.attribute(
                xi,
                nt_type="smoothgrad",
                nt_samples=self.params["n_samples"],
                nt_samples_batch_size=forward_batch(int(xi.shape[-1])),
                stdevs=sigma,
                target=target,
                abs=True,
            )

        return reduce_channels(self.per_image(batch, one), self.params["reduce"])


# ----------------------------------------------------------------------------- perturbations


def _forward(model: Model, output: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """The scored output, ``(N, classes)`` float64: the logits, or the softmax probabilities
    computed in float64 from them. A confident model's target probability is 1 - e with e ~ 1e-6;
    in float32 (ulp 6e-8 at 1) every perturbation's e, and so the attribution of every region but
    the decisive one, is a few ulps: rounding, whose order moves with the CPU's kernels."""
    if output == "logit":
        return lambda inp: model.module(inp).double()
    return lambda inp: torch.softmax(model.module(inp).double(), dim=1)


def _centred(forward: Callable[[torch.Tensor], torch.Tensor], inputs: torch.Tensor) -> Callable[..., torch.Tensor]:
    """``forward`` minus its value at ``inputs`` (one more forward pass). Captum casts the outputs a
    surrogate is fitted to to float32 (``LimeBase``), which keeps 1 - e with e ~ 1e-6 to a few
    ulps; the change from the explained input keeps its digits. LIME's and KernelSHAP's surrogates
    fit an intercept, so their coefficients, the attributions, are the same in exact arithmetic."""
    with torch.no_grad():
        origin = forward(inputs)
    return lambda inp: forward(inp) - origin


class Occlusion(CaptumExplainer):
    """Occlusion (Zeiler & Fergus 2014): a square window (``window`` x side) slides with
    stride ``stride`` x side over the image, replaced by the baseline; each pixel gets the
    mean output drop over the windows covering it. On a token sequence (``(1, L)``) the window
    and stride are those fractions of its length (8 and 4 of 32 tokens by default), replaced by
    the padding token (the zero baseline)."""

    name = "occlusion"
    version = PERTURBATION_VERSION
    description = "Occlusion (Zeiler & Fergus 2014) via Captum."
    modalities: ClassVar[tuple[str, ...]] = ("image", "text")  # on text: windows of tokens, replaced by padding
    needs: ClassVar[tuple[str, ...]] = ("model_agnostic",)
    default_params: ClassVar[dict[str, Any]] = {
        "window": 0.25,
        "stride": 0.125,
        "baseline": "zero",
        "output": "probability",
    }
    param_specs: ClassVar[dict[str, Param]] = {
        "window": Param(float, low=1e-3, high=1.0),
        "stride": Param(float, low=1e-3, high=1.0),
        **BASELINE,
        **OUTPUT,
    }

    def attribute(self, model, batch):
        from captum.attr import Occlusion as Method

        x, targets = batch.x, batch.targets
        sides = (int(x.shape[-2]), int(x.shape[-1]))  # (S, S) for an image, (1, L) for a token sequence
        window = tuple(max(1, round(self.params["window"] * side)) for side in sides)
        stride = tuple(max(1, round(self.params["stride"] * side)) for side in sides)
        side = sides[1]
        with torch.no_grad():
            attributions = Method(_forward(model, self.params["output"])).attribute(
                x,
                sliding_window_shapes=(int(x.shape[1]), *window),
                strides=(int(x.shape[1]), *stride),
                baselines=baseline_input(self.params["baseline"], x, model),
                target=targets,
                perturbations_per_eval=max(1, forward_batch(side) // int(x.shape[0])),
            )
        return attributions[:, 0].detach().cpu().numpy()


def _lime_kernel(width: float) -> Callable[..., torch.Tensor]:
    """LIME's image kernel (lime_image): sqrt(exp(-d^2 / width^2)), d the cosine distance
    between the coalition vector and the all-present vector."""

    def similarity(original: Any, perturbed: Any, interpretable: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        z = interpretable.float().reshape(-1)
        present = z.sum()
        d = 1.0 - torch.sqrt(present / z.numel()) if present > 0 else torch.tensor(1.0)
        return torch.sqrt(torch.exp(-(d**2) / width**2))

    return similarity


class _SuperpixelExplainer(CaptumExplainer):
    """Shared by LIME and KernelSHAP: coalitions of superpixels of a fixed segmentation
    (see ``xaibench_captum.maps.superpixels``), computed on the image in pixel space.

    On a token sequence (``(B, D + 1, 1, L)``, DESIGN 12) the features are the tokens: each real
    token (presence channel 1) is one feature and padding never is one (the surrogate sees only
    the sample's n real tokens; padding stays padding in every coalition); an absent token takes
    the baseline, ``zero``: its column zeroed, the padding token. The map is ``(1, L)``, 0 on
    padding; ``segmentation``, ``n_segments`` and ``compactness`` are not used, and the ``black``
    baseline (a pixel value) does not apply."""

    version = PERTURBATION_VERSION
    modalities: ClassVar[tuple[str, ...]] = ("image", "text")  # on text: one feature per real token
    needs: ClassVar[tuple[str, ...]] = ("model_agnostic",)
    default_params: ClassVar[dict[str, Any]] = {
        "n_samples": 64,
        "segmentation": "slic",
        "n_segments": 25,
        "compactness": 10.0,
        "baseline": "zero",
        "output": "probability",
    }
    param_specs: ClassVar[dict[str, Param]] = {
        "n_samples": Param(int, low=1, high=100_000),
        **SEGMENTS,
        **BASELINE,
        **OUTPUT,
    }

    def _method(self, forward: Callable[[torch.Tensor], torch.Tensor]) -> Any:
        raise NotImplementedError

    def attribute(self, model, batch):
        if model_modality(model) == "text":
            return self._tokens(model, batch)
        x, targets = batch.x, batch.targets
        images = pixel_images(x, model)
        forward = _forward(model, self.params["output"])
        refs = baseline_input(self.params["baseline"], x, model)
        maps = []
        for i, (s, target) in enumerate(zip(batch.seeds, targets.tolist(), strict=True)):
            labels = superpixels(
                images[i], self.params["segmentation"], self.params["n_segments"], self.params["compactness"]
            )
            mask = torch.from_numpy(labels)[None, None].to(x.device)  # Captum indexes the input with it
            # the surrogate fits are tiny least-squares problems: extra BLAS threads only spin
            with seeded(s), torch.no_grad(), threadpool_limits(limits=1, user_api="blas"):
                attributions = self._method(_centred(forward, x[i : i + 1])).attribute(
                    x[i : i + 1],
                    baselines=refs[i : i + 1],
                    target=target,
                    feature_mask=mask,
                    n_samples=self.params["n_samples"],
                    perturbations_per_eval=forward_batch(int(x.shape[-1])),
                )
            maps.append(attributions[0, 0].detach().cpu().numpy())
        return np.stack(maps)

    def _tokens(self, model, batch) -> np.ndarray:
        """``(B, 1, L)`` maps on token sequences (class doc): Captum sees ``(1, D + 1, 1, n)``, the n
        real tokens; its forward puts them back at their places in an all-padding sequence."""
        if self.params["baseline"] != "zero":
            raise ValueError(
                f"explainer {self.name!r}: baseline {self.params['baseline']!r} does not apply to text "
                "(an absent token is the padding token: baseline 'zero')"
            )
        x, targets = batch.x, batch.targets
        forward = _forward(model, self.params["output"])
        maps = np.zeros((x.shape[0], 1, x.shape[-1]), dtype=np.float32)
        for i, (s, target) in enumerate(zip(batch.seeds, targets.tolist(), strict=True)):
            present = torch.nonzero(x[i, -1, 0] > 0).reshape(-1)  # the real tokens' positions
            if present.numel() == 0:
                continue
            tokens = x[i : i + 1, :, :, present]

            def placed(inp: torch.Tensor, xi: torch.Tensor = x[i], present: torch.Tensor = present) -> torch.Tensor:
                full = torch.zeros((inp.shape[0], *xi.shape), dtype=inp.dtype, device=inp.device)
                full[:, :, :, present] = inp
                return forward(full)

            mask = torch.arange(present.numel(), device=x.device).view(1, 1, 1, -1)
            with seeded(s), torch.no_grad(), threadpool_limits(limits=1, user_api="blas"):
                attributions = self._method(_centred(placed, tokens)).attribute(
                    tokens,
                    baselines=torch.zeros_like(tokens),
                    target=target,
                    feature_mask=mask,
                    n_samples=self.params["n_samples"],
                    perturbations_per_eval=forward_batch(int(x.shape[-1])),
                )
            maps[i, 0, present.cpu().numpy()] = attributions[0, 0, 0].detach().cpu().numpy()
        return maps


class Lime(_SuperpixelExplainer):
    """LIME (Ribeiro et al. 2016) on superpixels: ``n_samples`` random coalitions (each
    superpixel kept with probability 0.5, else set to the baseline), a ridge regression
    (alpha 1) weighted by LIME's image kernel (cosine distance, width 0.25)."""

    name = "lime"
    description = "LIME (Ribeiro et al. 2016) on SLIC superpixels via Captum."
    default_params: ClassVar[dict[str, Any]] = {**_SuperpixelExplainer.default_params, "kernel_width": 0.25}
    param_specs: ClassVar[dict[str, Param]] = {
        **_SuperpixelExplainer.param_specs,
        "kernel_width": Param(float, low=1e-3, high=100.0),
    }

    def _method(self, forward):
        from captum._utils.models.linear_model import SkLearnRidge
        from captum.attr import Lime as Method

        return Method(
            forward,
            interpretable_model=SkLearnRidge(alpha=1.0),
            similarity_func=_lime_kernel(self.params["kernel_width"]),
        )


class KernelShap(_SuperpixelExplainer):
    """KernelSHAP (Lundberg & Lee 2017) on superpixels: ``n_samples`` coalitions drawn
    from the Shapley kernel, a weighted linear regression; absent superpixels take the
    baseline."""

    name = "kernel-shap"
    description = "KernelSHAP (Lundberg & Lee 2017) on SLIC superpixels via Captum."

    def _method(self, forward):
        from captum.attr import KernelShap as Method

        return Method(forward)


EXPLAINERS: tuple[type[Explainer], ...] = (
    IntegratedGradients,
    Saliency,
    InputXGradient,
    GuidedBackprop,
    DeepLift,
    GradientShap,
    Occlusion,
    SmoothGrad,
    Lime,
    KernelShap,
)
