"""Cascading model-parameter randomisation (Adebayo et al. 2018), deterministic on every device.

The sanity metric ``model_randomisation`` (DESIGN 4b) re-runs an explainer on copies of the
track's model whose parameters are re-initialised from the output layer down. This module
owns that re-initialisation:

- **Blocks.** The modules that directly own parameters (``parameters(recurse=False)`` is not
  empty), in registration order (``named_modules``), reversed so that the output layer comes
  first, split into ``G`` near-equal consecutive groups (the first ``n mod G`` groups get one
  module more; ``G`` is lowered to the number of modules when there are fewer).
  :func:`randomise` with ``upto = k`` re-initialises groups 1..k.
- **Re-initialisation.** A module with ``reset_parameters`` runs it on a CPU deep copy of
  itself, under ``torch.random.fork_rng(devices=[])`` with torch's CPU generator seeded by
  ``derive_seed(seed, <module path>)``; the copy's own parameters and buffers (batch-norm
  running statistics included) are then copied into the original tensors. A module without
  it gets each own parameter drawn from N(0, s^2), s the standard deviation of the original
  values (numpy, float64; 1 when it is 0 or undefined), from a CPU generator seeded by
  ``derive_seed(seed, <module path>, <parameter name>)``. Nothing is drawn on an accelerator
  and torch's global generators are left as they were, so the same seed gives bit-identical
  weights on the CPU and on CUDA, in any process.
- **Randomised models.** :func:`randomised_model` returns a copy of a model object (any object
  with ``module`` and ``identity``, e.g. :class:`xaibench.api.Model`) whose ``identity`` is
  ``"<base>~randomised(<k>/<G>,seed=<seed>)"`` and whose ``randomisation`` attribute is the
  :class:`Randomisation` it was built from (what an executor sends to a worker to build the
  same copy there). The copy is built lazily: reading ``identity`` or ``randomisation`` costs
  nothing; the first other attribute read deep-copies the base model and randomises the copy's
  module (so a runner that only forwards the description to a worker never holds the weights).
- **Shifted models** (``input_invariance``, Kindermans et al. 2017). :func:`shift_absorbed`
  returns a copy whose input layer absorbs a constant input shift; its ``shift`` attribute is
  the :class:`Shift` it was built from and its identity ``"<base>~shifted(<shift>)"``. An
  executor's worker rebuilds the same copy from that description, like a randomised copy.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from xaibench.seeds import derive_seed

DEFAULT_BLOCKS = 5


@dataclass(frozen=True)
class Randomisation:
    """What a randomised model is: the identity of the model it was copied from (``base``), the
    number of blocks re-initialised from the output (``upto``) out of ``blocks``, and the seed."""

    base: str
    upto: int
    blocks: int
    seed: int

    @property
    def identity(self) -> str:
        """The randomised model's identity (keys the explanation cache; never the base's)."""
        return f"{self.base}~randomised({self.upto}/{self.blocks},seed={self.seed})"


def parameter_modules(module: nn.Module) -> list[tuple[str, nn.Module]]:
    """``(path, module)`` of every module that directly owns a parameter, output first
    (reversed registration order)."""
    owners = [(name, m) for name, m in module.named_modules() if next(m.parameters(recurse=False), None) is not None]
    return owners[::-1]


def parameter_paths(module: Any) -> list[str]:
    """The paths of :func:`parameter_modules`. A module that lives in another process (the proxy
    of a plugin's model, :class:`xaibench.runner.isolation.component_worker.RemoteModule`) carries them as
    data, in ``remote_parameter_paths``, told by the worker that built the real one."""
    told = getattr(module, "remote_parameter_paths", None)
    if isinstance(told, (list, tuple)):
        return [str(path) for path in told]
    return [name for name, _ in parameter_modules(module)]


def parameter_blocks(module: nn.Module, blocks: int = DEFAULT_BLOCKS) -> list[list[str]]:
    """The module paths of each block, output first: :func:`parameter_modules` split into
    ``min(blocks, n)`` near-equal consecutive groups (empty when the module owns no parameter)."""
    if blocks < 1:
        raise ValueError(f"blocks must be at least 1, got {blocks}")
    names = parameter_paths(module)
    groups = min(blocks, len(names))
    if groups == 0:
        return []
    base, extra = divmod(len(names), groups)
    out, start = [], 0
    for g in range(groups):
        end = start + base + (1 if g < extra else 0)
        out.append(names[start:end])
        start = end
    return out


def randomise(module: nn.Module, *, upto: int, blocks: int = DEFAULT_BLOCKS, seed: int = 0) -> list[str]:
    """Re-initialise, in place, the parameters of blocks 1..``upto`` of ``module`` (see the module
    doc); returns the paths of the modules re-initialised. ``upto`` is in [0, number of blocks]."""
    groups = parameter_blocks(module, blocks)
    if not 0 <= upto <= len(groups):
        raise ValueError(f"upto must be in [0, {len(groups)}] (the model has {len(groups)} blocks), got {upto}")
    modules = dict(module.named_modules())
    done: list[str] = []
    for group in groups[:upto]:
        for path in group:
            _reinitialise(modules[path], path, seed)
            done.append(path)
    return done


def _reinitialise(target: nn.Module, path: str, seed: int) -> None:
    reset = getattr(target, "reset_parameters", None)
    if callable(reset):
        with torch.no_grad():
            fresh = copy.deepcopy(target).to("cpu")
            with torch.random.fork_rng(devices=[]):
                torch.random.default_generator.manual_seed(derive_seed(seed, path))
                fresh.reset_parameters()
            new = dict(fresh.named_parameters(recurse=False))
            for name, param in target.named_parameters(recurse=False):
                param.copy_(new[name].to(param.dtype))
            fresh_buffers = dict(fresh.named_buffers(recurse=False))
            for name, buffer in target.named_buffers(recurse=False):
                if name in fresh_buffers:
                    buffer.copy_(fresh_buffers[name].to(buffer.dtype))
        return
    with torch.no_grad():
        for name, param in target.named_parameters(recurse=False):
            values = param.detach().to("cpu", torch.float64).numpy()
            std = float(np.std(values)) if values.size else 0.0
            if not np.isfinite(std) or std == 0.0:
                std = 1.0
            generator = torch.Generator().manual_seed(derive_seed(seed, path, name))
            drawn = torch.randn(tuple(param.shape), generator=generator, dtype=torch.float64) * std
            param.copy_(drawn.to(param.dtype))


# ----------------------------------------------------------------------------- randomised models

_OWN = frozenset({"identity", "randomisation", "shift", "__dict__", "__class__", "_materialise_randomised"})
# (reading ``shift``, which a randomised copy never has, must not build it either)
_PENDING = "_randomised_pending"


class _Randomised:
    """Mixed into a copy of a model's class: ``identity`` from :class:`Randomisation`, and the copy
    built on the first read of any other attribute (see :func:`randomised_model`)."""

    randomisation: Randomisation

    @property
    def identity(self) -> str:
        return self.randomisation.identity

    def __getattribute__(self, name: str) -> Any:
        if name not in _OWN and _PENDING in object.__getattribute__(self, "__dict__"):
            object.__getattribute__(self, "_materialise_randomised")()
        return object.__getattribute__(self, name)

    def _materialise_randomised(self) -> None:
        state = object.__getattribute__(self, "__dict__")
        base = state.pop(_PENDING, None)
        if base is None:
            return
        r: Randomisation = state["randomisation"]
        full = copy.deepcopy(base)  # aliases of the module inside the model stay aliases
        randomise(full.module, upto=r.upto, blocks=r.blocks, seed=r.seed)
        state.update(full.__dict__)
        state["randomisation"] = r


_CLASSES: dict[type, type] = {}


def _randomised_class(cls: type) -> type:
    sub = _CLASSES.get(cls)
    if sub is None:
        sub = type(f"Randomised{cls.__name__}", (_Randomised, cls), {"__module__": cls.__module__})
        _CLASSES[cls] = sub
    return sub


def randomised_model(model: Any, *, upto: int, blocks: int = DEFAULT_BLOCKS, seed: int = 0) -> Any:
    """A copy of ``model`` (an object with a torch ``module`` and an ``identity``) with blocks
    1..``upto`` of its module re-initialised by :func:`randomise`, on the module's device; the
    original is left untouched. ``blocks`` is lowered to the number of blocks the module has.
    The copy has ``randomisation`` (a :class:`Randomisation`) and the identity it names."""
    groups = len(parameter_blocks(model.module, blocks))
    if not 0 <= upto <= groups:
        raise ValueError(f"upto must be in [0, {groups}] (the model has {groups} blocks), got {upto}")
    if isinstance(model, _Randomised):
        raise ValueError("randomised_model: the model is already a randomised copy")
    out = object.__new__(_randomised_class(type(model)))
    state = object.__getattribute__(out, "__dict__")
    state["randomisation"] = Randomisation(base=str(model.identity), upto=upto, blocks=groups, seed=int(seed))
    state[_PENDING] = model
    return out


# ----------------------------------------------------------------------------- shifted models


@dataclass(frozen=True)
class Shift:
    """What a shifted model is (the metric ``input_invariance``, Kindermans et al. 2017): the
    identity of the model it was copied from (``base``) and the constant ``shift`` (normalised
    input units) its input layer absorbs (:func:`shift_absorbed`)."""

    base: str
    shift: float

    @property
    def identity(self) -> str:
        """The shifted model's identity (keys the explanation cache; never the base's): the shift
        written with ``:g`` when that reads back exactly, else in full (``repr``)."""
        text = f"{self.shift:g}"
        if float(text) != self.shift:
            text = repr(float(self.shift))
        return f"{self.base}~shifted({text})"


class SurgeryUnsupported(ValueError):
    """The model's input layer cannot absorb a constant input shift in its bias."""


