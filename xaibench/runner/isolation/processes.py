"""What the executors share about the processes that run plugin code: how their output reaches
the terminal (:class:`OutputForwarder`), the n/a reason of one that ended (:func:`exit_reason`),
their scratch folders (:func:`new_scratch`, :func:`remove_scratch`) and the start of a fresh child that
talks over its stdin and stdout (:func:`start_child`). Standard library only: a Ray
actor's child imports nothing heavy before it enters its sandbox (:mod:`xaibench.runner.isolation.ray_child`).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import site
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from xaibench.files import remove_tree


def exit_reason(code: int | None) -> str:
    """The n/a reason of a worker that ended with exit code ``code`` (negative: a signal)."""
    if code is None:
        return "worker exited (status unknown)"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"worker killed by signal {name}"
    return f"worker exited with status {code}"


# A scratch folder is f"{SCRATCH_PREFIX}{kind}-{owner's pid}-{random}" (mkdtemp's random part has no "-").
SCRATCH_PREFIX = "xaibench-"
_SCRATCH_OWNER = re.compile(rf"{SCRATCH_PREFIX}[a-z-]+?-(\d+)-[^-]+$")


def new_scratch(kind: str, root: str | None = None) -> str:
    """A fresh scratch folder for a worker of ``kind`` (``"worker"``, ``"metric-worker"``, ...) in
    ``root`` (this process's temporary folder), named after this process, which owns it and
    removes it when the worker ends. The folders of owners that have ended without removing
    theirs (killed) are removed first (:func:`sweep_scratch`)."""
    root = root or tempfile.gettempdir()
    sweep_scratch(root)
    return tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{kind}-{os.getpid()}-", dir=root)


def sweep_scratch(root: str) -> None:
    """Remove the scratch folders in ``root`` whose owner has ended (Linux: ``/proc``; elsewhere
    nothing). A live owner's folder stays, and so does one this process may not remove."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError), os.scandir(root) as entries:
        for entry in entries:
            owner = _SCRATCH_OWNER.match(entry.name)
            if owner and not os.path.exists(f"/proc/{owner.group(1)}") and entry.is_dir(follow_symlinks=False):
                remove_scratch(entry.path)


def remove_scratch(scratch: str | None) -> None:
    """Remove a worker's scratch folder, whatever permissions it left on what it made there."""
    if scratch is not None:
        remove_tree(scratch)


class OutputForwarder:
    """Worker output reaches the terminal only through here: a thread reads what the zygote and
    its workers write to their stdout and stderr (one pipe; a Ray actor's child likewise, into
    the actor's log) and writes it to this process's stderr a line at a time, each line prefixed
    ``[worker] `` (or ``prefix``), control characters (terminal escape codes) shown as ``\\xNN`` and at most
    ``LINE_LIMIT`` characters. So plugin code can neither clear or redraw the terminal nor print a
    line that looks like xaibench's own (``error: ...``)."""

    LINE_LIMIT = 2000
    PREFIX = "[worker] "

    def __init__(self, fd: int, *, prefix: str = PREFIX) -> None:
        self.fd = fd
        self.prefix = prefix
        self.last = ""  # the last line written (as written): why a child that died at once died
        self.thread = threading.Thread(target=self._run, name="xaibench-worker-output", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        pending = b""
        try:
            while True:
                try:
                    chunk = os.read(self.fd, 65536)
                except InterruptedError:
                    continue
                except OSError:
                    break
                if not chunk:
                    break
                *lines, pending = (pending + chunk).split(b"\n")
                if len(pending) > self.LINE_LIMIT:  # no newline coming: show it in parts
                    lines.append(pending)
                    pending = b""
                for line in lines:
                    self._write(line)
            if pending:
                self._write(pending)
        finally:
            with contextlib.suppress(OSError):
                os.close(self.fd)

    def _write(self, raw: bytes) -> None:
        text = escape_output(raw.decode("utf-8", "replace"), self.LINE_LIMIT)
        if text.strip():
            self.last = text
        with contextlib.suppress(Exception):  # a closed or replaced stderr must not end the thread early
            sys.stderr.write(f"{self.prefix}{text}\n")
            sys.stderr.flush()

    def join(self, seconds: float) -> None:
        self.thread.join(seconds)


def escape_output(text: str, limit: int) -> str:
    """``text`` with every control character (C0, DEL, C1; tabs too) as ``\\xNN``, cut at ``limit``."""
    out = "".join(f"\\x{ord(c):02x}" if ord(c) < 32 or 127 <= ord(c) < 160 else c for c in text.rstrip("\r"))
    return out if len(out) <= limit else out[: limit - 3] + "..."


_SAID: set[str] = set()


def say_once(line: str) -> None:
    """Print ``line`` on stderr, once per process."""
    if line not in _SAID:
        _SAID.add(line)
        print(line, file=sys.stderr)


@dataclass
class ChildPipes:
    """A child started by :func:`start_child`: the process, its output forwarder, and the
    descriptors of its stdin (non-blocking, to write requests) and stdout (to read replies)."""

    process: subprocess.Popen[bytes]
    output: OutputForwarder
    to_child: int
    from_child: int


def start_child(module: str, scratch: str, *, prefix: str, single_blas_thread: bool = False) -> ChildPipes:
    """Start ``python -m MODULE SCRATCH <this pid>`` in a process group of its own, stdin and stdout
    piped, its stderr shown through an :class:`OutputForwarder` with ``prefix``. From a source
    checkout the child imports the same xaibench. ``single_blas_thread`` keeps numpy's BLAS from
    starting threads at import (the sandbox needs a single thread). ``scratch`` is removed if the
    child cannot start."""
    read_err, write_err = os.pipe()
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[3])
    if root not in site.getsitepackages():  # a source checkout: the child imports the same xaibench
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    if single_blas_thread:
        env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", module, scratch, str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=write_err,
            close_fds=True,
            start_new_session=True,  # its own process group: killed as a whole
            env=env,
        )
    except BaseException:
        os.close(read_err)
        remove_scratch(scratch)
        raise
    finally:
        os.close(write_err)
    assert process.stdin is not None and process.stdout is not None
    to_child = process.stdin.fileno()
    os.set_blocking(to_child, False)
    return ChildPipes(process, OutputForwarder(read_err, prefix=prefix), to_child, process.stdout.fileno())
