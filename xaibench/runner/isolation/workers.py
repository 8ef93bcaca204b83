"""Worker processes on this machine (``--executor local``), and the choice of executor.

:class:`LocalExecutor` runs every explainer call in a worker process, never in the runner's. It is
the one scheduling core (:class:`~xaibench.runner.isolation.scheduling.Scheduler`: job queue, groups and
parking, deadlines, deaths, answers in task order) on :class:`LocalTransport`, which adds:

- **Timeouts and crashes are enforced from outside.** A worker that overruns its deadline is
  killed with ``SIGKILL`` (its whole process group), which plugin code cannot catch: the outcome
  is ``"killed after 300 s"``. A worker that exits (``sys.exit``, ``os._exit``, a crash) gives
  ``"worker exited with status N"`` or ``"worker killed by signal SIGSEGV"``. Either way the
  worker is replaced. A worker says ``("ready",)`` once it has built the model and the explainer:
  the explainer call's clock starts then.
- **One explainer per worker.** A worker's group is its explainer (by name): it serves that one
  explainer for its whole life. When the pool moves on to another explainer, the worker is parked
  (idle, up to ``PARKED`` of them) and serves its explainer again on the next track. So whatever
  an explainer leaves behind in its process (patched torch functions, global module hooks,
  threads, state that :class:`~xaibench.runner.executors.WorkerState` does not reset) never
  reaches another explainer's calls, while its imports and models stay warm across tracks and
  batches. Within one explainer, every call still gets a fresh model copy, fresh samples and
  reset torch globals.
- **Cheap workers.** On Linux, workers are forked from a *zygote*: a process forked from the
  runner when the executor starts, before the runner runs any torch work. It builds each track's
  built-in model once (from the local weight cache, on the CPU) and forks workers that inherit the
  registry (plugins registered at run time included: that is why it forks rather than spawns) and
  the models built so far, so a fresh worker costs a ``fork``, not an import of torch or a model
  load (a fresh worker about to get a task whose built-in model it lacks is swapped for a fork that
  has it); a worker that meets a model it did not inherit builds it once (the weight cache again).
- **No plugin code in the zygote.** The zygote is not sandboxed, and what it imports or patches
  reaches every worker it forks afterwards. So it builds only xaibench's own models
  (:func:`~xaibench.runner.isolation.trusted.builtin_model`), checked on both sides of its pipe, with imports
  of anything but xaibench, the standard library and xaibench's own dependencies refused
  (:func:`~xaibench.runner.isolation.trusted.trusted_imports_only`); a build that left such a module
  behind all the same ends the zygote (and its workers), and a fresh one is forked from the runner.
  A model of a plugin (a stand-in for a distribution, or registered at run time) is built by the
  worker that needs it, in its sandbox, whatever made a fresh worker meet it (a crash, a timeout,
  more workers). Such a worker then serves only that model's distribution (its group is the
  explainer and the model's distribution: :meth:`LocalTransport.model_group`), so what the
  model's code left in it never reaches a built-in model's track.
  Forking from the zygote instead of from the runner matters: the CUDA runtime cannot be used in
  a child forked after its parent initialised it, and the zygote never does. (GNU OpenMP, which
  torch uses for intra-op threads, hangs in the main thread of a child forked after its parent
  ran a multi-threaded region; workers run tasks in a thread of their own, see ``_worker_main``.)
  Elsewhere (macOS, Windows) workers are started with ``spawn``: fork is unsafe there, and each
  worker imports xaibench and loads the installed plugins itself (plugins registered at run time
  are not seen; models are built per worker).
- **Answers are data.** A worker's reply is bytes of :mod:`xaibench.runner.isolation.wire` (a JSON header
  and raw numpy arrays, no pickle), read up to ``wire.MAX_REPLY_BYTES`` and decoded by the
  scheduler within its job's limit, so a hostile worker cannot run code in the runner's process
  through its reply, nor make it allocate more than that limit.
- **Sandboxed.** A forked worker enters a Landlock sandbox (:mod:`xaibench.sandbox`)
  before it runs plugin code: it writes only its own scratch folder (its ``TMPDIR``, made by the
  zygote and removed when the worker ends) and a few devices, opens no TCP connection, and
  cannot signal the runner, the zygote or other workers. On by default where the kernel offers
  Landlock; ``XAIBENCH_SANDBOX=0`` turns it off; :attr:`LocalExecutor.sandbox` says which, and a
  missing sandbox is said in one line on stderr. Spawned workers are not sandboxed (they run
  threads before any code of ours, and Landlock confines one thread).
- **No orphans.** Workers are killed with their parent (``PR_SET_PDEATHSIG`` on Linux), on
  :meth:`LocalExecutor.close`, when the executor is garbage-collected and at interpreter exit
  (``weakref.finalize``); the zygote reaps every worker it forked, the runner reaps the zygote.
  The zygote is a subreaper (``PR_SET_CHILD_SUBREAPER``): what a worker started and left behind,
  a daemon that called ``setsid`` included, becomes the zygote's child, which kills it when a
  worker ends and when the zygote stops.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
import weakref
from collections.abc import Collection, Sequence
from dataclasses import replace
from multiprocessing.connection import Connection, wait
from multiprocessing.reduction import recv_handle, send_handle
from pathlib import Path
from typing import Any

import torch

from xaibench.runner.config import executor_entry
from xaibench.runner.executors import (
    Executor,
    ModelSpec,
    WorkerState,
    encode_reply,
    plain_reply,
)
from xaibench.runner.isolation.processes import OutputForwarder, exit_reason, new_scratch, remove_scratch, say_once
from xaibench.runner.isolation.scheduling import Died, Event, Job, Reply, Scheduler, Slot, WorkerGone
from xaibench.runner.isolation.trusted import builtin_model, model_origin, trusted_imports_only, untrusted_modules
from xaibench.runner.isolation.wire import MAX_REPLY_BYTES, Refused
from xaibench.sandbox import (
    OFF_VARIABLE,
    SandboxError,
    child_pids,
    enter_sandbox,
    kill_descendants,
    sandbox_enabled,
    sandbox_status,
    silence_inherited_files,
    start_gpu_runtime,
    use_scratch,
    worker_writable,
)

# Idle workers kept for explainers that are not running now (they serve their explainer again on
# the next track without a fresh start: no new imports, models already built).
PARKED = 8
# How long to wait for the exit status of a worker that closed its pipe or was killed.
EXIT_WAIT_SECONDS = 10.0
# The exit status of a worker that could not enter its sandbox (it says why on stderr).
SANDBOX_FAILED = 70
PR_SET_CHILD_SUBREAPER = 36
# How often the zygote looks for workers that ended (besides being woken by their sentinels).
REAP_SECONDS = 0.5


def default_start_method() -> str:
    """``zygote`` (fork from a clean process) on Linux, ``spawn`` elsewhere; see the module doc."""
    return "zygote" if sys.platform.startswith("linux") else "spawn"


# ---------------------------------------------------------------------------------------- worker side


def _die_with_parent(parent: int) -> None:
    """Get ``SIGKILL`` when the parent process ends (Linux), and end now if it already has."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(0)


