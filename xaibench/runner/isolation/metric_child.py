"""The metric worker process (child side of :mod:`xaibench.runner.isolation.metric_worker`).

Started as ``python -m xaibench.runner.isolation.metric_child SCRATCH PARENT_PID`` with pipes on stdin and
stdout. Before it imports torch or any plugin (this module imports only the standard library and
:mod:`xaibench.sandbox`), it:

1. asks to be killed with its parent (``PR_SET_PDEATHSIG``, Linux) and ends if that is gone, and
   becomes a subreaper (``PR_SET_CHILD_SUBREAPER``): every process a metric started and left
   behind is killed after each batch;
2. keeps its stdin and stdout for the runner's messages and points fds 0 and 1 elsewhere
   (``/dev/null`` and its stderr), so a plugin's ``print`` cannot forge a reply;
3. makes ``SCRATCH`` its ``TMPDIR`` and enters the worker sandbox
   (:func:`~xaibench.sandbox.enter_sandbox`: writes only ``SCRATCH`` and a few devices, no
   TCP, no signal outside itself), unless ``XAIBENCH_SANDBOX=0``; a child that cannot enter it
   says why on stderr and exits with status 70.

Then it imports :mod:`xaibench.runner.isolation.metric_serve` (torch, its own registry, the plugins) and
serves the runner's messages until its stdin closes.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from pathlib import Path

from xaibench.sandbox import (
    OFF_VARIABLE,
    SandboxError,
    enter_sandbox,
    sandbox_enabled,
    sandbox_status,
    start_gpu_runtime,
    use_scratch,
    worker_writable,
)

SANDBOX_FAILED = 70  # the exit status of a child that could not enter its sandbox
PR_SET_CHILD_SUBREAPER = 36


def _die_with_parent(parent: int) -> None:
    """Get ``SIGKILL`` when the runner ends, and be the reaper of what the metric leaves behind
    (daemons that called ``setsid`` included: they become this process's children, killed after
    every batch)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
            libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(0)


def _private_pipes() -> tuple[int, int]:
    """The runner's pipes on private descriptors; fd 0 reads ``/dev/null``, fd 1 is stderr."""
    inbox, outbox = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return inbox, outbox


def _sandbox(scratch: str) -> None:
    use_scratch(scratch)
    if not sandbox_enabled() or not sandbox_status().startswith("landlock"):
        return  # off, or no Landlock on this system (said once at the run's start, as for workers)
    try:
        enter_sandbox(worker_writable(Path(scratch)), tcp_ports=(), before_filter=start_gpu_runtime)
    except (SandboxError, OSError) as exc:
        with contextlib.suppress(Exception):
            print(f"cannot enter the sandbox: {exc} (set {OFF_VARIABLE}=0 to run without)", file=sys.stderr)
            sys.stderr.flush()
        os._exit(SANDBOX_FAILED)


def main(argv: list[str]) -> None:
    scratch, parent = argv[0], int(argv[1])
    _die_with_parent(parent)
    inbox, outbox = _private_pipes()
    _sandbox(scratch)
    from xaibench.runner.isolation.metric_serve import serve  # torch, the registry, plugins: only now

    serve(inbox, outbox)


if __name__ == "__main__":
    main(sys.argv[1:])
