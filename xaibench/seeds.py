"""Deterministic seeds derived from a run seed and stable keys (e.g. sample ids).

Deriving per-sample seeds from ``(seed, sample id)`` makes every number independent
of batch composition and order, so ``--seed`` reproduces results exactly.
"""

from __future__ import annotations

import hashlib

import numpy as np


def derive_seed(seed: int, *keys: object) -> int:
    """A 63-bit seed from a base seed and any keys (stable across processes)."""
    text = "\x1f".join([str(seed), *map(str, keys)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


def rng_for(seed: int, *keys: object) -> np.random.Generator:
    return np.random.default_rng(derive_seed(seed, *keys))


def sample_rng(seed: int, sample_id: str, purpose: str) -> np.random.Generator:
    """A generator for one sample and one purpose (e.g. ``"road/uniform"``): the run seed's low 32
    bits and four words of sha256(sample id, purpose) seed a ``SeedSequence``. Used by the metrics'
    perturbations; its streams are fixed by the recorded results, so it keeps its own formula."""
    digest = hashlib.sha256(f"{sample_id}\x00{purpose}".encode()).digest()
    words = [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4)]
    return np.random.default_rng(np.random.SeedSequence([int(seed) & 0xFFFFFFFF, *words]))
