"""Worker processes on this machine (``--executor local``), and the choice of executor.

:class:`LocalExecutor` runs every explainer call in a worker process, never in the runner's:

- **Timeouts and crashes are enforced from outside.** The parent waits for each answer with a
  deadline (``task.timeout`` seconds for the explainer call; building the model and the explainer
  first gets ``max(timeout, SETUP_SECONDS)``). A worker that overruns is killed with ``SIGKILL``
  (its whole process group) and replaced: the outcome is ``"killed after 300 s"``. Plugin code
  cannot catch that. A worker that exits (``sys.exit``, ``os._exit``, a crash) gives
  ``"worker exited with status N"`` or ``"worker killed by signal SIGSEGV"`` and is replaced.
- **One explainer per worker.** A worker serves one explainer (by name) for its whole life:
  when the pool moves on to another explainer, the worker is parked (idle, up to ``PARKED``
  of them) and serves its explainer again on the next track, and the new explainer gets a parked
  worker of its own or a fresh one. So whatever an explainer leaves behind in its process
  (patched torch functions, global module hooks, threads, state that
  :class:`~xaibench.runner.executors.WorkerState` does not reset) never reaches another
  explainer's calls, while its imports and models stay warm across tracks and batches. Within
  one explainer, every call still gets a fresh model copy, fresh samples and reset torch globals.
- **Cheap workers.** On Linux, workers are forked from a *zygote*: a process forked from the
  runner when the executor starts, before the runner runs any torch work. It builds each track's
  model once (from the local weight cache, on the CPU) and forks workers that inherit the
  registry (plugins registered at run time included: that is why it forks rather than spawns) and
  the models built so far, so a fresh worker costs a ``fork``, not an import of torch or a model
  load; a worker that meets a model it did not inherit builds it once (the weight cache again).
  Forking from the zygote instead of from the runner matters: the CUDA runtime cannot be used in
  a child forked after its parent initialised it, and the zygote never does. (GNU OpenMP, which
  torch uses for intra-op threads, hangs in the main thread of a child forked after its parent
  ran a multi-threaded region; workers run tasks in a thread of their own, see ``_worker_main``.)
  Elsewhere (macOS, Windows) workers are started with ``spawn``: fork is unsafe there, and each
  worker imports xaibench and loads the installed plugins itself (plugins registered at run time
  are not seen; models are built per worker).
- **Answers are data.** A worker's reply is unpickled with a restricted unpickler that builds
  only Python's plain types and numpy arrays and scalars, so a hostile worker cannot run code in
  the runner's process through its reply.
- **No orphans.** Workers are killed with their parent (``PR_SET_PDEATHSIG`` on Linux), on
  :meth:`LocalExecutor.close`, when the executor is garbage-collected and at interpreter exit
  (``weakref.finalize``); the zygote reaps every worker it forked, the runner reaps the zygote.

Tasks of one :meth:`LocalExecutor.run` call are spread over ``workers`` processes; outcomes are
yielded in task order, so records do not depend on the worker count.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing as mp
import os
import pickle
import signal
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from multiprocessing.reduction import recv_handle, send_handle
from typing import Any

import torch

from xaibench.runner.executors import (
    EXECUTORS,
    Description,
    Executor,
    ExplainerSpec,
    ExplainOutcome,
    ExplainTask,
    InProcessExecutor,
    ModelSpec,
    WorkerState,
    load_reply,
    plain_reply,
)

# Seconds allowed to build a model and an explainer in a worker, at least (the explainer call
# itself gets the task's timeout). None when the run has no timeout.
SETUP_SECONDS = 120.0
# Idle workers kept for explainers that are not running now (they serve their explainer again on
# the next track without a fresh start: no new imports, models already built).
PARKED = 8
# How long to wait for the exit status of a worker that closed its pipe or was killed.
EXIT_WAIT_SECONDS = 10.0


def default_start_method() -> str:
    """``zygote`` (fork from a clean process) on Linux, ``spawn`` elsewhere; see the module doc."""
    return "zygote" if sys.platform.startswith("linux") else "spawn"


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


# ---------------------------------------------------------------------------------------- worker side


def _die_with_parent(parent: int) -> None:
    """Get ``SIGKILL`` when the parent process ends (Linux), and end now if it already has."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(0)


