"""Submission files as read: each file opened once per build, the typed :class:`Submission`,
and the per-sample values of either format version (:func:`per_sample`, :func:`metric_values`,
:func:`compact_track`: see "per-sample values" below).

``xaibench leaderboard build`` validates every submission file, ranks them and builds the site;
validation, loading and the site's copy and digest of each file all take its bytes from
:func:`read_bytes`, so each file is opened once. What was read is kept, keyed by the file's path
and identity (device, inode, size, modification and change times in ns, from ``fstat`` of the
file as it was opened), and handed out again while ``os.stat`` of the path gives the same
identity: a file rewritten, replaced, touched or chmod-ed since is read again. Only the files of
the folder read last are kept (:func:`keep_only`), so what is held is one folder's submissions.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from xaibench.publish.shapes import SubmissionData

_Identity = tuple[int, int, int, int, int]


@dataclass(frozen=True)
class Submission:
    """One submission: the file it came from, its data, and the bytes read."""

    path: Path
    data: SubmissionData
    raw: bytes | None = field(default=None, repr=False, compare=False)
    """The file's bytes as read (the site copies and hashes them); None for a submission made in
    memory, or read by a build that writes no site (then :attr:`sha256` keeps their digest)."""
    sha256: str | None = field(default=None, repr=False, compare=False)
    """The sha256 of the bytes read, where they were not kept (see :meth:`bytes_sha256`)."""

    def bytes_sha256(self) -> str:
        """The sha256 (hex) of the file's bytes as read: kept, or from the bytes kept, or read now."""
        if self.sha256 is not None:
            return self.sha256
        return hashlib.sha256(self.raw if self.raw is not None else read_bytes(self.path)).hexdigest()

    @property
    def key(self) -> str:
        """The explainer's key on the leaderboard: the file's stem (``name`` or ``name@digest``)."""
        return self.path.stem

    @classmethod
    def of(cls, item: Submission | tuple[Path, SubmissionData]) -> Submission:
        """A submission from itself or from a ``(path, data)`` pair (one made in memory)."""
        if isinstance(item, Submission):
            return item
        path, data = item
        return cls(path, data)


@dataclass(frozen=True)
class _Kept:
    identity: _Identity
    raw: bytes


_kept: dict[Path, _Kept] = {}
_lock = threading.Lock()


def _identity(st: os.stat_result) -> _Identity:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def read_bytes(path: Path) -> bytes:
    """The bytes of ``path``: those read before while the file is unchanged, else read now
    (:class:`OSError` as ``open`` raises it)."""
    key = path.absolute()
    with _lock:
        kept = _kept.get(key)
    if kept is not None:
        try:
            if _identity(os.stat(key)) == kept.identity:
                return kept.raw
        except OSError:
            pass
    with open(key, "rb") as fh:
        identity = _identity(os.fstat(fh.fileno()))
        raw = fh.read()
    with _lock:
        if any(p.parent != key.parent for p in _kept):
            _kept.clear()
        _kept[key] = _Kept(identity, raw)
    return raw


def keep_only(paths: list[Path]) -> None:
    """Forget what was read of every file but ``paths`` (a folder's files, just read)."""
    wanted = {p.absolute() for p in paths}
    with _lock:
        for key in [k for k in _kept if k not in wanted]:
            del _kept[key]


def forget(path: Path) -> None:
    """Forget the bytes read of ``path`` (a build that keeps no bytes: about 8 MB a large file)."""
    with _lock:
        _kept.pop(path.absolute(), None)


def submission_text(raw: bytes) -> str:
    """The text of a submission file, as ``Path.read_text(encoding="utf-8")`` gives it: UTF-8
    (:class:`UnicodeDecodeError` otherwise), with ``\\r\\n`` and ``\\r`` read as ``\\n``."""
    return raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


# ----------------------------------------------------------------------------- per-sample values
#
# ``xaibench.submission/1`` keeps a metric's per-sample values as a map ``samples``: sample id ->
# value (``null`` for n/a). ``xaibench.submission/2`` keeps, per track, one list ``sample_ids``
# and, per metric, ``values`` aligned with it: the base64 of the values as little-endian IEEE-754
# float64, NaN for n/a (the exact bits the run computed, 10.7 characters a value), or a JSON
# array of numbers and ``null`` (n/a), or ``null`` alone: every sample n/a (an explainer that does
# not apply to the track says so once, in ``na_reasons``, not 256 times). A metric whose samples
# differ from the track's carries its own ``sample_ids``. Readers take either version through
# :func:`per_sample` / :func:`metric_values`.

SCHEMA_V1 = "xaibench.submission/1"
SCHEMA_V2 = "xaibench.submission/2"


def encode_values(values: Sequence[float | None]) -> str:
    """The base64 ``values`` of ``/2``: little-endian float64, NaN for ``None`` (n/a)."""
    arr = np.array([np.nan if v is None else float(v) for v in values], dtype="<f8")
    return base64.b64encode(arr.tobytes()).decode("ascii")