def _enter_sandbox(scratch: str, conn: Connection) -> None:
    """Sandbox this worker (:mod:`xaibench.sandbox`): it writes only to ``scratch`` (also its
    ``TMPDIR``) and the few devices of :func:`~xaibench.sandbox.worker_writable`, connects
    nowhere over TCP and signals no process outside itself; writable files it inherited are
    pointed at ``/dev/null``. A worker that cannot enter it says why and exits (status 70)."""
    use_scratch(scratch)
    try:
        silence_inherited_files(keep=[conn.fileno()])
        enter_sandbox(worker_writable(Path(scratch)), tcp_ports=(), before_filter=start_gpu_runtime)
    except (SandboxError, OSError) as exc:
        with contextlib.suppress(Exception):
            print(
                f"xaibench worker: cannot enter the sandbox: {exc} (set {OFF_VARIABLE}=0 to run without)",
                file=sys.stderr,
            )
            sys.stderr.flush()
        os._exit(SANDBOX_FAILED)


def _send(conn: Connection, message: tuple[Any, ...]) -> None:
    """Send a reply to the runner (:func:`~xaibench.runner.executors.encode_reply`)."""
    conn.send_bytes(encode_reply(message))


def _worker_main(
    conn: Connection,
    registry: Any,
    threads: int,
    models: dict[str, Any],
    close: Sequence[Connection],
    scratch: str | None = None,
) -> None:
    """A worker process: answers ``("task", ExplainTask)`` and ``("describe", ExplainerSpec)``.
    With a ``scratch`` folder, it enters the sandbox (:func:`_enter_sandbox`) before any plugin
    code runs (plugin modules imported by a spawned worker excepted).

    The tasks run in a thread started here, not in the main thread: GNU OpenMP keeps its thread
    pool per thread, and a forked process's main thread holds a copy of its parent's pool whose
    threads do not exist in the child, so a multi-threaded region there (``--threads 2``) would
    wait for them forever. A new thread gets a pool of its own."""
    for other in close:
        other.close()
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)  # its own process group: no terminal SIGINT, and killpg reaches its children
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(os.getppid())
    if registry is None:
        from xaibench.plugins.manager import get_registry

        registry = get_registry()
    if scratch is not None:
        _enter_sandbox(scratch, conn)
    state = WorkerState(registry=registry, threads=threads, models=dict(models))
    ended: list[BaseException] = []

    def serve() -> None:
        try:
            _serve(conn, state)
        except BaseException as exc:  # noqa: BLE001 - sys.exit() in plugin code ends the process
            ended.append(exc)

    thread = threading.Thread(target=serve, name="xaibench-worker", daemon=True)
    thread.start()
    thread.join()
    code = 0
    if ended:
        exc = ended[0]
        if isinstance(exc, SystemExit):
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        else:
            code = 1
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)  # without waiting for threads the plugin left running


