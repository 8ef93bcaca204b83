"""Per-sample result records of one track, and the workdir lock.

A track's records live in ``<workdir>/results/``: an append-only journal ``<track>.jsonl`` and
immutable Parquet part files ``<track>.part-<n>.parquet`` (:mod:`xaibench.runner.storage.columnar`:
one row per record, provenance stored once per (track, explainer, metric) and referenced by id).
``<track>`` is the track's file name (:func:`track_journal`, :func:`xaibench.safe_names.file_name`:
the name itself for plain names, escaped otherwise), so a track named ``../..`` or ``/tmp/x``
still writes inside ``results/``; the records, not the file names, say which track they are of.

The journal is the write-ahead log. Records are appended to it a batch at a time and fsynced. An
interrupted write can leave at most one torn last line; reading skips it and the next append starts
on a fresh line, so resuming never duplicates or loses a completed record. When the journal holds
:data:`COMPACT_ROWS` records, and when the runner closes a track's store, its records are compacted:
written to a new part file (its integrity tag first, then the file, atomically), and only then is the
journal emptied (keeping the lines that are ignored, below). A crash between the two leaves a record
in both places; readers take the part's copy and skip the journal's (dedupe by key).

One run writes a workdir at a time: :class:`WorkdirLock` holds an exclusive ``flock`` on
``<workdir>/.lock`` for the whole run, and a second run on the same workdir fails at once with
one line naming the workdir and the other run's pid (docs/results.md says why it fails rather
than waits). The operating system drops the lock when the process ends, crash or ``SIGKILL``
included, so a stale lock never blocks the next run. As a second line of defence,
:meth:`RecordStore.append` and compaction take a lock on the journal and first read what another
writer may have appended or compacted since, so even writers that bypass the workdir lock never
store a key twice.

Every journal line the runner appends ends with an integrity tag (``"integrity"``: HMAC-SHA256 of
the line's bytes before it, under the key ``.key`` beside the records, :mod:`xaibench.integrity`);
every part file has a tag file beside it (``<part>.tag``: HMAC of its name and bytes, same key).
Reading, a line whose tag is missing or wrong is ignored (not reused, not published) and counted:
``unverified``, or ``old_keys`` for records from before the batch size was part of the key; a part
file whose tag is missing or wrong is ignored and its rows counted in ``unverified``.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import math
import os
import re
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from xaibench import integrity
from xaibench.errors import XaibenchError
from xaibench.files import named, write_bytes_atomic
from xaibench.runner.storage import columnar
from xaibench.safe_names import file_name

LOCK_NAME = ".lock"
TAG_FIELD = "integrity"
_TAGGED = re.compile(rb'^(?P<body>\{.*),"integrity":"(?P<tag>[0-9a-f]{64})"\}$', re.DOTALL)


COMPACT_ROWS = 10_000
"""Journal records that trigger a compaction into a part file (about 0.5 MB of Parquet, 12 MB of
journal); ``XAIBENCH_COMPACT_ROWS`` sets another count (tests use a small one)."""
JOURNAL_SUFFIX = ".jsonl"
PART_INFIX = ".part-"
PART_SUFFIX = ".parquet"


def _compact_rows() -> int:
    text = os.environ.get("XAIBENCH_COMPACT_ROWS", "")
    return int(text) if text.isdigit() and int(text) > 0 else COMPACT_ROWS


def track_journal(results: Path, track: str) -> Path:
    """The journal of the track named ``track`` in ``results`` (a workdir's ``results/``):
    ``<file name of track>.jsonl``, always a file directly in ``results`` whatever the name."""
    return results / f"{file_name(track, kind='track')}{JOURNAL_SUFFIX}"


def part_files(journal: Path) -> list[Path]:
    """The part files of the track whose journal is ``journal`` (``<track>.part-<n>.parquet``), in order."""
    stem = _stem(journal)
    found = journal.parent.glob(f"{glob.escape(stem)}{PART_INFIX}*{PART_SUFFIX}")
    numbered = [(_part_number(p, stem), p) for p in found]
    return [p for n, p in sorted(numbered) if n >= 0]


def _stem(journal: Path) -> str:
    return journal.name[: -len(JOURNAL_SUFFIX)] if journal.name.endswith(JOURNAL_SUFFIX) else journal.name


def _part_number(part: Path, stem: str) -> int:
    """The ``<n>`` of ``<stem>.part-<n>.parquet``; -1 when the name is not of that form."""
    digits = part.name[len(stem) + len(PART_INFIX) : -len(PART_SUFFIX)]
    return int(digits) if digits.isdigit() else -1


def journals(folder: Path) -> list[Path]:
    """The journal of every track with records in ``folder`` (a ``results/`` folder), by name; a track
    whose journal was never written or removed but has part files is named by its journal path too."""
    if not folder.is_dir():
        return []
    names = {p.name for p in folder.glob(f"*{JOURNAL_SUFFIX}") if p.is_file()}
    for part in folder.glob(f"*{PART_INFIX}*{PART_SUFFIX}"):
        names.add(part.name[: part.name.rindex(PART_INFIX)] + JOURNAL_SUFFIX)
    return [folder / n for n in sorted(names)]


def record_files(folder: Path) -> list[Path]:
    """Every file holding records in ``folder`` (a workdir's ``results/``): the journals and part
    files, sorted by name; what meta's provenance digests. ``[]`` when the folder does not exist."""
    if not folder.is_dir():
        return []
    out = [p for p in folder.glob(f"*{JOURNAL_SUFFIX}") if p.is_file()]
    out += [p for j in journals(folder) for p in part_files(j)]
    return sorted(set(out), key=lambda p: p.name)


class RecordStore:
    """Records of one track (journal ``path`` and its part files), indexed by their key.

    Opening reads only the key column of the part files (and the journal, which is small), so a
    resumed run over millions of records starts quickly. ``key in store`` says whether a record is
    stored; :meth:`get` gives the records of given keys; :attr:`records` materialises them all.
    """

    def __init__(self, path: Path, *, compact_rows: int | None = None, full: bool = False) -> None:
        self.path = path
        self.compact_rows = compact_rows or _compact_rows()
        # read-only: every column of the part files read at once, for :meth:`table` and the counters
        # only (no key set is built: ``in``, ``len``, :meth:`get` and writes are not for such a store)
        self._full = full
        self._part_tables: list[tuple[pa.Table, dict[str, dict[str, Any]]]] = []
        self._key = integrity.secret(path.parent)
        self._parts: list[Path] = []  # verified part files
        self._bad_parts: dict[Path, int] = {}  # part files failing their check -> rows they claim
        self._part_keys: set[str] = set()
        self._table: tuple[pa.Table, dict[str, dict[str, Any]], dict[str, int]] | None = None  # for get()
        self._scan_parts()
        self._reset_journal()
        if path.exists():
            with path.open("rb") as fh:
                self._read_from(fh)

    # -- counters -----------------------------------------------------------------------
    @property
    def unverified(self) -> int:
        """Journal lines and part rows whose integrity tag is missing or wrong (ignored)."""
        return self._j_unverified + sum(self._bad_parts.values())

    @property
    def old_keys(self) -> int:
        """Journal records keyed before KEY_VERSION (no ``key_version``): kept, never reused."""
        return self._j_old

    @property
    def torn_lines(self) -> int:
        """Journal lines that are not JSON (an interrupted write): skipped."""
        return self._j_torn

    # -- reading ------------------------------------------------------------------------
    def _reset_journal(self) -> None:
        self._journal: dict[str, dict[str, Any]] = {}  # verified journal records not in a part
        self._kept: list[bytes] = []  # ignored journal lines (unverified, old keys): kept on compaction
        self._j_unverified = self._j_old = self._j_torn = 0
        self._read_to = 0  # bytes of the journal read, up to the end of its last complete line
        self._seen = 0  # the journal's size when last read or written
        self._torn_tail = False  # whether torn_lines counts a torn last line (read again on catching up)

    def _scan_parts(self) -> bool:
        """Read the key column of part files not seen yet; whether there were any."""
        known = set(self._parts) | set(self._bad_parts)
        new = [p for p in part_files(self.path) if p not in known]
        for part in new:
            try:
                raw = part.read_bytes()
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise named(exc, part) from exc
            if not integrity.file_verified(part, raw, self._key):
                self._bad_parts[part] = columnar.row_count(raw)
                continue
            try:
                table, blocks = columnar.read_part(raw, None if self._full else columnar.KEY_COLUMNS)
            except ValueError:
                self._bad_parts[part] = 1
                continue
            if self._full:
                self._part_tables.append((table, blocks))
            else:
                self._part_keys.update(columnar.key_list(table))
            self._parts.append(part)
        if new:
            self._table = None
        return bool(new)

    def _read_from(self, fh: Any) -> None:
        """Read the complete lines after ``self._read_to`` (a torn last line is counted and skipped)."""
        if self._torn_tail:
            self._j_torn -= 1
            self._torn_tail = False
        fh.seek(self._read_to)
        data = fh.read()
        end = data.rfind(b"\n") + 1
        for raw in data[:end].splitlines():
            self._add_line(raw)
        if data[end:].strip():  # a torn last line (an interrupted write): counted and skipped
            self._j_torn += 1
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
            self._j_torn += 1
            return
        if not isinstance(record, dict) or not isinstance(record.get("key"), str):
            return
        if not self._verified(line):
            if "key_version" in record:
                self._j_unverified += 1
            else:
                self._j_old += 1
            self._kept.append(line)
            return
        record.pop(TAG_FIELD, None)
        if record["key"] not in self._part_keys:  # else compacted already (a crash before the journal emptied)
            self._journal[record["key"]] = record

    def _verified(self, line: bytes) -> bool:
        match = _TAGGED.match(line)
        if match is None:
            return False
        body = match.group("body") + b"}"
        return integrity.verify(self._key, match.group("tag").decode(), self.path.name.encode(), body)

    def _line(self, record: dict[str, Any]) -> str:
        """``record`` (JSON-safe) as one JSON line ending with its integrity tag."""
        assert self._key is not None
        body = json.dumps(record, separators=(",", ":"), allow_nan=False)
        tag = integrity.sign(self._key, self.path.name.encode(), body.encode("utf-8"))
        return f'{body[:-1]},"{TAG_FIELD}":"{tag}"}}\n'

    def _catch_up(self, fh: Any) -> None:
        """Under the journal's lock: read what other writers compacted or appended since."""
        if self._scan_parts():  # another writer compacted (and so rewrote the journal): read it again
            self._reset_journal()
        if os.fstat(fh.fileno()).st_size != self._seen:
            self._read_from(fh)

    # -- the public surface -------------------------------------------------------------
    def __contains__(self, key: str) -> bool:
        return key in self._journal or key in self._part_keys

    def __len__(self) -> int:
        return len(self._journal) + len(self._part_keys)

    def keys(self) -> set[str]:
        """The keys of every stored record."""
        return self._part_keys | set(self._journal)

    def get(self, keys: Iterable[str]) -> list[dict[str, Any]]:
        """The stored records of ``keys``, in their order (keys not stored are left out). Part
        files are read once (all columns) on the first call that needs them."""
        keys = [k for k in keys if k in self]
        found = {k: self._journal[k] for k in keys if k in self._journal}
        wanted = [k for k in keys if k not in found]
        if wanted:  # one decode of the rows wanted, not one per record
            table, blocks, rows = self._loaded()
            index = [rows[k] for k in wanted if k in rows]
            found.update((r["key"], r) for r in columnar.decode(table.take(index), blocks))
        return [found[k] for k in keys if k in found]

    @property
    def records(self) -> dict[str, dict[str, Any]]:
        """Every stored record by key (parts first, then the journal): materialises them all."""
        table, blocks, _ = self._loaded()
        out = {r["key"]: r for r in columnar.decode(table, blocks)}
        out.update(self._journal)
        return out

    @property
    def journal_records(self) -> int:
        """Records in the journal only (not compacted into a part file yet)."""
        return len(self._journal)

    def iter_records(self) -> Iterator[dict[str, Any]]:
        """Every stored record, one part file at a time (then the journal's), without holding them all."""
        for part in list(self._parts):
            table, blocks = read_verified_part(part, self._key)
            if table is not None:
                yield from (r for r in columnar.decode(table, blocks) if r["key"] in self._part_keys)
        yield from list(self._journal.values())

    def table(self) -> tuple[pa.Table, dict[str, dict[str, Any]]]:
        """Every stored record as one table of :data:`~xaibench.runner.storage.columnar.SCHEMA` (the part
        files', then the journal's rows) and the provenance blocks its rows name."""
        parts, blocks = self._part_table()
        records = list(self._journal.values())
        if self._full and records and parts.num_rows:  # no key set here: drop what a part holds already
            stored = pc.is_in(pa.array([r["key"] for r in records]), value_set=columnar.key_array(parts))
            records = [r for r, dup in zip(records, stored.to_pylist(), strict=True) if not dup]
        if not records:
            return parts, blocks
        journal, more = columnar.encode(records)
        return pa.concat_tables([parts, journal]).unify_dictionaries(), {**blocks, **more}

    def _part_table(self) -> tuple[pa.Table, dict[str, dict[str, Any]]]:
        if self._full and len(self._part_tables) == len(self._parts):
            found = self._part_tables
        else:
            found = [read_verified_part(part, self._key) for part in self._parts]
        tables = [t for t, _ in found if t is not None]
        blocks = {k: v for _, b in found for k, v in b.items()}
        if not tables:
            return columnar.SCHEMA.empty_table(), blocks
        return pa.concat_tables(tables).unify_dictionaries(), blocks

    def _loaded(self) -> tuple[pa.Table, dict[str, dict[str, Any]], dict[str, int]]:
        if self._table is None:
            table, blocks = self._part_table()
            rows = {k: i for i, k in enumerate(columnar.key_list(table))}
            self._table = (table, blocks, rows)
        return self._table

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        """Append the records whose key is not stored yet (here or, since the last read, on disk);
        compact the journal once it holds :attr:`compact_rows` records."""
        if self._full:
            raise ValueError(f"{self.path}: a store opened with full=True is read-only")
        batch = [_clean({k: v for k, v in r.items() if k != TAG_FIELD}) for r in records if r["key"] not in self]
        if not batch:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self._key is None:
            self._key = integrity.secret(self.path.parent, create=True)
        with self._locked() as fh:
            self._catch_up(fh)
            size = os.fstat(fh.fileno()).st_size
            batch = [r for r in batch if r["key"] not in self]
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
            if self._torn_tail:  # a torn last line is now a complete (skipped) line, counted once
                self._torn_tail = False
            for r in batch:
                self._journal[r["key"]] = r
            if len(self._journal) >= self.compact_rows:
                with contextlib.suppress(OSError):  # the records are in the journal: compacted next time
                    self._compact(fh)

    def compact(self) -> Path | None:
        """Move the journal's records into a new part file (then empty the journal, keeping its
        ignored lines); the part written, or ``None`` when the journal held no record to move."""
        if self._full:
            raise ValueError(f"{self.path}: a store opened with full=True is read-only")
        if not self.path.exists():
            return None
        with self._locked() as fh:
            self._catch_up(fh)
            return self._compact(fh)

    close = compact

    @contextlib.contextmanager
    def _locked(self) -> Any:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o666)
        with os.fdopen(fd, "r+b") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)  # released when the file is closed
            yield fh

    def _compact(self, fh: Any) -> Path | None:
        if not self._journal:
            return None
        if self._key is None:
            self._key = integrity.secret(self.path.parent, create=True)
        table, blocks = columnar.encode(self._journal.values())
        raw = columnar.part_bytes(table, blocks)
        stem = _stem(self.path)
        n = 1 + max((_part_number(p, stem) for p in part_files(self.path)), default=0)
        part = self.path.with_name(f"{stem}{PART_INFIX}{n:06d}{PART_SUFFIX}")
        try:  # the tag first: a part file present is a part file tagged (a crash leaves at most a stray tag)
            integrity.write_tag(part, raw, self._key)
            write_bytes_atomic(part, raw)
        except OSError as exc:  # e.g. a full disk: the journal keeps the records
            raise named(exc, part) from exc
        self._parts.append(part)
        if self._full:
            self._part_tables.append((table, blocks))
        if self._table is not None:  # the rows read for get() so far, and the new part's
            cached, cached_blocks, rows = self._table
            rows.update((k, cached.num_rows + i) for i, k in enumerate(self._journal))
            both = pa.concat_tables([cached, table]).unify_dictionaries()
            self._table = (both, {**cached_blocks, **blocks}, rows)
        self._part_keys.update(self._journal)
        self._journal = {}
        kept = b"".join(line + b"\n" for line in self._kept)
        os.ftruncate(fh.fileno(), 0)  # O_APPEND: what follows is written from the start
        if kept:
            _write_all(fh.fileno(), kept)
        os.fsync(fh.fileno())
        self._read_to = self._seen = len(kept)
        self._j_torn = 0
        self._torn_tail = False
        return part


def read_verified_part(part: Path, key: bytes | None) -> tuple[pa.Table | None, dict[str, dict[str, Any]]]:
    """A part file's table and provenance blocks; ``(None, {})`` when it fails its integrity check."""
    try:
        raw = part.read_bytes()
    except OSError as exc:
        raise named(exc, part) from exc
    if not integrity.file_verified(part, raw, key):
        return None, {}
    try:
        return columnar.read_part(raw)
    except ValueError:
        return None, {}


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
