"""Any timm image classifier as an xaibench model.

Parameters:
- ``arch``: a timm model name, optionally with a pretrained tag (``"resnet50"``,
  ``"resnet50.a1_in1k"``).
- ``pretrained`` (default True): load timm's pretrained weights through timm's own
  loader (Hugging Face Hub cache, or a download where there is network). When
  they are not available offline (``HF_HUB_OFFLINE=1`` or no network) this fails
  at once with a one-line :class:`WeightsUnavailableError` that says to pass
  ``checkpoint=PATH``.
- ``checkpoint``: a local state dict for ``arch`` (``.pth``/``.pt``/``.bin``/``.ckpt`` read with
  ``torch.load(..., weights_only=True)``, or ``.safetensors``); never downloads. A dict that wraps
  the state dict under ``state_dict``, ``model`` or ``model_state_dict`` is unwrapped, and the
  ``module.``/``_orig_mod.`` prefixes of DDP and ``torch.compile`` are stripped (timm's
  ``clean_state_dict``). The load is strict: every tensor of the network comes from the file,
  so the model has one identity in every process. ``num_classes`` is read from the classifier
  weight (timm's ``pretrained_cfg["classifier"]``, e.g. ``fc.weight`` of a ResNet) when not
  given; a checkpoint that does not fit (missing or unexpected keys, other shapes, another
  ``num_classes``, a stem that is not RGB) fails with one line naming the keys and the fix
  (e.g. another arch of the same family whose keys and shapes it matches).
- ``pretrained=False`` without ``checkpoint``: random weights, initialised under
  ``seed`` (default 0) so they are the same on every run (useful for tests).
- ``num_classes``: the classifier size; with a checkpoint, read from it when not given (and
  checked when given). With timm's pretrained weights and a ``num_classes`` other than theirs,
  the new classifier is initialised under ``seed`` (``weights_source`` records it), so it is
  the same in every process.
- ``target_layers``: dotted module paths for CAM methods; default: the last
  feature stage timm declares (``feature_info[-1]``), e.g. ``layer4`` for ResNets.
  Transformers (ViT) give token maps there; CAM explainers need a reshape for them.

Mean, std and input size come from the model's timm pretrained config. Identity:
``timm:<arch>@<12 hex of a SHA-256 over the state dict>`` (names, dtypes, shapes, bytes).
"""

from __future__ import annotations

import difflib
import hashlib
import os
import pickle
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn

from xaibench.api import Model
from xaibench.errors import XaibenchError

__all__ = [
    "CheckpointError",
    "TimmModel",
    "WeightsUnavailableError",
    "hf_hub_offline",
    "read_checkpoint",
    "state_dict_digest",
]

_TRUE = {"1", "on", "yes", "true"}
_TORCH_SUFFIXES = (".pth", ".pt", ".bin", ".ckpt")
_WRAPPERS = ("state_dict", "model", "model_state_dict")
_SHOWN_KEYS = 3  # keys named in a mismatch message
_FAMILY_CANDIDATES = 12  # archs of the same family compared against a checkpoint that does not fit


class WeightsUnavailableError(XaibenchError, RuntimeError):
    """Pretrained weights cannot be had without a download that is not possible here."""


class CheckpointError(XaibenchError, ValueError):
    """A checkpoint file that cannot be read, or does not fit the architecture (one line)."""