def _serve(conn: Connection, state: WorkerState) -> None:
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message[0] == "describe":
            reply: Any = ("described", state.describe(message[1]))
        elif message[0] == "task":
            outcome = state.run(message[1], ready=lambda: _send(conn, ("ready",)))
            reply = ("done", plain_reply(outcome.outputs), outcome.error, outcome.timed_out, outcome.cost)
        else:
            return
        _send(conn, reply)  # an output it cannot encode is sent as the task's failure


def _zygote_build(models: WorkerState, spec: ModelSpec) -> tuple[str | None, bool]:
    """Build the model of ``spec`` in the zygote, on the CPU (workers move it to the device), if it
    is one of xaibench's own (:func:`~xaibench.runner.isolation.trusted.builtin_model`; any other is built
    by its worker, in the sandbox), with imports of untrusted modules refused. Returns the error
    (``None``: built) and whether the zygote is tainted: the build left a module that is not
    trusted in ``sys.modules`` (the zygote must end)."""
    if not builtin_model(models.registry, spec.name):
        return f"model {spec.name!r} is not one of xaibench's own: the worker builds it in its sandbox", False
    before = set(sys.modules)
    error = None
    try:
        with trusted_imports_only():
            models.model(replace(spec, device="cpu"))
    except Exception as exc:  # noqa: BLE001 - the worker builds it and reports
        error = f"{type(exc).__name__}: {exc}"
    foreign = untrusted_modules(set(sys.modules) - before)
    if foreign:
        shown = ", ".join(foreign[:5]) + (" ..." if len(foreign) > 5 else "")
        return f"building model {spec.name!r} in the zygote imported {shown}, which is not xaibench's own code", True
    return error, False


