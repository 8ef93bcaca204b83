"""The probe: ``python -m xaibench.plugins.probe FD DISTRIBUTION ENTRY_POINT...``.

Run by :mod:`xaibench.plugins.catalogue` in a fresh process, one per distribution. The process
is two:

- **The probe** (this process) runs no plugin code. It dies with the runner (``SIGTERM`` then,
  see below), becomes a subreaper (``PR_SET_CHILD_SUBREAPER``: whatever the plugin starts and
  leaves behind, a daemon that called ``setsid`` included, becomes its child), confines its
  signals to what it starts (:func:`~xaibench.sandbox.scope_signals`), forks the
  describer, and alone holds the descriptor ``FD`` to the runner: the describer closes its copy
  before it imports anything, so no process the plugin starts holds it, and the runner's read
  ends when the probe ends, not when the plugin's last daemon does. It reads the description
  from the describer (a length-prefixed frame on a pipe of their own), and as soon as it is
  complete or the describer has ended, kills and reaps everything left below it, writes the
  description to ``FD`` and exits, with the describer's status when that said nothing. On
  ``SIGTERM`` (the runner's timeout, an interrupt, the runner's end) it kills and reaps
  everything below it and exits.
- **The describer** (its child) enters the worker sandbox (:mod:`xaibench.sandbox`: writes only
  a scratch folder, no TCP, no other socket, no signal outside itself, no other process's
  ``/proc``) before it imports anything of the plugin, then imports the named entry points of
  that one distribution, registers them in a registry of its own (no built-ins, no other
  plugin) and writes their description, as JSON. Whatever the plugin does at import (exit,
  raise, loop, patch xaibench, start a daemon) happens there, not in the runner.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import struct
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from xaibench.sandbox import (
    SandboxError,
    child_pids,
    enter_sandbox,
    kill_descendants,
    sandbox_enabled,
    scope_signals,
    silence_inherited_files,
    use_scratch,
    worker_writable,
)

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
FRAME = struct.Struct(">Q")  # the describer's description: its length, then the JSON
MAX_BYTES = 8 << 20  # catalogue.MAX_DESCRIPTION_BYTES (what the runner reads at most)
KILL_ROUNDS = 100


def _prctl(option: int, value: int) -> None:
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def kill_below() -> None:
    """SIGKILL and reap every process below this one: its children, and, as it is their
    subreaper, what they leave behind when they die (again and again, until none is left). With
    Landlock's signal scope (:func:`~xaibench.sandbox.scope_signals`) at once, else found in
    ``/proc`` (which a probe started in a sandbox cannot read for its children)."""
    if kill_descendants():
        return
    for _ in range(KILL_ROUNDS):
        children = child_pids()
        if not children:
            break
        for pid in children:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for pid in children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def _on_sigterm(number: int, frame: Any) -> None:
    kill_below()
    os._exit(128 + signal.SIGTERM)


# ---------------------------------------------------------------------------- the describer


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def describe(distribution: str, names: list[str], sandbox: str) -> dict[str, Any]:
    """Import the entry points ``names`` of ``distribution`` in a registry of their own and
    describe what they registered (in the describer, after the sandbox)."""
    from xaibench.plugins import catalogue, manager

    lines: list[str] = []
    manager.on_plugin_error = lines.append
    registry = manager.Registry(load_entry_points=False, builtins=False)
    from importlib import metadata

    wanted = set(names)
    plugins: list[dict[str, Any]] = []
    components: list[dict[str, Any]] = []
    for ep in sorted(metadata.entry_points(group=manager.ENTRY_POINT_GROUP), key=lambda e: e.name):
        if ep.name not in wanted or ep.name in registry.plugins:
            continue
        if ep.dist is not None and ep.dist.name != distribution:
            continue
        before = len(lines)
        status = registry.load_entry_point(ep)
        plugins.append(
            {
                "name": status.name,
                "source": status.source,
                "ok": status.ok,
                "error": status.error,
                "lines": lines[before:],
            }
        )
    for kind in manager.KIND_BASES:
        for entry in registry.entries(kind):
            info = entry.info
            item: dict[str, Any] = {"kind": kind, "name": info.name, "plugin": info.plugin}
            if kind in catalogue.STAND_IN_KINDS:
                try:
                    item["data"] = catalogue.component_data(kind, entry.cls)
                except BaseException as exc:  # noqa: BLE001 - the plugin's class attributes and suite code
                    item["error"] = manager.describe_failure(exc)
            components.append(item)
    return {"format": catalogue.FORMAT, "sandbox": sandbox, "plugins": plugins, "components": components}


def _describer(out: int, distribution: str, names: list[str], scratch: str, probe: int) -> int:
    """The describer's life (see the module doc); its exit status."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != probe:
        return 1
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    sandbox = "off"
    if sandbox_enabled():
        try:
            silence_inherited_files(keep=[out])
            entered = enter_sandbox(worker_writable(Path(scratch)), tcp_ports=())
            sandbox = "on" if entered.seccomp == "on" else f"on (seccomp {entered.seccomp})"
        except SandboxError as exc:
            sandbox = f"unavailable: {exc}"
    description = describe(distribution, names, sandbox)
    data = json.dumps(description).encode()
    _write_all(out, FRAME.pack(len(data)) + data)
    os.close(out)
    return 0


