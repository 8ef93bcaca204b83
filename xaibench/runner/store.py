"""Append-only per-sample result records (JSONL), one file per track.

Records are appended a batch at a time and fsynced. An interrupted write can leave
at most one torn last line; reading skips it and the next append starts on a fresh
line, so resuming never duplicates or loses a completed record.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any


class RecordStore:
    """Records of one track, indexed by their key."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.records: dict[str, dict[str, Any]] = {}
        self.torn_lines = 0
        if path.exists():
            self._load()

    def _load(self) -> None:
        with self.path.open("r", encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    self.torn_lines += 1
                    continue
                if isinstance(record, dict) and "key" in record:
                    self.records[record["key"]] = record

    def __contains__(self, key: str) -> bool:
        return key in self.records

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        batch = [r for r in records if r["key"] not in self.records]
        if not batch:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        needs_newline = self.path.exists() and self.path.stat().st_size > 0 and not _ends_with_newline(self.path)
        text = "".join(json.dumps(_clean(r), separators=(",", ":"), allow_nan=False) + "\n" for r in batch)
        with self.path.open("a", encoding="utf-8") as fh:
            if needs_newline:
                fh.write("\n")
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        for r in batch:
            self.records[r["key"]] = r


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as fh:
        fh.seek(-1, os.SEEK_END)
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