def hf_hub_offline() -> bool:
    """Whether the Hugging Face Hub is in offline mode (env ``HF_HUB_OFFLINE``)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE


def state_dict_digest(module: nn.Module) -> str:
    """Hex SHA-256 over a module's state dict: sorted names, dtypes, shapes and raw bytes."""
    h = hashlib.sha256()
    for key, tensor in sorted(module.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        h.update(f"{key}|{t.dtype}|{tuple(t.shape)}\0".encode())
        if t.numel():
            h.update(t.view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _timm() -> Any:
    try:
        import timm
    except ImportError as exc:
        raise XaibenchError("the timm model plugin needs the package timm: pip install timm") from exc
    return timm


def _as_bool(value: Any, name: str) -> bool:
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in {"0", "off", "no", "false"}:
            return False
        raise ValueError(f"timm model: parameter {name!r} must be true or false, got {value!r}")
    return bool(value)


def _offline_message(arch: str, detail: str) -> str:
    return (
        f"timm model {arch!r}: pretrained weights are not available offline ({detail}); "
        f"download them where there is network and pass checkpoint=PATH to a local state dict "
        f"(.pth/.safetensors), or use pretrained=False for random weights"
    )


def _is_network_error(exc: BaseException) -> bool:
    mod = type(exc).__module__.split(".")[0]
    return isinstance(exc, OSError) or mod in {
        "huggingface_hub",
        "requests",
        "urllib3",
        "httpx",
        "httpcore",
    }


def _hf_cached(hf_hub_id: str, filename: str | None) -> bool:
    """Whether the Hub cache already holds a weights file timm would load for ``hf_hub_id``."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False
    repo_id, _, revision = hf_hub_id.partition("@")
    names = {"model.safetensors", "pytorch_model.bin", "open_clip_model.safetensors", "open_clip_pytorch_model.bin"}
    if filename:
        names |= {filename, filename.rsplit(".", 1)[0] + ".safetensors"}
    return any(
        isinstance(try_to_load_from_cache(repo_id, name, revision=revision or None), str) for name in sorted(names)
    )


def _url_cached(url: str) -> bool:
    name = os.path.basename(url.split("?")[0])
    return bool(name) and (Path(torch.hub.get_dir()) / "checkpoints" / name).is_file()


@contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """Torch's CPU generator seeded with ``seed`` inside, and restored afterwards."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def _as_count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().isdigit():
        raise ValueError(f"timm model: parameter {name!r} must be a whole number >= 0, got {value!r}")
    return int(value)


def _names(value: Any) -> tuple[str, ...]:
    """A pretrained cfg's ``classifier``/``first_conv`` entry as a tuple of module names."""
    if isinstance(value, str):
        return (value,)
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, (list, tuple)) else ()


def _pretrained_cfg(arch: str) -> dict[str, Any]:
    """timm's pretrained cfg of ``arch`` (``{}`` when it has none)."""
    from timm.models import get_pretrained_cfg

    try:
        found = get_pretrained_cfg(arch)
    except RuntimeError as exc:  # e.g. an unknown pretrained tag
        raise ValueError(f"timm model {arch!r}: {exc}") from exc
    return found.to_dict() if found is not None else {}


def _some(keys: Sequence[str]) -> str:
    shown = ", ".join(keys[:_SHOWN_KEYS])
    return f"{shown}, ... ({len(keys) - _SHOWN_KEYS} more)" if len(keys) > _SHOWN_KEYS else shown


def _shape(shape: tuple[int, ...]) -> str:
    return "x".join(str(n) for n in shape) or "scalar"


def read_checkpoint(path: Path) -> dict[str, torch.Tensor]:
    """The state dict in a local checkpoint file, on the CPU.

    ``.safetensors`` is read with safetensors; ``.pth``/``.pt``/``.bin``/``.ckpt`` with
    ``torch.load(..., weights_only=True)`` (no code in the file runs). A dict that wraps the
    state dict under ``state_dict``, ``model`` or ``model_state_dict`` is unwrapped (the first
    present; EMA copies are not used), then timm's ``clean_state_dict`` strips the ``module.``
    (DDP) and ``_orig_mod.`` (``torch.compile``) prefixes. Raises :class:`CheckpointError`.
    """
    suffix = path.suffix.lower()
    try:
        if suffix == ".safetensors":
            from safetensors.torch import load_file

            loaded: Any = load_file(str(path), device="cpu")
        elif suffix in _TORCH_SUFFIXES:
            loaded = torch.load(path, map_location="cpu", weights_only=True)
        else:
            raise CheckpointError(
                f"checkpoint {path}: unknown format {suffix or '(no suffix)'!r}; "
                f"give a {'/'.join(_TORCH_SUFFIXES)} or .safetensors state dict"
            )
    except CheckpointError:
        raise
    except pickle.UnpicklingError as exc:
        found = re.search(r"GLOBAL ([\w.]+)", str(exc))
        if found is None:  # not a pickle at all
            raise CheckpointError(f"checkpoint {path}: cannot read it (not a torch or safetensors file)") from exc
        raise CheckpointError(
            f"checkpoint {path}: it holds a pickled {found.group(1)}, not only tensors "
            f"(torch.load(weights_only=True) refuses it); save model.state_dict() instead"
        ) from exc
    except Exception as exc:
        first = re.sub(r"\x1b\[[0-9;]*m", "", (str(exc).strip().splitlines() or [""])[0])[:200]
        raise CheckpointError(f"checkpoint {path}: cannot read it ({type(exc).__name__}: {first})") from exc
    state = loaded
    if isinstance(state, Mapping) and not all(isinstance(v, torch.Tensor) for v in state.values()):
        state = next((state[k] for k in _WRAPPERS if isinstance(state.get(k), Mapping)), state)
    if not isinstance(state, Mapping):
        why: str | None = f"it holds a {type(state).__name__}"
    else:
        why = next(
            (f"{k!r} holds a {type(v).__name__}" for k, v in state.items() if not isinstance(v, torch.Tensor)), None
        )
        why = why or (None if state else "it is empty")
    if why is not None:
        raise CheckpointError(
            f"checkpoint {path}: not a state dict of tensors ({why}); a dict of tensors is expected, "
            f"or one under {', '.join(repr(k) for k in _WRAPPERS)}"
        )
    from timm.models import clean_state_dict

    return dict(clean_state_dict(dict(state)))


def _family_fits(
    timm: Any, base: str, found: dict[str, tuple[int, ...]], head_keys: set[str], kwargs: dict[str, Any]
) -> list[str]:
    """Other archs of ``base``'s family (its name with other numbers: ``resnet18`` ->
    ``resnet34``, ``resnet50``, ...) whose state dict has the checkpoint's keys and shapes (the
    classifier's shape aside). Built on the meta device: no memory, well under a second each."""
    pattern = re.sub(r"\d+", "#", base)
    candidates = [n for n in timm.list_models() if n != base and re.sub(r"\d+", "#", n) == pattern]
    fits = []
    for name in candidates[:_FAMILY_CANDIDATES]:
        try:
            with torch.random.fork_rng(devices=[]), torch.device("meta"):
                net = timm.create_model(name, pretrained=False, **kwargs)
        except Exception:  # noqa: BLE001 - a candidate that cannot be built is no suggestion
            continue
        shapes = {k: tuple(v.shape) for k, v in net.state_dict().items()}
        if shapes.keys() == found.keys() and all(shapes[k] == found[k] for k in shapes if k not in head_keys):
            fits.append(name)
    return fits


class TimmModel(Model):
    """A timm classifier (pretrained, from a local checkpoint, or seeded random weights)."""

    name: ClassVar[str] = "timm"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = "Any timm classifier: arch=NAME, pretrained weights or checkpoint=PATH"
    licence: ClassVar[str] = "Apache-2.0 (timm); weights: see the model's pretrained cfg"

    def __init__(
        self,
        arch: str,
        pretrained: bool = True,
        checkpoint: str | os.PathLike[str] | None = None,
        target_layers: Sequence[str] | str | None = None,
        num_classes: int | None = None,
        seed: int = 0,
    ) -> None:
        if not isinstance(arch, str) or not arch.strip():
            raise ValueError("timm model: parameter 'arch' must be a timm model name such as 'resnet50'")
        pretrained = _as_bool(pretrained, "pretrained")
        timm = _timm()
        self.arch = arch.strip()
        base = self.arch.split(".")[0]
        if not timm.is_model(base):
            close = difflib.get_close_matches(base, timm.list_models(), n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise ValueError(f"unknown timm architecture {self.arch!r}{hint}")
        kwargs: dict[str, Any] = {}
        if num_classes is not None:
            kwargs["num_classes"] = _as_count(num_classes, "num_classes")
        seed = int(seed)

        self.checkpoint = Path(checkpoint).expanduser() if checkpoint is not None else None
        if self.checkpoint is not None:
            net = self._from_checkpoint(timm, kwargs, seed)
            self.weights_source = f"checkpoint:{self.checkpoint}"
        elif pretrained:
            net, head_initialised = self._from_pretrained(timm, kwargs, seed)
            self.weights_source = (
                f"pretrained, new classifier random(seed={seed})" if head_initialised else "pretrained"
            )
        else:
            with _seeded(seed):
                try:
                    net = timm.create_model(self.arch, pretrained=False, **kwargs)
                except RuntimeError as exc:  # e.g. an unknown pretrained tag
                    raise ValueError(f"timm model {self.arch!r}: {exc}") from exc
            self.weights_source = f"random(seed={seed})"

        self.module = net.eval()
        cfg = dict(getattr(net, "pretrained_cfg", None) or {})
        self.pretrained_cfg = cfg
        self.input_size = int(cfg.get("input_size", (3, 224, 224))[-1])
        self.mean = tuple(float(v) for v in cfg.get("mean", (0.485, 0.456, 0.406)))  # type: ignore[assignment]
        self.std = tuple(float(v) for v in cfg.get("std", (0.229, 0.224, 0.225)))  # type: ignore[assignment]
        self.label_names = self._label_names(timm, net)
        self.target_layers = self._target_layers(net, target_layers)
        self._identity: str | None = None

    # ------------------------------------------------------------------ loading

    def _from_checkpoint(self, timm: Any, kwargs: dict[str, Any], seed: int) -> nn.Module:
        """The network built under ``seed`` with every tensor of its state dict from the checkpoint
        (strict); ``num_classes`` read from the checkpoint's classifier when not in ``kwargs``."""
        path = self.checkpoint
        assert path is not None
        if not path.is_file():
            raise ValueError(f"{path}: checkpoint file not found")
        state = read_checkpoint(path)
        cfg = _pretrained_cfg(self.arch)
        classifiers = _names(cfg.get("classifier"))
        head = next((f"{c}.weight" for c in classifiers if f"{c}.weight" in state), None)
        if "num_classes" not in kwargs and head is not None and state[head].ndim >= 1:
            kwargs["num_classes"] = int(state[head].shape[0])
        for conv in _names(cfg.get("first_conv")):
            stem = state.get(f"{conv}.weight")
            if stem is not None and stem.ndim == 4 and stem.shape[1] != 3:
                raise CheckpointError(
                    f"checkpoint {path} does not fit timm {self.arch!r}: {conv}.weight takes {stem.shape[1]} "
                    f"input channels; xaibench feeds RGB images (3 channels)"
                )
        with _seeded(seed):
            try:
                net = timm.create_model(self.arch, pretrained=False, **kwargs)
            except RuntimeError as exc:  # e.g. an unknown pretrained tag
                raise ValueError(f"timm model {self.arch!r}: {exc}") from exc
        expected = {k: tuple(v.shape) for k, v in net.state_dict().items()}
        found = {k: tuple(v.shape) for k, v in state.items()}
        if expected != found:
            raise CheckpointError(self._mismatch(timm, path, expected, found, classifiers, kwargs, head))
        try:
            net.load_state_dict(state, strict=True)
        except (RuntimeError, TypeError) as exc:  # e.g. a dtype that cannot be copied
            first = str(exc).strip().splitlines()[0][:200]
            raise CheckpointError(f"checkpoint {path} does not load into timm {self.arch!r}: {first}") from exc
        return net

    def _mismatch(
        self,
        timm: Any,
        path: Path,
        expected: dict[str, tuple[int, ...]],
        found: dict[str, tuple[int, ...]],
        classifiers: Sequence[str],
        kwargs: dict[str, Any],
        head: str | None,
    ) -> str:
        """One line: why ``found`` (the checkpoint's names and shapes) does not fit ``expected``."""
        lead = f"checkpoint {path} does not fit timm {self.arch!r}"
        head_keys = {f"{c}.{p}" for c in classifiers for p in ("weight", "bias")}
        missing = [k for k in expected if k not in found]  # in the network's order
        unexpected = [k for k in found if k not in expected]  # in the checkpoint's order
        reshaped = [k for k in expected if k in found and expected[k] != found[k]]
        if not missing and not unexpected and reshaped and set(reshaped) <= head_keys and head in found:
            classes = found[head][0]
            return (
                f"{lead}: {classes} classes in {head} but num_classes={kwargs.get('num_classes')}; "
                f"drop num_classes or pass num_classes={classes}"
            )
        parts = []
        if unexpected:
            parts.append(f"unexpected keys {_some(unexpected)}")
        if missing:
            parts.append(f"missing keys {_some(missing)}")
        if reshaped:
            k = reshaped[0]
            more = f" and {len(reshaped) - 1} more" if len(reshaped) > 1 else ""
            parts.append(f"shapes differ at {k} (checkpoint {_shape(found[k])}, model {_shape(expected[k])}){more}")
        fits = _family_fits(timm, self.arch.split(".")[0], found, head_keys, kwargs)
        if fits:
            hint = f"is it a {' or '.join(fits)} checkpoint? pass arch={fits[0]}"
            if head in found and found[head][0] != kwargs.get("num_classes"):
                hint += f" and drop num_classes (it has {found[head][0]} classes)"
        else:
            hint = "pass the arch it was trained as"
        return f"{lead}: {'; '.join(parts)}: {hint}"

    def _from_pretrained(self, timm: Any, kwargs: dict[str, Any], seed: int) -> tuple[nn.Module, bool]:
        """timm's pretrained network, and whether its classifier was initialised here (under
        ``seed``: timm drops a pretrained classifier of another ``num_classes``)."""
        cfg = _pretrained_cfg(self.arch)
        if not cfg.get("hf_hub_id") and not cfg.get("url") and not cfg.get("file"):
            raise WeightsUnavailableError(
                f"timm model {self.arch!r} has no pretrained weights; pass checkpoint=PATH or pretrained=False"
            )
        if hf_hub_offline():
            # Refuse before building the network when nothing is cached (fast); URL sources go
            # through torch.hub, which ignores HF_HUB_OFFLINE, so they must be refused here too.
            hub_id, url = cfg.get("hf_hub_id"), cfg.get("url")
            cached = bool(cfg.get("file")) or (
                _hf_cached(hub_id, cfg.get("hf_hub_filename")) if hub_id else bool(url) and _url_cached(url)
            )
            if not cached:
                raise WeightsUnavailableError(
                    _offline_message(self.arch, "HF_HUB_OFFLINE=1 and not in the local cache")
                )
        head_initialised = "num_classes" in kwargs and kwargs["num_classes"] != cfg.get("num_classes")
        try:
            with _seeded(seed):
                return timm.create_model(self.arch, pretrained=True, **kwargs), head_initialised  # timm's loader
        except Exception as exc:
            if not _is_network_error(exc):
                raise
            detail = "HF_HUB_OFFLINE=1 and not in the local cache" if hf_hub_offline() else type(exc).__name__
            raise WeightsUnavailableError(_offline_message(self.arch, detail)) from None

    # ------------------------------------------------------------------ metadata

    @staticmethod
    def _label_names(timm: Any, net: nn.Module) -> tuple[str, ...]:
        n = int(getattr(net, "num_classes", 0) or 0)
        try:
            from timm.data import ImageNetInfo, infer_imagenet_subset

            subset = infer_imagenet_subset(net)
            if subset:
                names = tuple(ImageNetInfo(subset).label_descriptions())
                if len(names) == n:
                    return names
        except Exception:  # noqa: BLE001 - isolate plugin and user code failures
            pass
        return tuple(f"class_{i}" for i in range(n))

    @staticmethod
    def _target_layers(net: nn.Module, requested: Sequence[str] | str | None) -> tuple[str, ...]:
        modules = dict(net.named_modules())
        if requested is None:
            info = getattr(net, "feature_info", None) or []
            last = info[-1].get("module") if info else None
            return (last,) if last and last in modules else ()
        layers = (requested,) if isinstance(requested, str) else tuple(requested)
        for layer in layers:
            if layer not in modules:
                close = difflib.get_close_matches(layer, [k for k in modules if k], n=3, cutoff=0.6)
                hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
                raise ValueError(f"timm model: target layer {layer!r} is not a module of {type(net).__name__}{hint}")
        return layers

    @property
    def identity(self) -> str:
        if self._identity is None:
            self._identity = f"timm:{self.arch}@{state_dict_digest(self.module)[:12]}"
        return self._identity
