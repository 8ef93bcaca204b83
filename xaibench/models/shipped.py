"""Reference weights shipped with the package: the embedded suite's trained models, as data.

The synthetic models (``shapes-cnn`` on ``shapes`` and ``shapes-shortcut``, ``shapes-cbm``, and
``shapes-vit``, the official suite's second architecture) are small networks that xaibench can
train itself, but training depends on the CPU's kernels: two x86-64 CPUs train two different
networks from the same seed (DESIGN 6). So the weights trained once are shipped in
``xaibench/data/models/`` as safetensors files, with a manifest (``weights.json``) that records,
per model, the file's sha256, the weights' digest (:func:`xaibench.models.trained.weights_digest`),
the training configuration's cache key, the held-out accuracy and how they were made. Loading
checks both digests, so a changed file is an error rather than another model.

Training stays an explicit choice (the models' ``weights="train"`` parameter).
``python -m xaibench.models.ship`` retrains every shipped model and rewrites the files and the
manifest (a maintainer's command: it changes the default suite's numbers).
"""

from __future__ import annotations

import hashlib
import json
import platform
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from xaibench.files import write_bytes_atomic, write_json_atomic
from xaibench.models.trained import weights_digest

__all__ = [
    "MANIFEST",
    "WEIGHTS_CHOICES",
    "ShippedWeights",
    "load_shipped",
    "manifest",
    "shipped_dir",
    "write_shipped",
]

MANIFEST = "weights.json"
WEIGHTS_CHOICES = ("shipped", "train")
"""A trained-on-first-use model's ``weights`` parameter: the package's reference weights (default,
the same on every machine) or weights trained here (cached; they depend on the CPU's kernels)."""


def shipped_dir() -> Path:
    """Folder of the shipped model weights inside the package."""
    return Path(__file__).resolve().parent.parent / "data" / "models"


def manifest(folder: Path | None = None) -> dict[str, dict[str, Any]]:
    """The manifest: ``{model key: entry}``, e.g. ``"shapes-cnn/shapes"``; ``{}`` when absent."""
    path = (folder or shipped_dir()) / MANIFEST
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return dict(data.get("models", {}))


@dataclass(frozen=True)
class ShippedWeights:
    """One model's shipped weights, checked against the manifest."""

    key: str
    state: dict[str, torch.Tensor]
    digest: str
    """sha256 of the weights (:func:`weights_digest`), as the manifest records it."""
    entry: dict[str, Any]
    metadata: dict[str, str]
    """The text kept in the file's header (``write_shipped``'s ``metadata``, the model key ...)."""


def load_shipped(key: str, train_key: str, folder: Path | None = None) -> ShippedWeights:
    """Load the shipped weights of ``key`` (e.g. ``"shapes-cnn/shapes"``).

    ``train_key`` is the model's training-configuration cache key: shipped weights are only for
    the configuration they were trained with. Raises ``ValueError`` (one line naming the file and
    the problem) when the weights are missing, were made for another configuration, or their file
    or weights digest differs from the manifest.
    """
    from safetensors.torch import load

    folder = folder or shipped_dir()
    entry = manifest(folder).get(key)
    if entry is None:
        raise ValueError(f"{folder / MANIFEST}: no shipped weights for {key}; use weights='train'")
    if entry.get("train_key") != train_key:
        raise ValueError(
            f"{key}: the shipped weights were trained with configuration {entry.get('train_key')}, not "
            f"{train_key}; use weights='train' for another training configuration"
        )
    path = folder / str(entry["file"])
    if not path.is_file():
        raise ValueError(f"{path}: shipped weights of {key} are missing (reinstall xaibench)")
    data = path.read_bytes()  # read once: checked, then parsed from these bytes
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise ValueError(f"{path}: sha256 differs from {MANIFEST}; the shipped weights of {key} were changed")
    state = load(data)
    digest = weights_digest(state)
    if digest != entry["weights_sha256"]:
        raise ValueError(f"{path}: weights digest differs from {MANIFEST}")
    (size,) = struct.unpack("<Q", data[:8])  # the safetensors header: its length, then JSON
    metadata = dict(json.loads(data[8 : 8 + size]).get("__metadata__", {}))
    return ShippedWeights(key, state, digest, entry, metadata)


def write_shipped(
    key: str,
    state: dict[str, torch.Tensor],
    *,
    train_key: str,
    accuracy: dict[str, float],
    command: str,
    folder: Path | None = None,
    metadata: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Write one model's weights (safetensors, atomically) and its manifest entry; returns the
    entry. ``metadata``: more text kept in the file's header (a text model's vocabulary), covered
    by the file's sha256."""
    from safetensors.torch import save

    folder = folder or shipped_dir()
    name = key.replace("/", "-") + ".safetensors"
    tensors = {k: v.detach().cpu().contiguous() for k, v in state.items()}
    data = save(tensors, metadata={**(metadata or {}), "model": key, "train_key": train_key})
    write_bytes_atomic(folder / name, data)
    entry = {
        "file": name,
        "sha256": hashlib.sha256(data).hexdigest(),
        "weights_sha256": weights_digest(tensors),
        "train_key": train_key,
        "accuracy": accuracy,
        "made_with": {
            "command": command,
            "torch": torch.__version__,
            "machine": platform.machine(),
            "processor": _cpu_name(),
            "aten_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        },
    }
    models = manifest(folder)
    models[key] = entry
    write_json_atomic(
        folder / MANIFEST,
        {"format": "xaibench.shipped-weights/1", "models": dict(sorted(models.items()))},
    )
    return entry


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