def _zygote_main(
    control: Connection, events: Connection, registry: Any, threads: int, parent: int, sandboxed: bool = False
) -> None:
    """The zygote's loop: build models on request (``preload``), fork workers (``spawn``), report
    every worker's exit status on ``events``, and on ``stop`` (or the runner's end) kill them all.

    It is the subreaper of its workers' descendants: a process a worker started and left (a
    daemon, even one that called ``setsid`` and so left the worker's process group) becomes the
    zygote's child when its parent ends, and is killed when any worker ends and when the zygote
    stops (:func:`kill_orphans`). With ``sandboxed``, each worker gets a scratch folder of its
    own, removed when it ends, and enters the sandbox in it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent)
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    torch.set_num_threads(1)  # never a multi-threaded OpenMP region here (see the module doc)
    ctx = mp.get_context("fork")
    models = WorkerState(registry=registry, threads=1)
    children: dict[int, Any] = {}
    scratches: dict[int, str] = {}
    try:
        while True:
            # A worker's sentinel closes only when every process holding it has ended (a daemon it
            # forked holds it too), so exits are also polled, every REAP_SECONDS.
            ready = wait([control, *(p.sentinel for p in children.values())], timeout=REAP_SECONDS)
            ended = [p for p in children.values() if p.exitcode is not None]
            for process in ended:
                children.pop(process.pid)
            if ended:
                kill_orphans(children)
            for process in ended:
                remove_scratch(scratches.pop(process.pid, None))
                events.send(("exit", process.pid, process.exitcode))
            if control in ready:
                try:
                    message = control.recv()
                except (EOFError, OSError):
                    return
                if message[0] == "preload":
                    error, tainted = _zygote_build(models, message[1])
                    if tainted:  # no more forks from this process: its workers end first, then it
                        with contextlib.suppress(Exception):
                            print(f"xaibench zygote: {error}; it ends", file=sys.stderr, flush=True)
                        _end_workers(children, scratches)
                    control.send(("preloaded", error, tainted))
                    if tainted:
                        return  # the runner forks a fresh zygote for the next worker
                elif message[0] == "spawn":
                    here, there = ctx.Pipe()
                    scratch = new_scratch("worker") if sandboxed else None
                    process = ctx.Process(
                        target=_worker_main,
                        args=(there, registry, threads, models.models, (control, events, here), scratch),
                        daemon=True,
                    )
                    process.start()
                    there.close()
                    children[process.pid] = process
                    if scratch is not None:
                        scratches[process.pid] = scratch
                    control.send(("spawned", process.pid))
                    send_handle(control, here.fileno(), parent)
                    here.close()
                else:
                    return
    finally:
        _end_workers(children, scratches)


def _end_workers(children: dict[int, Any], scratches: dict[int, str]) -> None:
    """Kill and reap every worker of the zygote (and what they left), remove their scratch folders."""
    for process in children.values():
        _kill_group(process.pid)
    kill_orphans({})  # the workers too: killed and reaped
    for scratch in scratches.values():
        remove_scratch(scratch)
    children.clear()
    scratches.clear()


def kill_orphans(workers: Collection[int], rounds: int = 100) -> None:
    """SIGKILL and reap every child of this process that is not one of ``workers``: the zygote is
    a subreaper, so these are processes that workers started and left behind. Repeated, since an
    orphan's own children become ours when it dies."""
    if not workers and kill_descendants():  # a sandboxed process cannot read its children's /proc
        return
    for _ in range(rounds):
        orphans = [pid for pid in child_pids() if pid not in workers]
        if not orphans:
            return
        for pid in orphans:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for pid in orphans:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def _kill_group(pid: int) -> None:
    """SIGKILL the worker ``pid`` and its process group (what it forked itself)."""
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(OSError):
            kill(pid, signal.SIGKILL)


# ---------------------------------------------------------------------------------------- parent side