def _send(conn: Connection, message: Any) -> None:
    conn.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))


def _worker_main(
    conn: Connection, registry: Any, threads: int, models: dict[str, Any], close: Sequence[Connection]
) -> None:
    """A worker process: answers ``("task", ExplainTask)`` and ``("describe", ExplainerSpec)``.

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
            reply = ("done", plain_reply(outcome.outputs), outcome.error, outcome.timed_out)
        else:
            return
        try:
            _send(conn, reply)
        except Exception as exc:  # noqa: BLE001 - e.g. an output object that cannot be pickled
            text = str(exc).splitlines()[0] if str(exc) else ""
            _send(conn, ("done", None, f"explainer output cannot be sent: {type(exc).__name__}: {text}"[:300], False))


def _zygote_main(control: Connection, events: Connection, registry: Any, threads: int, parent: int) -> None:
    """The zygote's loop: build models on request (``preload``), fork workers (``spawn``), report
    every worker's exit status on ``events``, and on ``stop`` (or the runner's end) kill them all."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent)
    torch.set_num_threads(1)  # never a multi-threaded OpenMP region here (see the module doc)
    ctx = mp.get_context("fork")
    models = WorkerState(registry=registry, threads=1)
    children: dict[int, Any] = {}
    try:
        while True:
            sentinels = {p.sentinel: p for p in children.values()}
            for ready in wait([control, *sentinels]):
                if ready is not control:
                    process = sentinels[ready]
                    process.join()
                    children.pop(process.pid, None)
                    events.send(("exit", process.pid, process.exitcode))
                    continue
                try:
                    message = control.recv()
                except (EOFError, OSError):
                    return
                if message[0] == "preload":
                    spec: ModelSpec = message[1]
                    try:
                        models.model(replace(spec, device="cpu"))  # workers move it to the device
                        control.send(("preloaded", None))
                    except Exception as exc:  # noqa: BLE001 - the worker builds it and reports
                        control.send(("preloaded", f"{type(exc).__name__}: {exc}"))
                elif message[0] == "spawn":
                    here, there = ctx.Pipe()
                    process = ctx.Process(
                        target=_worker_main,
                        args=(there, registry, threads, models.models, (control, events, here)),
                        daemon=True,
                    )
                    process.start()
                    there.close()
                    children[process.pid] = process
                    control.send(("spawned", process.pid))
                    send_handle(control, here.fileno(), parent)
                    here.close()
                else:
                    return
    finally:
        for process in children.values():
            _kill_group(process.pid)
        for process in children.values():
            process.join(EXIT_WAIT_SECONDS)


def _kill_group(pid: int) -> None:
    """SIGKILL the worker ``pid`` and its process group (what it forked itself)."""
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(OSError):
            kill(pid, signal.SIGKILL)


# ---------------------------------------------------------------------------------------- parent side


class _Zygote:
    """The parent's end of the zygote (Linux): forks workers, reports their exit statuses."""

    preloads = True

    def __init__(self, registry: Any, threads: int) -> None:
        self.control, control = mp.Pipe()
        self.events, events = mp.Pipe(duplex=False)
        parent = os.getpid()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the zygote: never returns into the caller's code
            code = 0
            try:
                self.control.close()
                self.events.close()
                _zygote_main(control, events, registry, threads, parent)
            except BaseException:  # noqa: BLE001 - report and leave
                code = 1
            finally:
                os._exit(code)
        control.close()
        events.close()
        self.pid = pid
        self.codes: dict[int, int] = {}
        self.models: set[str] = set()
        self.dead = False  # it ended (its events pipe closed): the executor starts another

    def preload(self, spec: ModelSpec) -> bool:
        if spec.identity not in self.models:
            try:
                self.control.send(("preload", spec))
                _, error = self.control.recv()
            except (EOFError, OSError):
                self.dead = True
                return False
            if error is not None:
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


class _Spawner:
    """Workers started with ``spawn`` or ``forkserver`` (not Linux; see the module doc)."""

    preloads = False

    def __init__(self, method: str, threads: int) -> None:
        self.ctx = mp.get_context(method)
        self.threads = threads
        self.processes: dict[int, Any] = {}

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
        for pid in list(self.processes):
            _kill_group(pid)
            self.forget(pid)


