"""Submission files as read: each file opened once per build, and the typed :class:`Submission`.

``xaibench leaderboard build`` validates every submission file, ranks them and builds the site;
validation, loading and the site's copy and digest of each file all take its bytes from
:func:`read_bytes`, so each file is opened once. What was read is kept, keyed by the file's path
and identity (device, inode, size, modification and change times in ns, from ``fstat`` of the
file as it was opened), and handed out again while ``os.stat`` of the path gives the same
identity: a file rewritten, replaced, touched or chmod-ed since is read again. Only the files of
the folder read last are kept (:func:`keep_only`), so what is held is one folder's submissions.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from xaibench.publish.shapes import SubmissionData

_Identity = tuple[int, int, int, int, int]


@dataclass(frozen=True)
class Submission:
    """One submission: the file it came from, its data, and the bytes read."""

    path: Path
    data: SubmissionData
    raw: bytes | None = field(default=None, repr=False, compare=False)
    """The file's bytes as read (the site copies and hashes them); None for a submission made in memory."""

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


def submission_text(raw: bytes) -> str:
    """The text of a submission file, as ``Path.read_text(encoding="utf-8")`` gives it: UTF-8
    (:class:`UnicodeDecodeError` otherwise), with ``\\r\\n`` and ``\\r`` read as ``\\n``."""
    return raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