class _Zygote:
    """The parent's end of the zygote (Linux): forks workers, reports their exit statuses."""

    preloads = True

    def __init__(self, registry: Any, threads: int, sandboxed: bool = False) -> None:
        self.control, control = mp.Pipe()
        self.events, events = mp.Pipe(duplex=False)
        parent = os.getpid()
        sys.stdout.flush()
        sys.stderr.flush()
        output, into = os.pipe()  # the zygote's and its workers' stdout and stderr (see OutputForwarder)
        pid = os.fork()
        if pid == 0:  # the zygote: never returns into the caller's code
            code = 0
            try:
                os.close(output)
                for fd in (1, 2):
                    os.dup2(into, fd)  # inherited by every worker it forks
                os.close(into)
                # Python's own streams on those descriptors too, whatever the caller had put there
                sys.stdout = open(1, "w", buffering=1, errors="backslashreplace", closefd=False)  # noqa: SIM115
                sys.stderr = open(2, "w", buffering=1, errors="backslashreplace", closefd=False)  # noqa: SIM115
                self.control.close()
                self.events.close()
                _zygote_main(control, events, registry, threads, parent, sandboxed)
            except BaseException:  # noqa: BLE001 - report and leave
                code = 1
            finally:
                os._exit(code)
        control.close()
        events.close()
        os.close(into)
        self.output = OutputForwarder(output)
        self.pid = pid
        self.registry = registry
        self.codes: dict[int, int] = {}
        self.models: set[str] = set()
        self.dead = False  # it ended (its events pipe closed): the executor starts another

    def preload(self, spec: ModelSpec) -> bool:
        """Have the zygote build the model of ``spec``, so that workers forked from now on inherit
        it; ``False`` when it did not (the worker builds it itself). Only xaibench's own models are
        built there (see the module doc); the zygote checks again."""
        if not builtin_model(self.registry, spec.name):
            return False
        if spec.identity not in self.models:
            try:
                self.control.send(("preload", spec))
                reply = self.control.recv()
            except (EOFError, OSError):
                self.dead = True
                return False
            if len(reply) > 2 and reply[2]:  # tainted: it ends, and the next start forks another
                self.dead = True
                return False
            if reply[1] is not None:
                return False
            self.models.add(spec.identity)
        return True

    def spawn(self) -> tuple[int, Connection, frozenset[str]]:
        self.control.send(("spawn",))
        _, pid = self.control.recv()
        return pid, Connection(recv_handle(self.control)), frozenset(self.models)

    def handles(self, pids: Sequence[int]) -> list[Any]:
        """What to wait on to learn that one of the workers ``pids`` ended."""
        return [] if self.dead else [self.events]

    def poll(self) -> None:
        try:
            while not self.dead and self.events.poll(0):
                _, pid, code = self.events.recv()
                self.codes[pid] = code
        except (EOFError, OSError):
            self.dead = True

    def exit_code(self, pid: int, seconds: float) -> int | None:
        deadline = time.monotonic() + seconds
        while pid not in self.codes:
            left = deadline - time.monotonic()
            try:
                if self.dead or left <= 0 or not self.events.poll(left):
                    return None
            except OSError:
                return None
            self.poll()
        return self.codes.pop(pid)

    def exited(self, pid: int) -> bool:
        return pid in self.codes

    def forget(self, pid: int) -> None:
        self.codes.pop(pid, None)

    def close(self) -> None:
        """Stop the zygote (it kills and reaps its workers) and reap it."""
        self.dead = True
        with contextlib.suppress(OSError):
            self.control.send(("stop",))
        deadline = time.monotonic() + EXIT_WAIT_SECONDS
        try:
            while os.waitpid(self.pid, os.WNOHANG)[0] == 0:
                if time.monotonic() > deadline:
                    os.kill(self.pid, signal.SIGKILL)
                    os.waitpid(self.pid, 0)
                    break
                time.sleep(0.005)
        except ChildProcessError:
            pass
        self.control.close()
        self.events.close()
        self.output.join(1.0)  # the workers' last lines before the caller's next ones


class _Spawner:
    """Workers started with ``spawn`` or ``forkserver`` (not Linux; see the module doc)."""

    preloads = False

    def __init__(self, method: str, threads: int) -> None:
        self.ctx = mp.get_context(method)
        self.threads = threads
        self.processes: dict[int, Any] = {}
        self.dead = False  # closed: its workers are not used again

    def preload(self, spec: ModelSpec) -> bool:
        return False

    def spawn(self) -> tuple[int, Connection, frozenset[str]]:
        here, there = self.ctx.Pipe()
        process = self.ctx.Process(target=_worker_main, args=(there, None, self.threads, {}, ()), daemon=True)
        process.start()
        there.close()
        self.processes[process.pid] = process
        return process.pid, here, frozenset()

    def handles(self, pids: Sequence[int]) -> list[Any]:
        return [self.processes[pid].sentinel for pid in pids if pid in self.processes]

    def poll(self) -> None:
        pass

    def exit_code(self, pid: int, seconds: float) -> int | None:
        process = self.processes.get(pid)
        if process is None:
            return None
        process.join(seconds)
        if process.exitcode is not None:
            self.processes.pop(pid, None)
        return process.exitcode

    def exited(self, pid: int) -> bool:
        process = self.processes.get(pid)
        return process is not None and process.exitcode is not None

    def forget(self, pid: int) -> None:
        process = self.processes.pop(pid, None)
        if process is not None:
            process.join(EXIT_WAIT_SECONDS)

    def close(self) -> None:
        self.dead = True
        for pid in list(self.processes):
            _kill_group(pid)
            self.forget(pid)