def decode_values(values: object) -> np.ndarray:
    """A ``/2`` metric's ``values`` (base64 string or JSON array) as float64, NaN for n/a
    (infinities are kept for the caller to report); :class:`ValueError` says why it cannot be read."""
    if isinstance(values, str):
        try:
            raw = base64.b64decode(values, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"values is not valid base64 ({exc})") from None
        if len(raw) % 8:
            raise ValueError(f"values decodes to {len(raw)} bytes, not a whole number of float64 (8 bytes each)")
        return np.frombuffer(raw, dtype="<f8").astype(np.float64)
    if isinstance(values, list):
        out = np.empty(len(values), dtype=np.float64)
        for k, v in enumerate(values):
            if v is None:
                out[k] = np.nan
            elif isinstance(v, int | float) and not isinstance(v, bool):
                out[k] = float(v)
            else:
                raise ValueError(f"values[{k}] is {v!r}, not a number or null")
        return out
    raise ValueError("values is neither a base64 string nor an array")


def metric_ids(track: Mapping[str, Any], metric: Mapping[str, Any]) -> list[str] | None:
    """The sample ids a ``/2`` metric's ``values`` align with: its own ``sample_ids``, else the track's."""
    ids = metric.get("sample_ids", track.get("sample_ids"))
    return ids if isinstance(ids, list) else None


def metric_values(track: Mapping[str, Any], metric: Mapping[str, Any]) -> tuple[list[str], np.ndarray] | None:
    """``(sample ids, float64 values with NaN for n/a)`` of a metric block of either version;
    ``None`` when it has no per-sample values. :class:`ValueError` for values that cannot be read
    or do not align with the ids."""
    if "values" in metric:
        ids = metric_ids(track, metric)
        if ids is None:
            raise ValueError("values without sample_ids (on the track or the metric)")
        if metric["values"] is None:  # every sample n/a: the reasons are in na_reasons, once
            return [str(i) for i in ids], np.full(len(ids), np.nan)
        arr = decode_values(metric["values"])
        if arr.size != len(ids):
            raise ValueError(f"values has {arr.size} entries but sample_ids has {len(ids)}")
        return [str(i) for i in ids], arr
    samples = metric.get("samples")
    if not isinstance(samples, dict):
        return None
    arr = np.array([np.nan if v is None else _float(v) for v in samples.values()], dtype=np.float64)
    return [str(k) for k in samples], arr


def _float(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"per-sample value {value!r} is not a number or null")
    return float(value)


def per_sample(track: Mapping[str, Any], metric: Mapping[str, Any]) -> dict[str, float | None] | None:
    """Sample id -> value (``None`` for n/a) of a metric block of either version, as ``/1``
    writes it; ``None`` when it has no per-sample values (:class:`ValueError` as :func:`metric_values`)."""
    if "values" not in metric:
        samples = metric.get("samples")
        return dict(samples) if isinstance(samples, dict) else None
    got = metric_values(track, metric)
    if got is None:
        return None
    ids, arr = got
    return {i: (None if math.isnan(v) else v) for i, v in zip(ids, arr.tolist(), strict=True)}


def compact_track(track: Mapping[str, Any]) -> dict[str, Any]:
    """A track block of either version in the ``/2`` layout: ``sample_ids`` (the first metric's
    samples, in their order) before ``metrics``, each metric's ``samples`` map replaced by
    ``values`` (base64); a metric with other samples keeps its own ``sample_ids``. Other keys and
    their order are kept; a ``/2`` block comes back equal."""
    metrics = track.get("metrics")
    if not isinstance(metrics, dict):
        return dict(track)
    maps = {name: _samples_or_none(track, m) for name, m in metrics.items()}
    ids = next((list(s) for s in maps.values() if s is not None), None)
    out: dict[str, Any] = {}
    for key, value in track.items():
        if key == "sample_ids":
            continue
        if key == "metrics":
            if ids is not None:
                out["sample_ids"] = ids
            out["metrics"] = {name: _compact_metric(m, maps[name], ids) for name, m in metrics.items()}
        else:
            out[key] = value
    return out


def _samples_or_none(track: Mapping[str, Any], m: Any) -> dict[str, float | None] | None:
    """The per-sample map of ``m``; ``None`` (the block is kept as it is) when it has none or a
    malformed one (validation reports that)."""
    if not isinstance(m, dict):
        return None
    try:
        samples = per_sample(track, m)
        if samples is not None:
            encode_values(list(samples.values()))  # every value a number or None
    except (ValueError, TypeError):
        return None
    return samples


def _compact_metric(m: Any, samples: dict[str, float | None] | None, ids: list[str] | None) -> Any:
    if samples is None or ids is None:
        return m
    block = {k: v for k, v in m.items() if k not in ("samples", "values", "sample_ids")}
    if len(samples) == len(ids) and samples.keys() == set(ids):
        every_na = all(v is None for v in samples.values())
        block["values"] = None if every_na else encode_values([samples[i] for i in ids])
    else:
        block["sample_ids"] = list(samples)
        block["values"] = encode_values(list(samples.values()))
    return block
