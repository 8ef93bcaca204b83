"""Any timm image classifier as an xaibench model.

Parameters:
- ``arch``: a timm model name, optionally with a pretrained tag (``"resnet50"``,
  ``"resnet50.a1_in1k"``).
- ``pretrained`` (default True): load timm's pretrained weights through timm's own
  loader (Hugging Face Hub cache, or a download where there is network). When
  they are not available offline (``HF_HUB_OFFLINE=1`` or no network) this fails
  at once with a one-line :class:`WeightsUnavailableError` that says to pass
  ``checkpoint=PATH``.
- ``checkpoint``: a local ``.pth``/``.bin``/``.safetensors`` state dict for ``arch``;
  loaded through timm (its checkpoint filters apply), never downloads.
- ``pretrained=False`` without ``checkpoint``: random weights, initialised under
  ``seed`` (default 0) so they are the same on every run (useful for tests).
- ``num_classes``: override the classifier size (e.g. for a fine-tuned checkpoint).
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn

from xaibench.api import Model
from xaibench.errors import XaibenchError

__all__ = ["TimmModel", "WeightsUnavailableError", "hf_hub_offline", "state_dict_digest"]

_TRUE = {"1", "on", "yes", "true"}


class WeightsUnavailableError(XaibenchError, RuntimeError):
    """Pretrained weights cannot be had without a download that is not possible here."""


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
            kwargs["num_classes"] = int(num_classes)

        self.checkpoint = Path(checkpoint).expanduser() if checkpoint is not None else None
        if self.checkpoint is not None:
            net = self._from_checkpoint(timm, kwargs)
            self.weights_source = f"checkpoint:{self.checkpoint}"
        elif pretrained:
            net = self._from_pretrained(timm, kwargs)
            self.weights_source = "pretrained"
        else:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(int(seed))
                try:
                    net = timm.create_model(self.arch, pretrained=False, **kwargs)
                except RuntimeError as exc:  # e.g. an unknown pretrained tag
                    raise ValueError(f"timm model {self.arch!r}: {exc}") from exc
            self.weights_source = f"random(seed={int(seed)})"

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

    def _from_checkpoint(self, timm: Any, kwargs: dict[str, Any]) -> nn.Module:
        path = self.checkpoint
        assert path is not None
        if not path.is_file():
            raise ValueError(f"{path}: checkpoint file not found")
        try:
            return timm.create_model(self.arch, pretrained=True, pretrained_cfg_overlay={"file": str(path)}, **kwargs)
        except Exception as exc:
            first = " ".join(line.strip() for line in str(exc).strip().splitlines()[:2])[:300]
            raise ValueError(
                f"{path}: cannot load as timm {self.arch!r} weights ({type(exc).__name__}: {first})"
            ) from exc

    def _from_pretrained(self, timm: Any, kwargs: dict[str, Any]) -> nn.Module:
        from timm.models import get_pretrained_cfg

        try:
            found = get_pretrained_cfg(self.arch)
        except RuntimeError as exc:  # e.g. an unknown pretrained tag
            raise ValueError(f"timm model {self.arch!r}: {exc}") from exc
        cfg = found.to_dict() if found is not None else {}
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
        try:
            return timm.create_model(self.arch, pretrained=True, **kwargs)  # timm's real loader
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
