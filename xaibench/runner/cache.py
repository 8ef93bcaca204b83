"""Content-addressed explanation cache (DESIGN 6).

A key covers the explainer (name, version, parameters), the model identity, the
sample id and the sample's content digest, and the seed: an entry can never be served
for another model or other parameters (lm-evaluation-harness issue 4063).
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from xaibench.files import write_bytes_atomic


def digest(obj: Any) -> str:
    """sha256 of a canonical JSON rendering."""
    text = json.dumps(obj, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def image_digest(image: np.ndarray) -> str:
    arr = np.ascontiguousarray(image)
    h = hashlib.sha256(str((arr.shape, arr.dtype.str)).encode())
    h.update(arr.tobytes())
    return h.hexdigest()[:20]


def explanation_key(
    *,
    explainer: str,
    version: str,
    params: dict[str, Any],
    model_identity: str,
    sample_id: str,
    sample_digest: str,
    seed: int,
) -> str:
    return digest(
        {
            "explainer": explainer,
            "version": version,
            "params": params,
            "model": model_identity,
            "sample": sample_id,
            "content": sample_digest,
            "seed": seed,
        }
    )


class ExplanationCache:
    """Saliency maps (``.npy``) and concept weights (``.json``) under ``root``, by key."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: str, suffix: str) -> Path:
        return self.root / key[:2] / f"{key}{suffix}"

    def get(self, key: str) -> np.ndarray | dict[str, float] | None:
        npy = self._path(key, ".npy")
        if npy.exists():
            try:
                return np.load(npy, allow_pickle=False)
            except (OSError, ValueError):
                npy.unlink(missing_ok=True)  # a torn entry is a miss
                return None
        js = self._path(key, ".json")
        if js.exists():
            try:
                return json.loads(js.read_text())
            except (OSError, ValueError):
                js.unlink(missing_ok=True)
        return None

    def put(self, key: str, value: np.ndarray | dict[str, float]) -> None:
        if isinstance(value, dict):
            write_bytes_atomic(self._path(key, ".json"), json.dumps(value, sort_keys=True).encode())
            return
        buf = io.BytesIO()
        np.save(buf, np.asarray(value, dtype=np.float32), allow_pickle=False)
        write_bytes_atomic(self._path(key, ".npy"), buf.getvalue())