class LocalSlot:
    """One worker process, as :class:`~xaibench.runner.isolation.scheduling.Scheduler` drives it: the parent's
    end of its pipe, and what started it (and reaps it)."""

    def __init__(self, pid: int, conn: Connection, spawner: _Zygote | _Spawner, models: frozenset[str]) -> None:
        self.pid = pid
        self.conn = conn
        self.spawner = spawner
        self.seen = set(models)  # models it has: inherited from the zygote, or built for a task
        self.reaped = False
        self.code: int | None = None  # its exit code, once reaped (None: unknown)

    def send(self, job: Job) -> str:
        try:
            self.conn.send((job.kind, job.payload))
        except OSError:
            self.kill()
            raise WorkerGone(exit_reason(self.code)) from None
        if job.kind == "task":
            self.seen.add(job.payload.model.identity)
        return "setup"  # the worker says "ready" once its model and explainer are built

    def has_reply(self) -> bool:
        return self.conn.poll(0)

    def receive(self, deadline: float | None) -> Event:
        try:
            return Reply(self._recv_bytes(deadline))
        except OSError as exc:
            if str(exc) == "bad message length":  # longer than MAX_REPLY_BYTES: refused unread
                return Reply(Refused(f"a reply may not exceed {MAX_REPLY_BYTES} bytes"))
            self.kill()
            return Died(exit_reason(self.code))
        except EOFError:
            self.kill()
            return Died(exit_reason(self.code))

    def _recv_bytes(self, deadline: float | None) -> bytes:
        """The next message (at most ``MAX_REPLY_BYTES``); a worker that stalls half-way 5 s past
        ``deadline`` is killed (which ends the read with ``EOFError``)."""
        if deadline is None:
            return self.conn.recv_bytes(MAX_REPLY_BYTES)
        left = max(0.0, deadline - time.monotonic()) + 5.0
        watchdog = threading.Timer(left, _kill_group, (self.pid,))
        watchdog.daemon = True
        watchdog.start()
        try:
            return self.conn.recv_bytes(MAX_REPLY_BYTES)
        finally:
            watchdog.cancel()

    def ended(self) -> str | None:
        self.spawner.poll()
        if not self.spawner.exited(self.pid):
            return None
        self.kill()
        return exit_reason(self.code)

    def alive(self) -> bool:
        self.spawner.poll()
        return not self.spawner.dead and not self.spawner.exited(self.pid)

    def kill(self) -> None:
        if self.reaped:
            return
        self.reaped = True
        self.spawner.poll()
        if not self.spawner.exited(self.pid):  # (a reaped pid may be reused: never kill it)
            _kill_group(self.pid)
        self.conn.close()
        self.code = self.spawner.exit_code(self.pid, EXIT_WAIT_SECONDS)

    def abandon(self) -> None:
        if self.reaped:
            return
        self.reaped = True
        _kill_group(self.pid)
        with contextlib.suppress(OSError):
            self.conn.close()
        self.spawner.forget(self.pid)


class LocalTransport:
    """Worker processes on this machine (see the module doc): forked from a zygote, or spawned.
    A worker serves one explainer (its group is the explainer's name); up to ``PARKED`` idle
    workers of other explainers are kept warm."""

    start_seconds = None  # a worker is ready once forked
    park_limit = PARKED
    poll_seconds = 1.0  # (an exit wakes the wait too, through the zygote's events)

    def __init__(self, registry: Any, *, threads: int, start_method: str, sandboxed: bool = False) -> None:
        if start_method not in ("zygote", "spawn", "forkserver"):
            raise ValueError(f"unknown start method {start_method!r}")
        self.registry = registry
        self.threads = threads
        self.start_method = start_method
        self.sandboxed = sandboxed
        self.spawner: _Zygote | _Spawner | None = None
        self._finalizer: weakref.finalize | None = None

    def _new_spawner(self) -> _Zygote | _Spawner:
        if self._finalizer is not None:
            self._finalizer()
        if self.start_method == "zygote":
            self.spawner = _Zygote(self.registry, self.threads, self.sandboxed)
        else:
            self.spawner = _Spawner(self.start_method, self.threads)
        # Stops the workers when close() is not called: garbage collection or interpreter exit.
        self._finalizer = weakref.finalize(self, self.spawner.close)
        return self.spawner

    def start(self) -> LocalSlot:
        """A new worker; a zygote that died (killed from outside, or ended itself) is replaced once."""
        spawner = self.spawner if self.spawner is not None and not self.spawner.dead else self._new_spawner()
        for attempt in range(2):
            try:
                pid, conn, models = spawner.spawn()
                return LocalSlot(pid, conn, spawner, models)
            except (EOFError, OSError):
                if attempt:
                    raise
                spawner = self._new_spawner()
        raise AssertionError("unreachable")

    def group(self, explainer: str) -> str:
        return explainer

    def model_group(self, model: ModelSpec) -> str | None:
        """``None`` for xaibench's own models; else the model's distribution: a worker that built
        it (its import and constructor ran there) serves only tasks of that distribution's models
        (see the module doc)."""
        return model_origin(self.registry, model.name)

    def warm(self, slot: Slot, job: Job) -> Slot:
        """A fresh fork that inherits the task's model, built once by the zygote, instead of
        ``slot`` (which would build it itself). Only for xaibench's own models (see the module doc)."""
        assert isinstance(slot, LocalSlot) and self.spawner is not None
        model = job.payload.model if job.kind == "task" else None
        if model is None or model.identity in slot.seen:
            return slot
        spawner = self.spawner
        if not spawner.preload(model) and not spawner.dead:
            return slot
        slot.kill()  # a fork that has the model; or the zygote ended (it took its workers along)
        return self.start()

    def wait(self, slots: Sequence[Slot], timeout: float | None) -> Collection[Slot]:
        local = [s for s in slots if isinstance(s, LocalSlot)]
        ends = self.spawner.handles([s.pid for s in local]) if self.spawner is not None else []
        ready = set(wait([s.conn for s in local] + ends, timeout=timeout))
        return [s for s in local if s.conn in ready]

    def start_error(self, reason: str | None) -> Exception:
        return RuntimeError(f"a worker process did not start: {reason or 'timed out'}")  # (forked at once)

    def close(self) -> None:
        """Stop the zygote (it kills and reaps its workers); a later ``start`` forks another."""
        finalizer, self._finalizer, self.spawner = self._finalizer, None, None
        if finalizer is not None:
            finalizer()  # the spawner's close, once


