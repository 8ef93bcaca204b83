"""Weights that xaibench trains on first use: cache location, loading, saving and digests.

Shared by every trained-on-first-use model (``shapes-cnn``, ``shapes-cbm``) and the embedding
cache, so they agree on where the cache lives and how an entry is checked.

Cached weights are data: safetensors files (no pickle), each with a tag beside it
(``<file>.tag``: HMAC under the ``.key`` of its folder, :mod:`xaibench.integrity`) written with it.
A file whose tag is missing or wrong is named in one line on stderr and retrained.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
from torch import nn

from xaibench import integrity


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
    """The cached state if its tag matches and it has ``reference``'s names and shapes, else
    ``None`` (retrain). Read with safetensors; a missing, unreadable or stale file is a miss, and
    one whose tag is missing or wrong is named in one line on stderr too.
    """
    from safetensors.torch import load

    try:
        raw = path.read_bytes()
    except OSError:
        return None
    if not integrity.file_verified(path, raw, integrity.secret(path.parent)):
        print(f"{path}: cached weights fail their integrity check; retraining them", file=sys.stderr)
        return None
    try:
        state = load(raw)
    except Exception:  # noqa: BLE001 - an unreadable cache entry is retrained
        return None
    if not isinstance(state, dict) or set(state) != set(reference):
        return None
    if not all(isinstance(v, torch.Tensor) and v.shape == reference[k].shape for k, v in state.items()):
        return None
    return state


def load_or_train(net: nn.Module, path: Path, train: Callable[[], dict[str, torch.Tensor]]) -> bool:
    """Load the cached weights at ``path`` into ``net``, else ``train()`` them and cache them.

    Leaves ``net`` in eval mode. Returns whether it trained now (a cache miss).
    """
    state = load_state(path, net.state_dict())
    trained_now = state is None
    if state is None:
        state = train()
        save_state(state, path)
    net.load_state_dict(state)
    net.eval()
    return trained_now


def save_state(state: dict[str, torch.Tensor], path: Path) -> None:
    """Write a state dict as safetensors, atomically, and its tag (the writer holds the key)."""
    from safetensors.torch import save

    raw = save({k: v.detach().cpu().contiguous() for k, v in state.items()})
    key = integrity.secret(path.parent, create=True)
    assert key is not None
    integrity.write_tagged(path, raw, key)


def normalised_batch(images: np.ndarray, mean: Sequence[float], std: Sequence[float]) -> torch.Tensor:
    """``(N, H, W, 3)`` [0, 1] arrays to normalised ``(N, 3, H, W)`` float32 tensors."""
    x = torch.from_numpy(np.ascontiguousarray(images, dtype=np.float32)).permute(0, 3, 1, 2)
    m = torch.tensor(mean, dtype=torch.float32).view(1, 3, 1, 1)
    s = torch.tensor(std, dtype=torch.float32).view(1, 3, 1, 1)
    return ((x - m) / s).contiguous()


StepLoss = Callable[[torch.Tensor], tuple[torch.Tensor, dict[str, float]]]
"""``step(indices) -> (loss, sums)``: the loss of one mini-batch and per-batch sums to report."""


class FitConfig(Protocol):
    """The training settings :func:`fit` reads (both models' ``TrainConfig`` dataclasses have them)."""

    n_train: int
    epochs: int
    batch_size: int
    lr: float
    weight_decay: float
    seed: int


def fit(
    net: nn.Module,
    config: FitConfig,
    step: StepLoss,
    log: Callable[[int, dict[str, float]], None] | None = None,
) -> None:
    """The one training loop of the trained-on-first-use models.

    AdamW with a one-cycle schedule (peak ``lr``, 25 % warm-up), mini-batches in a seeded
    random order per epoch, ``net.train()`` during and ``net.eval()`` after. Deterministic
    under :func:`deterministic` for a given seed. ``log(epoch, sums)`` gets each epoch's
    sums of the values ``step`` reports (``epoch`` counts from 1).
    """
    n_train, batch_size, epochs = config.n_train, config.batch_size, config.epochs
    lr = config.lr
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=config.weight_decay)
    steps_per_epoch = (n_train + batch_size - 1) // batch_size
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=epochs * steps_per_epoch, pct_start=0.25)
    gen = torch.Generator().manual_seed(config.seed)
    net.train()
    for epoch in range(epochs):
        order = torch.randperm(n_train, generator=gen)
        sums: dict[str, float] = {}
        for start in range(0, n_train, batch_size):
            loss, values = step(order[start : start + batch_size])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            for key, value in values.items():
                sums[key] = sums.get(key, 0.0) + value
        if log is not None:
            log(epoch + 1, sums)
    net.eval()