def shift_absorbed(model: Any, shift: float) -> Any:
    """A deep copy of ``model`` whose input layer absorbs a constant input shift ``shift``
    (Kindermans et al. 2017): with the copy f', f'(x + shift) = f(x). The input layer is the
    first module that owns parameters (registration order); its bias becomes b - shift W 1
    (a bias is added when it has none), and a zero-padded convolution pads with ``shift``
    instead (so the padded border is shifted too). Supported: ``nn.Linear`` and ``nn.Conv2d``
    with zero padding (a number per side, or a ``static_padding`` ``ZeroPad2d`` as in
    efficientnet-pytorch); anything else raises :class:`SurgeryUnsupported` with the reason.
    The copy's ``shift`` is its :class:`Shift` and its ``identity`` that one's (the worker side of
    an executor rebuilds the same copy from it)."""
    owners = parameter_modules(model.module)
    if not owners:
        raise SurgeryUnsupported("the model has no parameters")
    copy_ = copy.deepcopy(model)
    modules = dict(copy_.module.named_modules())
    path, _ = owners[-1]
    first = modules[path]
    with torch.no_grad():
        if isinstance(first, nn.Linear):
            absorbed = shift * first.weight.sum(dim=1)
        elif isinstance(first, nn.Conv2d):
            if first.padding_mode != "zeros" or isinstance(first.padding, str):
                raise SurgeryUnsupported(f"input layer {path!r} pads with {first.padding_mode}/{first.padding!r}")
            static = getattr(first, "static_padding", None)
            if isinstance(static, nn.ZeroPad2d):
                first.static_padding = nn.ConstantPad2d(static.padding, shift)
            elif static is not None and not isinstance(static, nn.Identity):
                raise SurgeryUnsupported(f"input layer {path!r} pads with {type(static).__name__}")
            ph, pw = first.padding
            if ph or pw:
                first.padding = (0, 0)
                wrapped = nn.Sequential(nn.ConstantPad2d((pw, pw, ph, ph), shift), first)
                parent_path, _, leaf = path.rpartition(".")
                parent = modules[parent_path] if parent_path else copy_.module
                if not parent_path and first is copy_.module:
                    raise SurgeryUnsupported("the model is a single convolution")
                setattr(parent, leaf, wrapped)
            absorbed = shift * first.weight.sum(dim=(1, 2, 3))
        else:
            raise SurgeryUnsupported(f"input layer {path!r} is a {type(first).__name__} (not Linear or Conv2d)")
        if first.bias is None:
            first.bias = nn.Parameter(-absorbed.clone(), requires_grad=False)
        else:
            first.bias.copy_(first.bias - absorbed)
    described = Shift(base=str(model.identity), shift=float(shift))
    cls = type(copy_)
    identity = described.identity
    try:
        copy_.identity = identity  # type: ignore[misc]
    except AttributeError:  # a read-only property: a subclass that names the shifted model
        copy_.__class__ = type(f"Shifted{cls.__name__}", (cls,), {"identity": property(lambda self: identity)})
    copy_.shift = described  # type: ignore[attr-defined]
    return copy_