class LocalExecutor(Scheduler):
    """A pool of ``workers`` worker processes on this machine; see the module doc.

    The zygote (Linux) is forked at construction: build the executor before the runner's own
    torch work. ``close`` kills every worker; a later ``run`` starts them again. Workers are
    sandboxed where Landlock is available, unless ``XAIBENCH_SANDBOX=0``; ``sandbox`` says which
    (:func:`worker_sandbox`), and a missing sandbox is said once on stderr.
    """

    def __init__(
        self, registry: Any = None, *, workers: int = 1, threads: int = 1, start_method: str | None = None
    ) -> None:
        self.threads = max(1, int(threads))
        self.start_method = start_method or default_start_method()
        self.sandbox = worker_sandbox(self.start_method)
        sandboxed = self.sandbox.startswith("landlock")
        if not sandboxed and not self.sandbox.startswith("off"):
            say_once(f"warning: workers run without a sandbox ({self.sandbox})")
        transport = LocalTransport(registry, threads=self.threads, start_method=self.start_method, sandboxed=sandboxed)
        super().__init__(transport, workers)


def worker_sandbox(start_method: str = "zygote") -> str:
    """What confines local workers started by ``start_method``: ``"landlock ABI N"``,
    ``"off (XAIBENCH_SANDBOX=0)"``, or ``"unavailable: <reason>"``
    (:func:`~xaibench.sandbox.sandbox_status`). Only forked workers can be sandboxed: a
    spawned one imports torch, which starts a thread, before it runs any code of ours, and Landlock
    confines only the thread that enters it (and what that thread starts later)."""
    if not sandbox_enabled():
        return f"off ({OFF_VARIABLE}=0)"
    status = sandbox_status()
    if status.startswith("landlock") and start_method != "zygote":
        return f"unavailable: {start_method} workers run threads before they could enter Landlock"
    return status


def make_executor(kind: str, registry: Any, **options: Any) -> Executor:
    """The executor ``kind`` of :data:`~xaibench.runner.config.EXECUTOR_TABLE` (``local``: worker
    processes on this machine, ``ray``: :class:`xaibench.runner.isolation.ray_executor.RayExecutor`,
    ``inprocess``: this process, trusted code only), built from its entry: its constructor gets
    the registry and the ``options`` its entry takes (run options by :class:`RunConfig` field:
    ``workers``, ``threads``, ``ray_address``; :func:`~xaibench.runner.config.executor_options`
    gives a configuration's), the others ignored. ``ValueError`` for an unknown ``kind``."""
    entry = executor_entry(kind)
    module, _, name = entry.constructor.partition(":")
    constructor = getattr(importlib.import_module(module), name)
    return constructor(registry, **{keyword: options[o] for o, keyword in entry.options.items() if o in options})