def _run_describer(out: int, distribution: str, names: list[str], scratch: str, probe: int) -> None:
    """Run the describer and end its process as Python would have ended it; never returns."""
    code = 1
    try:
        code = _describer(out, distribution, names, scratch, probe)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            with contextlib.suppress(Exception):
                print(exc.code, file=sys.stderr)
    except KeyboardInterrupt:  # as an interpreter would end: by SIGINT
        with contextlib.suppress(Exception):
            sys.stderr.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
    except BaseException:  # noqa: BLE001 - the plugin's, reported as an interpreter would
        with contextlib.suppress(Exception):
            traceback.print_exc()
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


# ---------------------------------------------------------------------------- the probe


def _collect(read: int, child: int) -> tuple[bytes, int | None]:
    """The description the describer ``child`` sends on ``read`` (the frame's body; what came of
    it where it sent no whole frame) and its wait status (``None`` while it still runs, when the
    frame is complete first). Ends when the frame is complete, too long, or the describer ended:
    never waits for an end of file that a process the plugin started could hold back."""
    data = bytearray()
    try:
        pidfd: int | None = os.pidfd_open(child)
    except (AttributeError, OSError):
        pidfd = None
    status: int | None = None
    reading = True
    try:
        while True:
            watched = ([read] if reading else []) + ([pidfd] if pidfd is not None else [])
            if watched:
                ready = select.select(watched, [], [], None if pidfd is not None else 0.05)[0]
            else:
                time.sleep(0.05)
                ready = []
            if read in ready:
                chunk = os.read(read, 1 << 16)
                if not chunk:
                    reading = False  # the describer closed its end (no daemon of the plugin holds it)
                else:
                    data += chunk
                    if len(data) >= FRAME.size:
                        (size,) = FRAME.unpack_from(data)
                        if len(data) >= FRAME.size + size or size > MAX_BYTES:
                            break
            pid, status_now = os.waitpid(child, os.WNOHANG)
            if pid == child:
                status = status_now
                os.set_blocking(read, False)
                with contextlib.suppress(OSError):  # what it wrote before it ended
                    while reading and len(data) <= MAX_BYTES + FRAME.size and (chunk := os.read(read, 1 << 16)):
                        data += chunk
                break
    finally:
        if pidfd is not None:
            os.close(pidfd)
    if len(data) < FRAME.size:
        return b"", status
    (size,) = FRAME.unpack_from(data)
    return bytes(data[FRAME.size : FRAME.size + min(size, MAX_BYTES + 1)]), status


def _end_as(status: int | None) -> None:
    """Exit with the describer's wait ``status`` (0 when it is ``None``: it described)."""
    if status is None:
        os._exit(0)
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        with contextlib.suppress(Exception):
            import resource

            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            signal.signal(number, signal.SIG_DFL)
            os.kill(os.getpid(), number)
        os._exit(128 + number)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def main(argv: list[str]) -> int:
    fd, distribution, names = int(argv[0]), argv[1], argv[2:]
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # the runner ended: kill what is below, then end
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    if sandbox_enabled():
        scope_signals()  # its signals reach only what it starts: kill_below kills all of it at once
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the runner's to handle
    signal.signal(signal.SIGTERM, _on_sigterm)
    # the catalogue makes the scratch folder and removes it when the probe is done
    scratch = os.environ.get("XAIBENCH_PROBE_SCRATCH") or tempfile.mkdtemp(prefix="xaibench-probe-")
    use_scratch(scratch)
    path = os.environ.get("XAIBENCH_PROBE_PATH")
    if path:
        sys.path[:] = json.loads(path)
    probe = os.getpid()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the describer: never returns into this function
        os.close(read)
        os.close(fd)  # the runner's pipe: held by the probe alone
        _run_describer(write, distribution, names, scratch, probe)
    os.close(write)
    try:
        data, status = _collect(read, child)
    finally:
        kill_below()  # the describer too, when it has not ended yet (its frame is complete)
    os.close(read)
    if status is None or data:
        with contextlib.suppress(OSError):
            _write_all(fd, data)
    os.close(fd)
    _end_as(status)
    return 0


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))
