"""Atomic file writes, and the clean-up of what an interrupted write leaves behind.

A write goes to a temporary file in the target's folder, is fsynced, then renamed over the
target: readers see the old file or the new one, never a torn one. The temporary file is named
``.<name>.<pid>.<random>.tmp`` and created like any other file, ``0666`` less the umask (not
``mkstemp``'s ``0600``). A process killed mid-write leaves it behind; :func:`remove_leftovers`
(run by the runner at the start of every run, under the workdir lock) deletes those whose writer
is gone, and the staging folders (:func:`make_staging_dir`) of dead processes too.
"""

from __future__ import annotations

import contextlib
import csv
import ctypes
import errno
import io
import json
import os
import re
import secrets
import shutil
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

TEMP_SUFFIX = ".tmp"
STAGING_SUFFIX = ".staging"
ASIDE_SUFFIX = ".old"
_WITH_PID = re.compile(r"^\..+\.(?P<pid>\d+)\.[0-9a-f]{8}\.(?:tmp|staging|old)$")  # ".<name>.<pid>.<8 hex>.tmp"
_MKSTEMP = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")  # the older form, without a pid: ".<name>.<random>.tmp"


def _temp_name(path: Path, suffix: str) -> Path:
    return path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}{suffix}"


def write_bytes_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        tmp = _temp_name(path, TEMP_SUFFIX)
        try:  # O_EXCL like mkstemp, but mode 0666 & ~umask like open()
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        except FileExistsError:
            continue
        break
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:  # e.g. a full disk (ENOSPC): the target is untouched; name it, not the temporary file
        tmp.unlink(missing_ok=True)
        raise named(exc, path) from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def named(exc: OSError, path: Path) -> OSError:
    """``exc`` naming ``path`` (a failed ``write`` names no file): ``path: No space left on device``."""
    if exc.errno is None or exc.strerror is None:
        return exc
    return type(exc)(exc.errno, exc.strerror, str(path))


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def csv_text(fields: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> str:
    """``rows`` as CSV text with the header ``fields`` (``None`` and missing keys as empty cells)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(fields), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if row.get(k) is None else row[k] for k in fields})
    return buffer.getvalue()


def write_csv_atomic(path: Path, fields: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> None:
    """:func:`csv_text` written atomically."""
    write_text_atomic(path, csv_text(fields, rows))


_SCALAR_TYPES = (str, int, float, bool, type(None))


def dumps_readable(obj: Any, *, flat_objects: bool = False) -> str:
    """``obj`` as JSON text indented by 2, like ``json.dumps(obj, indent=2, allow_nan=False)``,
    except that a non-empty array whose items are all scalars (numbers, strings, booleans, null)
    is written on one line as ``json.dumps`` writes it (``[0.25, null, 1]``): per-sample values,
    histograms and sample ids take a line each, not a line per item. ``flat_objects``: a non-empty
    object whose values are all scalars is written on one line too (``{"track": "a", "rank": 1}``):
    a leaderboard's rows take a line each, so a changed row is a one-line diff. Key order is kept;
    empty containers are ``[]`` and ``{}``; the parsed value is the same as ``json.dumps``'s."""
    out: list[str] = []
    _readable(obj, out, "\n", flat_objects)
    return "".join(out)


def _readable(obj: Any, out: list[str], newline: str, flat_objects: bool = False) -> None:
    """Append ``obj``'s text to ``out``; ``newline`` is the line break and indent of its own level."""
    if isinstance(obj, dict):
        if not obj:
            out.append("{}")
            return
        if flat_objects and all(isinstance(v, _SCALAR_TYPES) for v in obj.values()):
            out.append(json.dumps(obj, allow_nan=False))  # json.dumps checks the keys as the indented path does
            return
        inner = newline + "  "
        sep = "{" + inner
        for key, value in obj.items():
            if not isinstance(key, str):
                if not isinstance(key, _SCALAR_TYPES):
                    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")
                key = json.dumps(key, allow_nan=False)  # as json.dumps writes a non-string key
            out.append(sep)
            out.append(json.dumps(key))
            out.append(": ")
            _readable(value, out, inner, flat_objects)
            sep = "," + inner
        out.append(newline + "}")
    elif isinstance(obj, list | tuple) and not all(isinstance(v, _SCALAR_TYPES) for v in obj):
        inner = newline + "  "
        sep = "[" + inner
        for value in obj:
            out.append(sep)
            _readable(value, out, inner, flat_objects)
            sep = "," + inner
        out.append(newline + "]")
    else:  # a scalar, or an array of scalars (empty too) on one line
        out.append(json.dumps(obj, allow_nan=False))


def write_json_atomic(path: Path, obj: Any, *, inline_scalars: bool = False) -> None:
    """``obj`` as JSON indented by 2 (``allow_nan=False``), with a final newline, written
    atomically; ``inline_scalars``: arrays of scalars on one line (:func:`dumps_readable`, the
    submission files), else ``json.dumps(obj, indent=2)``."""
    text = dumps_readable(obj) if inline_scalars else json.dumps(obj, indent=2, sort_keys=False, allow_nan=False)
    write_text_atomic(path, text + "\n")


def make_staging_dir(target: Path) -> Path:
    """A new, empty folder beside ``target`` (``.<name>.<pid>.<random>.staging``, mode 0777 less the
    umask) to fill and then rename onto ``target``; left behind by a crash, it is removed by
    :func:`remove_leftovers`."""
    target.parent.mkdir(parents=True, exist_ok=True)
    while True:
        folder = _temp_name(target, STAGING_SUFFIX)
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        return folder


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    except OSError:
        return False
    return True


def is_leftover(path: Path) -> bool:
    """Whether ``path`` is a temporary file or staging folder of an atomic write whose process is gone."""
    match = _WITH_PID.match(path.name)
    if match is not None:
        return not _alive(int(match.group("pid")))
    return _MKSTEMP.match(path.name) is not None


def remove_leftovers(root: Path) -> int:
    """Delete, under ``root``, the temporary files and staging folders of atomic writes whose
    writer process no longer runs (a crash or a kill mid-write); return how many were removed.
    Those of live processes are left alone."""
    removed = 0
    if not root.is_dir():
        return 0
    for folder, dirnames, filenames in os.walk(root):
        base = Path(folder)
        for name in list(dirnames):
            if name.endswith(STAGING_SUFFIX) and is_leftover(base / name):
                shutil.rmtree(base / name, ignore_errors=True)
                dirnames.remove(name)
                removed += 1
        for name in filenames:
            if name.endswith(TEMP_SUFFIX) and is_leftover(base / name):
                try:
                    (base / name).unlink()
                except FileNotFoundError:
                    continue
                removed += 1
    return removed


def check_writable_folder(path: Path, shown: str) -> None:
    """Raise :class:`~xaibench.errors.XaibenchError` (one line starting with ``shown``, the option
    or argument as the user wrote it) when ``path`` cannot be a folder we write in.

    Checked by creating the folder and a temporary file in it, not by permission bits, so it also
    holds for root (who ignores ``chmod``), read-only mounts and immutable folders.
    """
    from xaibench.errors import XaibenchError

    if path.exists() and not path.is_dir():
        raise XaibenchError(f"{shown}: is a file, not a folder; pass a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except (FileExistsError, NotADirectoryError):
        raise XaibenchError(f"{shown}: a part of the path is a file, not a folder") from None
    except OSError as exc:
        raise XaibenchError(f"{shown}: cannot write there ({exc.strerror or exc})") from None


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Swap the names ``a`` and ``b`` in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False
    where the system or the file system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):  # a C library older than glibc 2.28
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def replace_folder(staging: Path, target: Path) -> None:
    """Put the filled folder ``staging`` (from :func:`make_staging_dir`) in place of ``target``,
    whole: a reader, or a kill at any point, finds the complete old ``target`` or the complete new one.

    - ``target`` absent: one rename.
    - Linux: one ``renameat2(RENAME_EXCHANGE)`` swaps the two names, then the old folder (now
      under the staging name) is removed; killed before the swap, ``target`` is the old folder;
      after it, the new one, and the old one is a staging folder of a dead process, which
      :func:`remove_stale_siblings` deletes.
    - elsewhere (or a file system without the swap): ``target`` is renamed aside
      (``.<name>.<pid>.<random>.old``), the staging folder renamed in, the aside folder removed.
      Killed between the two renames, ``target`` is missing and the aside folder holds the old
      output whole; :func:`remove_stale_siblings` renames it back before the next build.
    """
    if not target.exists() and not target.is_symlink():
        staging.rename(target)
        return
    if _exchange(staging, target):
        shutil.rmtree(staging, ignore_errors=True)
        return
    while True:
        aside = _temp_name(target, ASIDE_SUFFIX)
        if not aside.exists():
            break
    target.rename(aside)
    try:
        staging.rename(target)
    except BaseException:
        aside.rename(target)
        raise
    shutil.rmtree(aside, ignore_errors=True)


def remove_stale_siblings(target: Path) -> int:
    """Clean up beside ``target`` after writers killed in :func:`replace_folder` or while filling
    a staging folder: a dead process's aside folder is renamed back when ``target`` is missing
    (it is the old output, whole) and removed otherwise; its staging folders and temporary files
    are removed. Those of live processes are left alone. Returns how many were cleaned up."""
    folder = target.parent
    if not folder.is_dir():
        return 0
    mine = re.compile(rf"^\.{re.escape(target.name)}\.\d+\.[0-9a-f]{{8}}\.(?:tmp|staging|old)$")
    cleaned = 0
    for path in sorted(folder.iterdir()):
        if not mine.match(path.name) or not is_leftover(path):
            continue
        if path.name.endswith(ASIDE_SUFFIX) and not target.exists() and not target.is_symlink():
            path.rename(target)
        elif path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        cleaned += 1
    return cleaned


def remove_tree(path: str | Path) -> None:
    """Remove a folder and everything in it, whatever permissions its contents were left with
    (a sandboxed process's scratch folder); a folder that is already gone is not an error."""

    def unlock(function: Any, name: str, exc: Any) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(name), 0o700)
            os.chmod(name, 0o700)
            function(name)

    with contextlib.suppress(OSError):
        if sys.version_info >= (3, 12):
            shutil.rmtree(path, onexc=unlock)
        else:
            shutil.rmtree(path, onerror=unlock)
