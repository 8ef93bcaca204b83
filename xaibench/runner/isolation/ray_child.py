"""The sandboxed child of a Ray actor (``--executor ray``): where plugin code runs.

A Ray actor's process runs threads of Ray's own (gRPC, the core worker) before any code of
ours, and Landlock confines only the thread that enters it, so an actor cannot be sandboxed.
Each actor (:class:`xaibench.runner.isolation.ray_executor.RayWorker`) therefore starts one child, this
file run as a script (``python .../ray_child.py FD SCRATCH THREADS PARENT SANDBOXED``), and
relays its work to it. In this order, the child:

1. dies with its actor (``PR_SET_PDEATHSIG``; it exits at once when the actor has already
   ended), becomes the subreaper of what plugin code starts (killed after every request) and
   ignores ``SIGINT`` (the driver handles Ctrl-C);
2. makes ``SCRATCH`` its ``TMPDIR`` and, when ``SANDBOXED`` is ``1``, enters the sandbox of a
   local worker (:func:`~xaibench.sandbox.enter_sandbox`: write only ``SCRATCH`` and the
   devices of :func:`~xaibench.sandbox.worker_writable`, no TCP at all since it talks
   only to its actor over the inherited socket ``FD``, no signal outside itself). A child that
   cannot says why on stderr and exits with status 70, as a local worker does. Up to here it
   has imported the standard library and :mod:`xaibench.sandbox` only (loaded from its
   file: importing the ``xaibench`` package imports numpy, whose BLAS starts threads);
3. builds its plugin registry (:func:`~xaibench.plugins.manager.get_registry`: from the driver's
   plugin descriptions, which its actor wrote to ``SCRATCH/plugins.json``,
   :func:`~xaibench.plugins.catalogue.adopt`, so that no plugin is probed again; a plugin module
   is imported, inside the sandbox, only when a task needs its component) and a
   :class:`~xaibench.runner.executors.WorkerState`, says
   ``("ready",)``, and serves what its actor asks, as a local worker does: ``("task",
   ExplainTask)`` answered by ``("ready",)`` when the explainer call starts and then ``("done",
   outputs, error, timed_out)``, ``("describe", ExplainerSpec)`` by ``("described", ...)``.

Requests come pickled from the actor (the trusted direction); every answer is bytes of
:mod:`xaibench.runner.isolation.wire`, which the actor relays to the driver unread. ``sys.exit(N)`` in
plugin code ends the child with status ``N``; whatever threads plugin code left are not waited for.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import json
import os
import signal
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
# The exit status of a child that could not enter its sandbox (as a local worker's).
SANDBOX_FAILED = 70
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _sandbox_module() -> ModuleType:
    """:mod:`xaibench.sandbox` (standard library only), without importing the package."""
    name = "xaibench.sandbox"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE.parents[1] / "sandbox.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _die_with_parent(parent: int) -> None:
    """Get ``SIGKILL`` when the actor ends, and end now if it already has; become the reaper of
    what plugin code leaves behind (daemons that called ``setsid`` included: they become this
    process's children, killed after every request)."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(0)


def _enter_sandbox(scratch: str, fd: int) -> None:
    """Sandbox this process as a local worker is (``xaibench.runner.isolation.workers._enter_sandbox``), or
    say why not and exit with :data:`SANDBOX_FAILED`."""
    sandbox = _sandbox_module()
    try:
        sandbox.silence_inherited_files(keep=[fd])
        sandbox.enter_sandbox(
            sandbox.worker_writable(Path(scratch)), tcp_ports=(), before_filter=sandbox.start_gpu_runtime
        )
    except (sandbox.SandboxError, OSError) as exc:
        with contextlib.suppress(Exception):
            print(
                f"xaibench worker: cannot enter the sandbox: {exc} (set {sandbox.OFF_VARIABLE}=0 to run without)",
                file=sys.stderr,
            )
            sys.stderr.flush()
        os._exit(SANDBOX_FAILED)


def _serve(conn: Any, state: Any) -> None:
    """Answer the actor's requests until it closes the socket (imports after the sandbox)."""
    from xaibench.runner.executors import ExplainOutcome, encode_reply, failure_reason, plain_reply
    from xaibench.runner.isolation.workers import kill_orphans

    ready = encode_reply(("ready",))
    conn.send_bytes(ready)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message[0] == "describe":
            reply: Any = ("described", state.describe(message[1]))
        elif message[0] == "task":
            try:
                outcome = state.run(message[1], ready=lambda: conn.send_bytes(ready))
            except KeyboardInterrupt as exc:  # raised by plugin code; SystemExit ends the child
                outcome = ExplainOutcome(error=failure_reason(exc))
            reply = ("done", plain_reply(outcome.outputs), outcome.error, outcome.timed_out, outcome.cost)
        else:
            return
        kill_orphans(())  # what the plugin started and left running (this process is a subreaper)
        conn.send_bytes(encode_reply(reply))  # an output it cannot encode is sent as the task's failure


def main(argv: list[str]) -> None:
    """The child (see the module doc); never returns."""
    fd, scratch, threads, parent, sandboxed = int(argv[0]), argv[1], int(argv[2]), int(argv[3]), argv[4] == "1"
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _sandbox_module().use_scratch(scratch)
    if sandboxed:
        _enter_sandbox(scratch, fd)
    code = 0
    try:
        from multiprocessing.connection import Connection

        from xaibench.plugins import catalogue
        from xaibench.plugins.manager import get_registry
        from xaibench.runner.executors import WorkerState

        # ray_actor.PLUGINS_FILE: the driver's descriptions (no probe of every plugin again)
        with contextlib.suppress(OSError, ValueError), open(os.path.join(scratch, "plugins.json")) as given:
            catalogue.adopt(json.load(given))
        conn = Connection(fd)
        _serve(conn, WorkerState(registry=get_registry(), threads=threads))
    except SystemExit as exc:  # sys.exit() in plugin code
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - said on stderr (the actor's log), then the child ends
        import traceback

        code = 1
        with contextlib.suppress(Exception):
            traceback.print_exc()
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)  # without waiting for threads the plugin left running


if __name__ == "__main__":
    # Run as a script: its folder (xaibench/runner) must not shadow top-level modules.
    sys.path[:] = [p for p in sys.path if not p or Path(p).resolve() != HERE]
    main(sys.argv[1:])
