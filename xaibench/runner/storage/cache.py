"""Content-addressed explanation cache (DESIGN 6).

A key covers the explainer (name, version, parameters), the model identity, the
sample id and the sample's content digest, and the seed: an entry can never be served
for another model or other parameters (lm-evaluation-harness issue 4063). The cache mixes in
the run's device, torch version and thread count, and checks every entry it reads, its bytes
first: each entry has a tag (``<entry>.tag``, :mod:`xaibench.integrity`) that :meth:`ExplanationCache.put`
writes in the runner, so an entry another process rewrote is a miss ("digest mismatch"), recomputed.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from xaibench import integrity
from xaibench.runner.cost import checked
from xaibench.safe_names import file_name


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
    """Saliency maps (``.npy``) and concept weights (``.json``) under ``root``, by key.

    ``scope`` (the device, torch version and thread count of the run, see
    :func:`xaibench.runner.records.runtime_key`) is mixed into every key: maps computed elsewhere
    are never served. Every hit is checked on every read: its bytes against the tag ``put`` wrote
    beside it (HMAC under the cache folder's key, :mod:`xaibench.integrity`; a missing or wrong
    tag is a "digest mismatch"), then its content: a saliency map must be a finite float32
    ``(H, W)`` array (of ``shape`` when the caller gives it), concept weights a non-empty dict of
    names to finite numbers. An entry that is empty, torn, unreadable or fails a check is a miss:
    it is deleted (the caller recomputes and stores it again) and counted in ``rejected`` by reason.
    """

    def __init__(self, root: Path, scope: Mapping[str, Any] | None = None) -> None:
        self.root = root
        self.scope = dict(scope) if scope else None
        self.rejected: Counter[str] = Counter()
        self._key: bytes | None = None

    def _full_key(self, key: str) -> str:
        return key if self.scope is None else digest([key, self.scope])

    def _path(self, key: str, suffix: str) -> Path:
        # keys are hex digests (their own file names); any other key is mapped, never a path
        name = file_name(self._full_key(key), kind="cache key")
        return self.root / name[:2] / f"{name}{suffix}"

    @property
    def n_rejected(self) -> int:
        return sum(self.rejected.values())

    def get(
        self, key: str, *, shape: tuple[int, int] | None = None, kind: str | None = None
    ) -> np.ndarray | dict[str, float] | None:
        """The valid entry under ``key``, else ``None`` (a miss). ``shape``: the ``(H, W)`` a saliency
        map must have; ``kind`` (``saliency`` or ``concept``): the kind of explanation expected."""
        for suffix, load, check in ((".npy", _load_npy, _check_map), (".json", _load_json, _check_concepts)):
            path = self._path(key, suffix)
            try:
                raw = path.read_bytes()
            except FileNotFoundError:
                continue
            except OSError as exc:
                self._reject(path, f"unreadable ({exc.strerror or exc})")
                continue
            wanted = "saliency" if suffix == ".npy" else "concept"
            if kind is not None and kind != wanted:
                reason: str | None = f"a {wanted} entry where a {kind} explanation was expected"
            elif not raw:
                reason = "empty file"
            elif not self._tag_matches(path, raw):
                reason = "digest mismatch"
            else:
                try:
                    value = load(raw)
                except Exception as exc:  # noqa: BLE001 - any unreadable entry is a miss
                    reason = f"unreadable ({type(exc).__name__})"
                else:
                    value, reason = check(value, shape)
                    if reason is None:
                        return value
            self._reject(path, reason or "invalid")
        return None

    def _secret(self, create: bool) -> bytes | None:
        if self._key is None:
            self._key = integrity.secret(self.root, create=create)
        return self._key

    def _tag_matches(self, path: Path, raw: bytes) -> bool:
        return integrity.file_verified(path, raw, self._secret(create=False))

    def _reject(self, path: Path, reason: str) -> None:
        self.rejected[reason] += 1
        for stale in (path, integrity.tag_path(path)):
            with contextlib.suppress(OSError):
                stale.unlink()

    def cost(self, key: str) -> dict[str, float] | None:
        """What computing the entry under ``key`` cost (:mod:`xaibench.runner.cost`), as
        :meth:`put` stored it beside the entry; ``None`` when none was stored or it fails its tag
        or its check (the entry itself stays valid: only its cost is unknown)."""
        path = self._path(key, ".cost.json")
        try:
            raw = path.read_bytes()
        except OSError:
            return None
        if not raw or not self._tag_matches(path, raw):
            return None
        try:
            return checked(json.loads(raw))
        except ValueError:
            return None

    def put(self, key: str, value: np.ndarray | dict[str, float], cost: Mapping[str, float] | None = None) -> None:
        """Store ``value`` under ``key``, with its tag (called in the runner, which holds the key);
        ``cost``: what computing it cost (this sample's share of its batch), stored beside it so a
        later run that reads the entry back reports the true cost."""
        secret = self._secret(create=True)
        assert secret is not None
        if cost is not None:
            integrity.write_tagged(
                self._path(key, ".cost.json"), json.dumps(dict(cost), sort_keys=True).encode(), secret
            )
        if isinstance(value, dict):
            path, raw = self._path(key, ".json"), json.dumps(value, sort_keys=True).encode()
        else:
            buf = io.BytesIO()
            np.save(buf, np.asarray(value, dtype=np.float32), allow_pickle=False)
            path, raw = self._path(key, ".npy"), buf.getvalue()
        integrity.write_tagged(path, raw, secret)


def _load_npy(raw: bytes) -> Any:
    return np.load(io.BytesIO(raw), allow_pickle=False)


def _load_json(raw: bytes) -> Any:
    return json.loads(raw)


def _check_map(value: Any, shape: tuple[int, int] | None) -> tuple[np.ndarray | None, str | None]:
    if not isinstance(value, np.ndarray):
        return None, "not an array"
    if value.dtype != np.float32:
        return None, f"dtype {value.dtype}, expected float32"
    if value.ndim != 2 or value.size == 0:
        return None, f"shape {value.shape}, expected a (H, W) map"
    if shape is not None and tuple(value.shape) != tuple(shape):
        return None, f"shape {value.shape}, expected {tuple(shape)}"
    if not np.isfinite(value).all():
        return None, "NaN or infinite values"
    return value, None


def _check_concepts(value: Any, shape: tuple[int, int] | None) -> tuple[dict[str, float] | None, str | None]:
    if not isinstance(value, dict) or not value:
        return None, "not a non-empty dict of concept weights"
    out: dict[str, float] = {}
    for name, weight in value.items():
        if not isinstance(weight, int | float) or isinstance(weight, bool) or not math.isfinite(weight):
            return None, "a concept weight that is not a finite number"
        out[str(name)] = float(weight)
    return out, None
