"""Weights that xaibench trains on first use: cache location, loading, saving and digests.

Shared by every trained-on-first-use model (``shapes-cnn``, ``shapes-cbm``) and the embedding
cache, so they agree on where the cache lives and how an entry is checked.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from xaibench.files import write_bytes_atomic


def default_cache_dir() -> Path:
    """``$XAIBENCH_CACHE``, else ``~/.cache/xaibench``."""
    return Path(os.environ.get("XAIBENCH_CACHE") or Path.home() / ".cache" / "xaibench")


def weights_digest(state: dict[str, torch.Tensor]) -> str:
    """sha256 over parameter names, shapes, dtypes and bytes, in sorted name order."""
    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().cpu().contiguous()
        h.update(f"{name}:{tuple(t.shape)}:{t.dtype}".encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


@contextmanager
def deterministic(threads: int) -> Iterator[None]:
    """Fixed thread count and deterministic torch algorithms, restored afterwards."""
    old_threads, old_det = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(old_det)
        torch.set_num_threads(old_threads)


def load_state(path: Path, reference: dict[str, torch.Tensor]) -> dict[str, torch.Tensor] | None:
    """The cached state if it matches ``reference``'s names and shapes, else ``None`` (retrain).

    Loaded with ``weights_only=True``; a missing, unreadable or stale file is a miss.
    """
    if not path.is_file():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 - an unreadable cache entry is retrained
        return None
    if not isinstance(state, dict) or set(state) != set(reference):
        return None
    if not all(isinstance(v, torch.Tensor) and v.shape == reference[k].shape for k, v in state.items()):
        return None
    return state


def save_state(state: dict[str, torch.Tensor], path: Path) -> None:
    """Write a state dict atomically (temporary file, fsync, rename)."""
    buf = io.BytesIO()
    torch.save(state, buf)
    write_bytes_atomic(path, buf.getvalue())
