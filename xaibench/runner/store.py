"""Append-only per-sample result records (JSONL), one file per track, and the workdir lock.

Records are appended a batch at a time and fsynced. An interrupted write can leave
at most one torn last line; reading skips it and the next append starts on a fresh
line, so resuming never duplicates or loses a completed record.

One run writes a workdir at a time: :class:`WorkdirLock` holds an exclusive ``flock`` on
``<workdir>/.lock`` for the whole run, and a second run on the same workdir fails at once with
one line naming the workdir and the other run's pid (docs/results.md says why it fails rather
than waits). The operating system drops the lock when the process ends, crash or ``SIGKILL``
included, so a stale lock never blocks the next run. As a second line of defence,
:meth:`RecordStore.append` takes a lock on the records file and first reads what another
writer may have appended since, so even writers that bypass the workdir lock never store a key twice.

Every line the runner appends ends with an integrity tag (``"integrity"``: HMAC-SHA256 of the
line's bytes before it, under the key ``.key`` beside the records, :mod:`xaibench.integrity`).
Reading, a line whose tag is missing or wrong is ignored (not reused, not published) and counted:
``unverified``, or ``old_keys`` for records from before the batch size was part of the key.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import re
import time
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

from xaibench import integrity
from xaibench.errors import XaibenchError
from xaibench.files import named

LOCK_NAME = ".lock"
TAG_FIELD = "integrity"
_TAGGED = re.compile(rb'^(?P<body>\{.*),"integrity":"(?P<tag>[0-9a-f]{64})"\}$', re.DOTALL)


class RecordStore:
    """Records of one track, indexed by their key."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.records: dict[str, dict[str, Any]] = {}
        self.torn_lines = 0
        self.old_keys = 0  # records keyed before KEY_VERSION (no ``key_version``): kept, never reused
        self.unverified = 0  # lines whose integrity tag is missing or wrong: kept in the file, ignored
        self._key = integrity.secret(path.parent)
        self._read_to = 0  # bytes of the file read, up to the end of its last complete line
        self._seen = 0  # the file's size when last read or written
        self._torn_tail = False  # whether torn_lines counts a torn last line (read again on catching up)
        if path.exists():
            with path.open("rb") as fh:
                self._read_from(fh)

    def _read_from(self, fh: Any) -> None:
        """Read the complete lines after ``self._read_to`` (a torn last line is counted and skipped)."""
        if self._torn_tail:
            self.torn_lines -= 1
            self._torn_tail = False
        fh.seek(self._read_to)
        data = fh.read()
        end = data.rfind(b"\n") + 1
        for raw in data[:end].splitlines():
            self._add_line(raw)
        if data[end:].strip():  # a torn last line (an interrupted write): counted and skipped
            self.torn_lines += 1
            self._torn_tail = True
        self._read_to += end
        self._seen = self._read_to + len(data) - end

    def _add_line(self, raw: bytes) -> None:
        line = raw.strip()
        if not line:
            return
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            self.torn_lines += 1
            return
        if not isinstance(record, dict) or not isinstance(record.get("key"), str):
            return
        if not self._verified(line):
            if "key_version" in record:
                self.unverified += 1
            else:
                self.old_keys += 1
            return
        record.pop(TAG_FIELD, None)
        self.records[record["key"]] = record

    def _verified(self, line: bytes) -> bool:
        match = _TAGGED.match(line)
        if match is None:
            return False
        body = match.group("body") + b"}"
        return integrity.verify(self._key, match.group("tag").decode(), self.path.name.encode(), body)

    def _line(self, record: dict[str, Any]) -> str:
        """``record`` as one JSON line ending with its integrity tag."""
        assert self._key is not None
        body = json.dumps(
            _clean({k: v for k, v in record.items() if k != TAG_FIELD}), separators=(",", ":"), allow_nan=False
        )
        tag = integrity.sign(self._key, self.path.name.encode(), body.encode("utf-8"))
        return f'{body[:-1]},"{TAG_FIELD}":"{tag}"}}\n'

    def __contains__(self, key: str) -> bool:
        return key in self.records

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        """Append the records whose key is not stored yet (here or, since the last read, on disk)."""
        batch = [r for r in records if r["key"] not in self.records]
        if not batch:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self._key is None:
            self._key = integrity.secret(self.path.parent, create=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o666)
        with os.fdopen(fd, "r+b") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)  # released when the file is closed
            size = os.fstat(fh.fileno()).st_size
            if size != self._seen:  # another writer appended since: catch up first
                self._read_from(fh)
                batch = [r for r in batch if r["key"] not in self.records]
            if not batch:
                return
            needs_newline = size > 0 and not _ends_with_newline(fh, size)
            text = "".join(self._line(r) for r in batch)
            data = (b"\n" if needs_newline else b"") + text.encode("utf-8")
            try:  # unbuffered: nothing is left to flush (and so to write again) when the file closes
                _write_all(fh.fileno(), data)
                os.fsync(fh.fileno())
            except OSError as exc:  # e.g. a full disk: drop the part written, keep the records before it
                with contextlib.suppress(OSError):
                    os.ftruncate(fh.fileno(), size)
                raise named(exc, self.path) from exc
            self._read_to = self._seen = size + len(data)
            self._torn_tail = False  # a torn last line is now a complete (skipped) line, counted once
        for r in batch:
            self.records[r["key"]] = r


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _ends_with_newline(fh: Any, size: int) -> bool:
    fh.seek(size - 1)
    return fh.read(1) == b"\n"


def _clean(obj: Any) -> Any:
    """JSON-safe: NaN/inf become null, numpy scalars become Python numbers."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if hasattr(obj, "tolist") and not isinstance(obj, str):
        return _clean(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


class WorkdirLock:
    """An exclusive lock on a workdir for one run (``with WorkdirLock(path):``).

    Creates the workdir when needed. Raises :class:`~xaibench.errors.XaibenchError` with one line
    when the workdir is a file, cannot be written, or another run holds it (naming its pid).
    """

    def __init__(self, workdir: Path) -> None:
        self.workdir = Path(workdir)
        self.path = self.workdir / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> WorkdirLock:
        workdir = self.workdir
        if workdir.exists() and not workdir.is_dir():
            raise XaibenchError(f"--workdir {workdir}: is a file, not a folder; pass a folder")
        try:
            workdir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
        except (FileExistsError, NotADirectoryError) as exc:
            raise XaibenchError(f"--workdir {workdir}: a part of the path is a file, not a folder") from exc
        except OSError as exc:
            raise XaibenchError(f"--workdir {workdir}: cannot write there ({exc.strerror or exc})") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            who = f"pid {holder}" if holder else "a process whose pid is not written yet"
            raise XaibenchError(
                f"--workdir {workdir}: another xaibench run ({who}) is using it; "
                "wait for it to finish or pass another --workdir"
            ) from None
        except OSError as exc:
            os.close(fd)
            raise XaibenchError(f"--workdir {workdir}: cannot lock {self.path} ({exc.strerror or exc})") from exc
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing drops the flock; the file stays (removing it would race a waiting run)

    def __enter__(self) -> WorkdirLock:
        return self.acquire() if self._fd is None else self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.release()


def _holder(fd: int, wait: float = 0.5) -> int | None:
    """The pid the lock holder wrote into the lock file (it writes it right after locking)."""
    deadline = time.monotonic() + wait
    while True:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        if text.isdigit():
            return int(text)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.02)
