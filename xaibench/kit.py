"""The plugin author's kit: everything a plugin needs, imported from one module.

A plugin imports its base class, the parameter specs, the hook marker and these helpers from
here, and nothing else from xaibench (``tests/test_kit_is_the_plugin_api.py`` checks the
first-party plugins and the scaffold)::

    from xaibench.kit import Explainer, Param, hookimpl, input_gradients

What the kit gives, by task:

- **types and registration**: the base classes :class:`Explainer`, :class:`Dataset`,
  :class:`Model`, :class:`Metric`, :class:`Suite`, :class:`Encoder`; what they exchange
  (:class:`ExplainContext`, :class:`Sample`, :class:`GroundTruth`, :class:`MetricInput`,
  :class:`MetricOutput`, :class:`TrackSpec`); :class:`MetricCost`, what a metric states one
  sample costs (``Metric.cost``); :data:`Register`, :func:`hookimpl`, and
  :class:`Param` for ``param_specs`` (parameters are checked once, by the base class, when the
  component is built);
- **explain as one call**: :class:`AttributionExplainer`, an explainer whose ``explain`` checks
  the inputs and targets, derives the per-image seeds and freezes the model's parameters, then
  calls its :meth:`~AttributionExplainer.attribute` with an :class:`ExplainBatch` on the
  model's device, and checks the maps it returns; :class:`LayerAttributionExplainer`, the same
  for a target-layer method (a CAM): it resolves the layers and upsamples the layer's maps;
- **inputs and targets**: :func:`as_inputs` (a private float copy of the batch),
  :func:`as_targets` (``(B,)`` int64 class indices), :func:`as_maps` (the returned maps, shape
  checked), :func:`baseline_input` (the ``zero`` / ``black`` reference input);
- **images**: :func:`resize_bilinear` (the one resize every map and mask goes through) and
  :func:`from_model_input` (normalised inputs back to [0, 1] pixels);
- **the model**: :func:`forward_batch` and :func:`chunks` (run many perturbed images through the
  model in batches sized for the input), :func:`resolve_target_layers` (CAM target layers),
  :func:`model_modality` (``"text"`` for a model of token sequences, DESIGN 12);
- **gradients**: :func:`isolated_grads` (parameters frozen, their ``requires_grad`` and ``.grad``
  restored, benign hook warnings silenced) and :func:`input_gradients` (the target logits'
  gradient with respect to the inputs);
- **randomness**: :func:`sample_ids`, :func:`sample_seeds`, :func:`sample_rngs` (one seed per
  image from the run seed and the sample id, so a map never depends on its batch),
  :func:`seeded` (seed torch's and numpy's global generators for a library that draws from them,
  then restore them) and :func:`derive_seed`;
- **the output checks**: :func:`check_saliency` and :func:`check_concepts`, the very checks the
  runner applies to every explanation (and :mod:`xaibench.testing` applies in plugin tests).

Plugin tests take the rest from the testing kit, :mod:`xaibench.testing` (fixtures, the tiny
track, the contract checks).

Layer 2: imports the public types, the parameter specs, seeds, the imaging helpers and the hook
marker only.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from xaibench.api import (
    Dataset,
    Encoder,
    ExplainContext,
    Explainer,
    GroundTruth,
    Metric,
    MetricCost,
    MetricInput,
    MetricOutput,
    Model,
    Register,
    Sample,
    Suite,
    TrackSpec,
    model_modality,
)
from xaibench.imaging import from_model_input, resize_bilinear
from xaibench.params import Param
from xaibench.plugins.hookspecs import hookimpl
from xaibench.seeds import derive_seed

__all__ = [
    "BASELINES",
    "AttributionExplainer",
    "Dataset",
    "Encoder",
    "ExplainBatch",
    "ExplainContext",
    "Explainer",
    "GroundTruth",
    "LayerAttributionExplainer",
    "Metric",
    "MetricCost",
    "MetricInput",
    "MetricOutput",
    "Model",
    "Param",
    "Register",
    "Sample",
    "Suite",
    "TrackSpec",
    "as_inputs",
    "as_maps",
    "as_targets",
    "baseline_input",
    "check_concepts",
    "check_saliency",
    "chunks",
    "derive_seed",
    "forward_batch",
    "from_model_input",
    "hookimpl",
    "input_gradients",
    "isolated_grads",
    "model_modality",
    "resize_bilinear",
    "resolve_target_layers",
    "sample_ids",
    "sample_rngs",
    "sample_seeds",
    "seeded",
]

BASELINES: tuple[str, ...] = ("zero", "black")
"""The reference inputs :func:`baseline_input` knows."""

_BENIGN_WARNINGS = (
    r"(?s).*Setting forward, backward hooks and attributes on non-linear",
    r"(?s).*did not already require gradients",
    r"(?s).*Setting backward hooks on ReLU activations",
)
"""Warnings libraries such as Captum print on every call with frozen parameters; harmless."""


# ----------------------------------------------------------------------------- inputs, targets, maps


def as_inputs(inputs: Any) -> torch.Tensor:
    """A detached float32 copy of a ``(B, C, H, W)`` batch (``(B, C, S, S)`` images, ``(B, D + 1, 1,
    L)`` token sequences: :class:`~xaibench.api.TextModel`), never the caller's tensor (so an
    explainer may set ``requires_grad`` or write into it). Raises ``ValueError`` for another shape."""
    x = torch.as_tensor(inputs)
    if x.dim() != 4:
        raise ValueError(f"inputs must be a (B, C, H, W) tensor, got shape {tuple(x.shape)}")
    return x.detach().clone().float()


def as_targets(targets: Any, batch: int) -> torch.Tensor:
    """``(B,)`` class indices (a tensor, an array or a list) as an int64 tensor; ``ValueError``
    unless there is one per input. ``.tolist()`` gives Python ints."""
    t = torch.as_tensor(np.asarray(targets.detach().cpu() if isinstance(targets, torch.Tensor) else targets))
    t = t.reshape(-1).long()
    if int(t.shape[0]) != batch:
        raise ValueError(f"got {int(t.shape[0])} targets for {batch} inputs")
    return t


def as_maps(maps: Any, inputs: torch.Tensor, name: str) -> np.ndarray:
    """The explainer's maps as a float32 ``(B, S, S)`` array for ``(B, C, S, S)`` inputs; a
    ``RuntimeError`` naming the explainer when the shape is wrong (a bug in the explainer)."""
    out = np.asarray(maps.detach().cpu() if isinstance(maps, torch.Tensor) else maps, dtype=np.float32)
    expected = (int(inputs.shape[0]), int(inputs.shape[-2]), int(inputs.shape[-1]))
    if out.shape != expected:
        raise RuntimeError(f"explainer {name!r}: got maps of shape {out.shape}, expected {expected}")
    return out


def baseline_input(kind: str, x: torch.Tensor, model: Model) -> torch.Tensor:
    """The reference input for normalised inputs ``x``: ``zero`` is the normalised zero (the
    dataset mean, also the deletion baseline of the faithfulness metrics); ``black`` is pixel
    value 0, normalised with the model's ``mean`` and ``std``. Same shape as ``x``."""
    if kind == "zero":
        return torch.zeros_like(x)
    if kind == "black":
        mean = torch.tensor(model.mean, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
        std = torch.tensor(model.std, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
        return ((0.0 - mean) / std).expand_as(x).clone()
    raise ValueError(f"unknown baseline {kind!r}; known: {', '.join(BASELINES)}")


# ----------------------------------------------------------------------------- the model


def forward_batch(size: int) -> int:
    """Images per forward pass for an input side of ``size`` px: about four 224 px images'
    worth of pixels (small batches of large images are faster on CPU), at most 64.
    Speed only: results do not depend on it (up to float rounding)."""
    return max(1, min(64, 4 * 224 * 224 // (size * size)))


def chunks(n: int, batch_size: int) -> Iterator[slice]:
    """Consecutive slices covering ``range(n)``, each at most ``batch_size`` long: run ``n``
    perturbed images through the model ``forward_batch(S)`` at a time::

        for part in chunks(len(masks), forward_batch(size)):
            scores.append(model.module(x * masks[part]))
    """
    step = max(1, int(batch_size))
    for start in range(0, int(n), step):
        yield slice(start, min(start + step, int(n)))


def resolve_target_layers(model: Model, explainer: str) -> list[torch.nn.Module]:
    """The modules named by ``model.target_layers`` (dotted paths into ``model.module``), for CAM
    methods; ``ValueError`` naming the model when it declares none or a path does not resolve."""
    paths: Sequence[str] = tuple(getattr(model, "target_layers", ()) or ())
    if not paths:
        raise ValueError(
            f"explainer {explainer!r} needs a target layer, but model {model.name!r} declares no "
            "target_layers (set Model.target_layers to dotted module paths, e.g. ('layer4',))"
        )
    layers = []
    for path in paths:
        try:
            layers.append(model.module.get_submodule(path))
        except AttributeError:
            raise ValueError(
                f"model {model.name!r}: target layer {path!r} (from Model.target_layers) is not a submodule of "
                f"model.module ({type(model.module).__name__})"
            ) from None
    return layers


# ----------------------------------------------------------------------------- gradients


@contextmanager
def isolated_grads(module: torch.nn.Module) -> Iterator[None]:
    """Freeze every parameter of ``module`` for the duration (an explainer needs input gradients
    only) and restore each parameter's ``requires_grad`` and ``.grad`` afterwards, even on error,
    so the model leaves exactly as it came. Silences the warnings libraries give about hooks on
    frozen models."""
    saved = [(p, p.requires_grad, p.grad) for p in module.parameters()]
    try:
        for p, _, _ in saved:
            p.requires_grad_(False)
        with warnings.catch_warnings():
            for pattern in _BENIGN_WARNINGS:
                warnings.filterwarnings("ignore", message=pattern)
            yield
    finally:
        for p, requires_grad, grad in saved:
            p.requires_grad_(requires_grad)
            p.grad = grad


def input_gradients(model: Model, inputs: Any, targets: Any) -> torch.Tensor:
    """``(B, C, S, S)``: the gradient of each image's target logit with respect to that image
    (Simonyan et al. 2014's saliency before any reduction). Parameters stay frozen and untouched
    (:func:`isolated_grads`); the caller's ``inputs`` are not modified."""
    x = as_inputs(inputs).requires_grad_(True)
    t = as_targets(targets, int(x.shape[0])).to(x.device)
    with isolated_grads(model.module), torch.enable_grad():
        picked = model.module(x).gather(1, t.view(-1, 1)).sum()
        (grad,) = torch.autograd.grad(picked, x)
    return grad.detach()


# ----------------------------------------------------------------------------- randomness


def sample_ids(batch: int, context: ExplainContext | None) -> list[str]:
    """The ids of the batch's samples (``context.samples``); without a matching context, the
    positions ``"0"``, ``"1"``, ..."""
    if context is not None and len(context.samples) == batch:
        return [s.id for s in context.samples]
    return [str(i) for i in range(batch)]


def sample_seeds(seed: int, name: str, batch: int, context: ExplainContext | None) -> list[int]:
    """One seed per image from ``(seed, explainer name, sample id)``: an image's map never
    depends on which other images share its batch (see :func:`sample_ids`)."""
    return [derive_seed(seed, name, sample_id) for sample_id in sample_ids(batch, context)]


def sample_rngs(seed: int, name: str, batch: int, context: ExplainContext | None) -> list[np.random.Generator]:
    """One numpy generator per image, seeded with :func:`sample_seeds`."""
    return [np.random.default_rng(s) for s in sample_seeds(seed, name, batch, context)]


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Seed torch's and numpy's global generators (for libraries that draw from them, such as
    Captum) and restore their previous states afterwards, so the caller's streams are untouched."""
    numpy_state = np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        np.random.seed(seed % (2**32))
        try:
            yield
        finally:
            np.random.set_state(numpy_state)


# ----------------------------------------------------------------------------- explain as one call


@dataclass(frozen=True)
class ExplainBatch:
    """One ``explain`` call's arguments, checked once by :class:`AttributionExplainer`."""

    x: torch.Tensor
    """``(B, C, S, S)`` float32 normalised inputs, a private copy (set ``requires_grad`` or write
    into it), on the device the runner put the inputs on: the model's."""
    targets: torch.Tensor
    """``(B,)`` int64 class indices, on ``x``'s device; ``.tolist()`` gives Python ints."""
    seed: int
    """The run's seed, the same for every image of the batch."""
    seeds: list[int]
    """One seed per image (:func:`sample_seeds`): draw per-image randomness from these, so an
    image's map never depends on which other images share its batch."""
    context: ExplainContext | None
    """The samples, as ``explain`` got them (``None`` when called without)."""


class AttributionExplainer(Explainer):
    """An explainer whose ``explain`` is one call of :meth:`attribute`, typically a library's
    attribution function.

    ``explain`` does the rest once for every such explainer: :func:`as_inputs` and
    :func:`as_targets` (on the inputs' device), :func:`sample_seeds`, the parameters frozen by
    :func:`isolated_grads` for the call (restored afterwards, even on error), and
    :func:`as_maps` on what :meth:`attribute` returns. A subclass implements :meth:`attribute`
    only::

        class Saliency(AttributionExplainer):
            name = "saliency"

            def attribute(self, model, batch):
                return input_gradients(model, batch.x, batch.targets).abs().amax(dim=1)
    """

    def explain(
        self, model: Model, inputs: Any, targets: Any, *, seed: int = 0, context: ExplainContext | None = None
    ) -> np.ndarray:
        """``(B, S, S)`` float32 maps of ``(B, C, S, S)`` inputs, from :meth:`attribute`."""
        x = as_inputs(inputs)
        batch = ExplainBatch(
            x=x,
            targets=as_targets(targets, int(x.shape[0])).to(x.device),
            seed=seed,
            seeds=sample_seeds(seed, self.name, int(x.shape[0]), context),
            context=context,
        )
        with isolated_grads(model.module):
            maps = self.attribute(model, batch)
        return as_maps(maps, x, self.name)

    def attribute(self, model: Model, batch: ExplainBatch) -> Any:
        """``(B, S, S)`` maps (an array or a tensor on any device; higher = more relevant to the
        target class) for ``batch``; the model's parameters are frozen meanwhile."""
        raise NotImplementedError


class LayerAttributionExplainer(AttributionExplainer):
    """A target-layer method (a CAM, a library's layer attribution) in a few lines: implement
    :meth:`attribute_layer`, which gets one resolved layer module and returns maps at that layer's
    resolution.

    On top of :class:`AttributionExplainer` (inputs, targets, seeds, frozen parameters, checked
    maps), ``attribute`` resolves ``model.target_layers`` to modules
    (:func:`resolve_target_layers`; a ``target_layer`` parameter, when the explainer declares one
    and it is set, names a submodule instead), makes the inputs require gradients with autograd
    on (when ``needs`` has ``gradients``, so layer activations carry gradients although the
    parameters are frozen), calls :meth:`attribute_layer` once per layer, takes ``(B, h, w)`` or
    ``(B, 1, h, w)`` maps (array or tensor, any device), upsamples them to the input size with
    :func:`resize_bilinear` and averages them over the layers. Grad-CAM through Captum, say::

        class CaptumGradCAM(LayerAttributionExplainer):
            name = "captum-gradcam"

            def attribute_layer(self, model, batch, layer):
                from captum.attr import LayerGradCam

                return LayerGradCam(model.module, layer).attribute(batch.x, target=batch.targets)
    """

    needs: ClassVar[tuple[str, ...]] = ("gradients", "target_layer")

    def attribute(self, model: Model, batch: ExplainBatch) -> np.ndarray:
        override = self.params.get("target_layer")
        if override:
            try:
                layers = [model.module.get_submodule(str(override))]
            except AttributeError:
                raise ValueError(
                    f"explainer {self.name!r}: target_layer {override!r} is not a submodule of model {model.name!r}"
                ) from None
        else:
            layers = resolve_target_layers(model, self.name)
        gradients = "gradients" in self.needs
        size = (int(batch.x.shape[-2]), int(batch.x.shape[-1]))
        total = np.zeros((int(batch.x.shape[0]), *size), dtype=np.float32)
        with torch.set_grad_enabled(gradients):
            if gradients:
                batch.x.requires_grad_(True)
            for layer in layers:
                total += self._upsampled(self.attribute_layer(model, batch, layer), batch, size)
        return total / len(layers)

    def _upsampled(self, maps: Any, batch: ExplainBatch, size: tuple[int, int]) -> np.ndarray:
        low = np.asarray(maps.detach().cpu() if isinstance(maps, torch.Tensor) else maps, dtype=np.float32)
        if low.ndim == 4 and low.shape[1] == 1:
            low = low[:, 0]
        if low.ndim != 3 or low.shape[0] != int(batch.x.shape[0]):
            raise RuntimeError(
                f"explainer {self.name!r}: attribute_layer returned maps of shape {low.shape}, "
                f"expected (B, h, w) or (B, 1, h, w) with B = {int(batch.x.shape[0])}"
            )
        return resize_bilinear(low, size)

    def attribute_layer(self, model: Model, batch: ExplainBatch, layer: torch.nn.Module) -> Any:
        """``(B, h, w)`` or ``(B, 1, h, w)`` maps at ``layer``'s resolution (higher = more relevant
        to the target class) for ``batch``, whose ``x`` requires gradients; remove any hook you
        register on ``layer`` before returning, also when you raise."""
        raise NotImplementedError


# ----------------------------------------------------------------------------- output checks


def check_saliency(value: Any, size: tuple[int, int]) -> tuple[np.ndarray | None, str | None]:
    """Check one saliency map against the input size ``(S, S)``; returns ``(map, None)`` (float32)
    or ``(None, reason)``. The runner records the reason as the sample's n/a: a non-numeric map,
    the wrong shape, NaN or inf, or a constant map (it ranks nothing)."""
    try:
        arr = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        return None, f"explainer returned a non-numeric map ({exc})"
    if arr.ndim == 3 and arr.shape[0] == 1:
        arr = arr[0]
    if arr.shape != size:
        return None, f"explainer returned shape {tuple(arr.shape)}, expected {size}"
    if not np.isfinite(arr).all():
        return None, "explainer returned NaN or inf"
    if is_constant(arr):
        return None, CONSTANT_MAP
    return arr, None


CONSTANT_MAP = "explainer returned a constant map"
"""The n/a reason of a constant map; a metric with ``scores_constant_maps`` scores it instead."""
CONSTANT_RTOL = 1e-6
"""A map whose range is at most this fraction of its largest magnitude is constant (the alignment
normaliser's rule): resizing a constant map leaves float noise of about 1e-7 that must not turn
it into a rankable one."""


def is_constant(arr: np.ndarray) -> bool:
    """Whether a finite map is constant up to :data:`CONSTANT_RTOL` of its largest magnitude."""
    high, low = float(arr.max()), float(arr.min())
    return high - low <= CONSTANT_RTOL * max(abs(high), abs(low))


def check_concepts(value: Any) -> tuple[dict[str, float] | None, str | None]:
    """Check one concept explanation (a non-empty ``{concept: weight}`` dict of finite numbers);
    returns ``(weights, None)`` or ``(None, reason)``, as :func:`check_saliency`."""
    if not isinstance(value, dict) or not value:
        return None, "explainer returned no concept weights"
    try:
        out = {str(k): float(v) for k, v in value.items()}
    except (TypeError, ValueError):
        return None, "explainer returned non-numeric concept weights"
    if not all(np.isfinite(v) for v in out.values()):
        return None, "explainer returned NaN or inf concept weights"
    return out, None
