"""``xaibench records convert`` and ``export``: a workdir's record store moved into part files, or
written out as JSONL (one record per line, as ``xaibench.record/1`` describes it, without tags).

A workdir written by an xaibench from before the part files (JSONL only) is read as it is (its
``<track>.jsonl`` files are the store's journals); ``convert`` compacts every journal into a part
file so that readers and resumed runs read it column-wise. Both take the workdir lock
(:class:`~xaibench.runner.storage.store.WorkdirLock`): they fail at once, in one line, while a run holds it.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from xaibench.errors import XaibenchError
from xaibench.files import named
from xaibench.runner.storage.store import RecordStore, WorkdirLock, journals


@dataclass(frozen=True)
class Converted:
    """What :func:`convert` did: tracks read, records moved into part files, part files written,
    records already in part files, and records ignored (failing their integrity check, old keys)."""

    tracks: int
    moved: int
    parts: int
    already: int
    ignored: int

    def line(self, workdir: Path) -> str:
        return (
            f"{workdir}: {self.moved} records of {self.tracks} tracks moved into {self.parts} part files; "
            f"{self.already} were in part files already"
            + (f"; {self.ignored} ignored (integrity check or old keys), left in the journals" if self.ignored else "")
        )


def _workdir(workdir: Path) -> tuple[Path, Path]:
    """(the workdir, its results folder) for a workdir or its ``results/`` folder; one line otherwise."""
    path = Path(workdir).expanduser()
    if not path.exists():
        raise XaibenchError(f"{path}: no such workdir")
    if not path.is_dir():
        raise XaibenchError(f"{path}: not a workdir (a file); pass the --workdir folder of a run")
    if (path / "results").is_dir():
        return path, path / "results"
    if path.name == "results" and journals(path):
        return path.parent, path
    raise XaibenchError(f"{path}: not an xaibench workdir (no results/ folder); pass the --workdir folder of a run")


def convert(workdir: Path) -> Converted:
    """Compact every track's journal of ``workdir`` into a part file. Idempotent: a second call
    moves nothing. The records read back equal (``==``) those read before."""
    root, folder = _workdir(workdir)
    tracks = moved = parts = already = ignored = 0
    with WorkdirLock(root):
        for journal in journals(folder):
            store = RecordStore(journal)
            tracks += 1
            n = store.journal_records
            already += len(store) - n
            ignored += store.unverified + store.old_keys
            if store.compact() is not None:
                moved += n
                parts += 1
    return Converted(tracks, moved, parts, already, ignored)


def export(workdir: Path, out: Path | None = None) -> int:
    """Write every verified record of ``workdir`` as JSONL to ``out`` (atomically) or to stdout;
    the number of records written. Tracks in name order, records in stored order."""
    root, folder = _workdir(workdir)
    with WorkdirLock(root):
        if out is None:
            return _write(folder, sys.stdout)
        out = Path(out).expanduser()
        if out.is_dir():
            raise XaibenchError(f"--out {out}: is a folder; pass a file name")
        tmp = out.parent / f".{out.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        try:
            with tmp.open("w", encoding="utf-8") as fh:
                n = _write(folder, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, out)
        except OSError as exc:
            raise named(exc, out) from exc
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
        return n


def _write(folder: Path, fh: IO[str]) -> int:
    n = 0
    for journal in journals(folder):
        for record in RecordStore(journal).iter_records():
            fh.write(json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n")
            n += 1
    return n