@dataclass
class _Job:
    """One task or description in flight: what to send, and the time limits."""

    index: int
    message: tuple[str, Any]
    name: str  # the explainer it runs
    model: ModelSpec | None
    call_limit: float | None  # the explainer call's timeout
    setup_limit: float | None  # building the model and explainer


@dataclass
class _Worker:
    pid: int
    conn: Connection
    spawner: _Zygote | _Spawner  # what started it (and reaps it)
    models: frozenset[str]  # models it was forked with (built by the zygote)
    name: str | None = None  # the one explainer it serves, once it served one
    job: _Job | None = None
    phase: str = "setup"
    deadline: float | None = None
    seen: set[str] = field(default_factory=set)  # models it has (inherited or built)


class LocalExecutor:
    """A pool of ``workers`` worker processes on this machine; see the module doc.

    The zygote (Linux) is forked at construction: build the executor before the runner's own
    torch work. ``close`` kills every worker; a later ``run`` starts them again.
    """

    def __init__(
        self, registry: Any = None, *, workers: int = 1, threads: int = 1, start_method: str | None = None
    ) -> None:
        self.registry = registry
        self.size = max(1, int(workers))
        self.threads = max(1, int(threads))
        self.start_method = start_method or default_start_method()
        if self.start_method not in ("zygote", "spawn", "forkserver"):
            raise ValueError(f"unknown start method {self.start_method!r}")
        self._spawner: _Zygote | _Spawner | None = None
        self._finalizer: weakref.finalize | None = None
        self._workers: list[_Worker] = []  # the pool: one slot per worker
        self._parked: list[_Worker] = []  # idle workers of other explainers, oldest first
        self._start()

    # -- processes

    def _start(self) -> None:
        if self._spawner is None:
            self._new_spawner()
        while len(self._workers) < self.size:
            self._workers.append(self._fresh())

    def _new_spawner(self) -> None:
        if self._finalizer is not None:
            self._finalizer()
        if self.start_method == "zygote":
            self._spawner = _Zygote(self.registry, self.threads)
        else:
            self._spawner = _Spawner(self.start_method, self.threads)
        # Stops the workers when close() is not called: garbage collection or interpreter exit.
        self._finalizer = weakref.finalize(self, self._spawner.close)

    def _fresh(self) -> _Worker:
        """A new worker; a zygote that died (killed from outside) is replaced once."""
        for attempt in range(2):
            spawner = self._spawner
            assert spawner is not None
            try:
                pid, conn, models = spawner.spawn()
                return _Worker(pid=pid, conn=conn, spawner=spawner, models=models, seen=set(models))
            except (EOFError, OSError):
                if attempt:
                    raise
                self._new_spawner()
        raise AssertionError("unreachable")

    def _kill(self, worker: _Worker) -> int | None:
        """Kill ``worker`` (if it still runs) and return its exit code once it is reaped."""
        spawner = worker.spawner
        spawner.poll()
        if not spawner.exited(worker.pid):  # (a reaped pid may be reused: never kill it)
            _kill_group(worker.pid)
        worker.conn.close()
        return spawner.exit_code(worker.pid, EXIT_WAIT_SECONDS)

    def _renew(self, worker: _Worker) -> _Worker:
        """Replace ``worker`` in the pool by a fresh one (the old one is killed)."""
        self._kill(worker)
        fresh = self._fresh()
        self._workers[self._workers.index(worker)] = fresh
        return fresh

    def close(self) -> None:
        """Kill every worker (and the zygote); a later ``run`` starts fresh ones."""
        workers, self._workers, self._parked = self._workers + self._parked, [], []
        finalizer, self._finalizer, self._spawner = self._finalizer, None, None
        for worker in workers:
            _kill_group(worker.pid)
            with contextlib.suppress(OSError):
                worker.conn.close()
        if finalizer is not None:
            finalizer()  # the spawner's close, once

    # -- the executor interface

    def run(self, tasks: Sequence[ExplainTask]) -> Iterator[ExplainOutcome]:
        jobs = []
        for i, task in enumerate(tasks):
            timeout = task.timeout or None
            setup = None if timeout is None else max(timeout, SETUP_SECONDS)
            jobs.append(_Job(i, ("task", task), task.explainer.name, task.model, timeout, setup))
        yield from self._execute(jobs)

    def describe(self, spec: ExplainerSpec, timeout: float | None = None) -> Description:
        """Construct the explainer of ``spec`` in a worker (see ``WorkerState.describe``)."""
        setup = None if not timeout else max(timeout, SETUP_SECONDS)
        (answer,) = list(self._execute([_Job(0, ("describe", spec), spec.name, None, None, setup)]))
        return answer

    # -- the loop

    def _execute(self, jobs: list[_Job]) -> Iterator[Any]:
        self._start()
        queue = deque(jobs)
        done: dict[int, Any] = {}
        following = 0
        try:
            while following < len(jobs):
                if following in done:
                    yield done.pop(following)
                    following += 1
                    continue
                for worker in list(self._workers):
                    if worker.job is None and queue:
                        self._assign(worker, queue.popleft(), done)
                self._step(done)
        finally:
            for worker in list(self._workers):  # abandoned (interrupted): kill, start afresh next time
                if worker.job is not None:
                    _kill_group(worker.pid)
                    worker.conn.close()
                    self._workers.remove(worker)
                    worker.spawner.forget(worker.pid)

    def _assign(self, worker: _Worker, job: _Job, done: dict[int, Any]) -> None:
        """Send ``job`` to the pool's slot held by ``worker``, swapping in a worker of ``job``'s
        explainer first when ``worker`` serves another one (see the module doc)."""
        assert self._spawner is not None
        slot, model = self._workers.index(worker), job.model
        if worker.name not in (None, job.name):
            self._park(worker)
            worker = self._unpark(job.name) or self._fresh()
        unused = worker.name is None and model is not None and model.identity not in worker.seen
        if unused and self._spawner.preload(model):  # a fresh fork inherits the model, built once
            self._kill(worker)
            worker = self._fresh()
        self._workers[slot] = worker
        for attempt in range(2):
            try:
                worker.conn.send(job.message)
                break
            except OSError:  # it died while idle: start another
                code = self._kill(worker)
                worker = self._fresh()
                self._workers[slot] = worker
                if attempt == 1:
                    done[job.index] = self._failure(job, exit_reason(code))
                    return
        worker.name, worker.job, worker.phase = job.name, job, "setup"
        if model is not None:
            worker.seen.add(model.identity)
        worker.deadline = None if job.setup_limit is None else time.monotonic() + job.setup_limit

    def _park(self, worker: _Worker) -> None:
        """Keep an idle worker of one explainer for later tracks (its imports and models stay
        warm); the least recently parked beyond ``PARKED`` are killed."""
        self._parked.append(worker)
        while len(self._parked) > PARKED:
            self._kill(self._parked.pop(0))

    def _unpark(self, name: str) -> _Worker | None:
        for worker in list(self._parked):
            if worker.name == name:
                self._parked.remove(worker)
                worker.spawner.poll()
                if not worker.spawner.exited(worker.pid) and worker.spawner is self._spawner:
                    return worker
                self._kill(worker)  # died while parked: reap it
        return None

    def _step(self, done: dict[int, Any]) -> None:
        """Wait for the next answer, exit or deadline of a busy worker and handle it."""
        assert self._spawner is not None
        busy = [w for w in self._workers if w.job is not None]
        if not busy:
            return
        deadlines = [w.deadline for w in busy if w.deadline is not None]
        slice_s = 1.0 if not deadlines else min(1.0, max(0.0, min(deadlines) - time.monotonic()))
        ready = set(wait([w.conn for w in busy] + self._spawner.handles([w.pid for w in busy]), timeout=slice_s))
        for worker in busy:
            if worker.conn in ready:
                self._receive(worker, done)
        self._spawner.poll()
        now = time.monotonic()
        for worker in [w for w in self._workers if w.job is not None]:
            if worker.conn.poll(0):
                continue  # an answer arrived: read it on the next step
            if worker.deadline is not None and now >= worker.deadline:
                self._overran(worker, done)
            elif worker.spawner.exited(worker.pid):
                self._died(worker, done)

    def _receive(self, worker: _Worker, done: dict[int, Any]) -> None:
        job = worker.job
        assert job is not None
        while worker.job is job and worker.conn.poll(0):
            try:
                data = self._recv_bytes(worker)
                message = load_reply(data)
            except (EOFError, OSError):
                self._died(worker, done)
                return
            except Exception as exc:  # noqa: BLE001 - a reply that is not plain data
                text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                done[job.index] = self._failure(job, f"worker sent a reply that is not allowed: {text}"[:300])
                self._renew(worker)
                return
            kind = message[0] if isinstance(message, tuple) and message else None
            if kind == "ready" and worker.phase == "setup":
                worker.phase = "call"
                limit = job.call_limit
                worker.deadline = None if limit is None else time.monotonic() + limit
            elif kind == "done" and len(message) == 4 and job.message[0] == "task":
                _, outputs, error, timed_out = message
                done[job.index] = ExplainOutcome(
                    outputs=list(outputs) if outputs is not None else None,
                    error=None if error is None else str(error),
                    timed_out=bool(timed_out),
                )
                if error is None and not isinstance(outputs, list):
                    done[job.index] = ExplainOutcome(error="worker sent outputs that are not a list")
                worker.job, worker.deadline = None, None
            elif kind == "described" and job.message[0] == "describe" and _description(message[1]):
                done[job.index] = tuple(message[1])
                worker.job, worker.deadline = None, None
            else:
                done[job.index] = self._failure(job, "worker sent a reply that does not follow the protocol")
                self._renew(worker)
                return

    def _recv_bytes(self, worker: _Worker) -> bytes:
        """The next message of ``worker``; a worker that stalls half-way past its deadline is killed
        (which ends the read with ``EOFError``)."""
        if worker.deadline is None:
            return worker.conn.recv_bytes()
        left = max(0.0, worker.deadline - time.monotonic()) + 5.0
        watchdog = threading.Timer(left, _kill_group, (worker.pid,))
        watchdog.daemon = True
        watchdog.start()
        try:
            return worker.conn.recv_bytes()
        finally:
            watchdog.cancel()

    def _failure(self, job: _Job, reason: str, *, timed_out: bool = False) -> Any:
        if job.message[0] == "describe":
            return ("failed", f"explainer constructor: {reason}")
        return ExplainOutcome(error=reason, timed_out=timed_out)

    def _died(self, worker: _Worker, done: dict[int, Any]) -> None:
        job = worker.job
        assert job is not None
        code = self._kill(worker)
        done[job.index] = self._failure(job, exit_reason(code))
        self._workers[self._workers.index(worker)] = self._fresh()

    def _overran(self, worker: _Worker, done: dict[int, Any]) -> None:
        job = worker.job
        assert job is not None
        if worker.phase == "call" and job.call_limit is not None:
            reason, timed_out = f"killed after {job.call_limit:g} s", True
        elif job.message[0] == "describe":
            reason, timed_out = f"killed after {job.setup_limit:g} s", False
        else:
            reason, timed_out = f"killed after {job.setup_limit:g} s building the model and the explainer", False
        done[job.index] = self._failure(job, reason, timed_out=timed_out)
        self._renew(worker)


def _description(value: Any) -> bool:
    return isinstance(value, tuple) and len(value) == 2 and value[0] in ("ok", "invalid", "failed")


def make_executor(
    kind: str, registry: Any, *, workers: int = 1, threads: int = 1, ray_address: str | None = None
) -> Executor:
    """The executor ``kind``: ``local`` (worker processes on this machine), ``ray``
    (:class:`xaibench.runner.ray_executor.RayExecutor`) or ``inprocess`` (this process; trusted
    code only)."""
    if kind not in EXECUTORS:
        raise ValueError(f"unknown executor {kind!r}; known: {', '.join(EXECUTORS)}")
    if kind == "local":
        return LocalExecutor(registry, workers=workers, threads=threads)
    if kind == "ray":
        from xaibench.runner.ray_executor import RayExecutor

        return RayExecutor(registry, workers=workers, threads=threads, address=ray_address)
    return InProcessExecutor(registry, threads=threads)
