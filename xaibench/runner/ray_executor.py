"""The Ray executor (``--executor ray``): explanation tasks on long-lived Ray actors.

Each of ``workers`` actors is a Ray worker process holding one :class:`WorkerState`, built from
the plugin registry of that process (:func:`get_registry`): the same code as a local worker, so
the same maps for the same task. A task is one batch of one (track, explainer), a shard of the
track's samples, formed by the driver: its seeds do not depend on the executor or the worker
count. Tasks go to idle actors, one at a time each; outcomes come back in task order, and the
driver alone writes records and the cache. The rules follow the local executor
(:mod:`xaibench.runner.workers`), with the same n/a reasons (but for an exit status Ray does not
know, see below):

- **Timeouts are enforced from outside.** Building the model and the explainer on an actor gets
  ``max(timeout, SETUP_SECONDS)``, then the explainer call gets ``task.timeout`` (two actor
  calls, so the call's clock starts when the call does). An actor that overruns is killed
  (``ray.kill``: its process ends, plugin code cannot swallow it) and replaced; the outcome is
  ``"killed after 300 s"``.
- **An actor that dies** (``sys.exit``, ``os._exit``, a crash) gives ``"worker exited with status
  N"`` when Ray knows the status (``sys.exit``), else ``"worker exited (status unknown)"``
  (``os._exit``, a signal), and is replaced.
  Explainer exceptions come back as :attr:`ExplainOutcome.error` (``WorkerState.run``).
- **An actor serves one distribution.** Once it ran code of one plugin distribution (all
  built-in explainers are one: ``xaibench``), a task of another distribution gets a fresh actor,
  so whatever a plugin leaves behind in its process never reaches another distribution's calls.
  (Local workers serve one explainer each; a fresh Ray actor costs a process start and an import
  of torch and the plugins, a few seconds, where a local worker is forked.)
- **Constructors run on the actors** (:meth:`RayExecutor.describe`), never in the driver.
- **Answers are data.** An actor returns its outcome as pickled bytes that the driver loads with
  a restricted unpickler (numpy arrays and plain Python types only). This stops an explainer's
  return value from running code in the driver. It does not stop plugin code that subverts the
  Ray worker process itself (Ray's own messages are unpickled by the driver): for untrusted
  plugins, prefer ``--executor local``.

Without ``address`` a local Ray instance starts (``num_cpus = workers x threads``, no dashboard,
workers at normal priority rather than Ray's nice 15, Ray's own and the actors' logs kept in
Ray's session folder, ``/tmp/ray`` by default); with one,
the executor joins that cluster, whose nodes need xaibench and the same plugins installed. An
already initialised Ray is reused, and :meth:`RayExecutor.close` leaves Ray running (it ends
with the process). Each actor reserves ``threads`` CPUs and no GPU: on a local instance the
actors use this machine's GPUs (``--device``); on a cluster, a CUDA device needs a GPU on every
node that runs a worker.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import re
import signal
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from xaibench.errors import XaibenchError
from xaibench.plugins.manager import get_registry
from xaibench.runner.executors import (
    Description,
    ExplainerSpec,
    ExplainOutcome,
    ExplainTask,
    WorkerState,
    failure_reason,
    load_reply,
    plain_reply,
    spec_key,
)

RAY_MISSING = "--executor ray needs Ray: pip install 'xaibench[ray]'"
# Seconds allowed to build a model and an explainer on an actor, at least (the local executor's rule).
SETUP_SECONDS = 120.0
# Seconds a new actor may take to start before the run stops (e.g. a cluster without free CPUs).
START_SECONDS = 300.0
# Actors that die while starting, in a row, before the run stops.
START_FAILURES = 3
# Environment variables that change which plugins an actor's registry loads.
FORWARDED_ENV = ("XAIBENCH_LOAD_PLUGINS", "XAIBENCH_DISABLE_PLUGINS")


def import_ray() -> Any:
    """The ``ray`` module, or the one-line error naming the extra to install."""
    try:
        import ray
    except ImportError as exc:
        raise XaibenchError(RAY_MISSING) from exc
    return ray


# ---------------------------------------------------------------------------------------- actor side


def _dumps(message: Any, fallback: Any) -> bytes:
    try:
        return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - e.g. an output object that cannot be pickled
        return pickle.dumps(fallback, protocol=pickle.HIGHEST_PROTOCOL)


class RayWorker:
    """The actor: one worker process's :class:`WorkerState`, built once and kept across tasks."""

    def __init__(self, threads: int, env: dict[str, str]) -> None:
        os.environ.update(env)  # before the registry reads the plugin allow and block lists
        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver handles Ctrl-C and kills actors
        self.state = WorkerState(registry=get_registry(), threads=threads)

    def ready(self) -> int:
        return os.getpid()

    def prepare(self, task: ExplainTask) -> None:
        """Build the task's explainer and model (errors are reported by :meth:`run`)."""
        with contextlib.suppress(Exception):
            self.state.explainer(task.explainer)
            self.state.model(task.model)

    def run(self, task: ExplainTask) -> bytes:
        try:
            outcome = self.state.run(task)
        except KeyboardInterrupt as exc:  # raised by plugin code; SystemExit ends the actor
            outcome = ExplainOutcome(error=failure_reason(exc))
        message = ("done", plain_reply(outcome.outputs), outcome.error, outcome.timed_out)
        return _dumps(message, ("done", None, "explainer output cannot be sent to the runner", False))

    def describe(self, spec: ExplainerSpec) -> bytes:
        message = ("described", self.state.describe(spec))
        return _dumps(message, ("described", ("failed", "explainer parameters cannot be sent to the runner")))


# ---------------------------------------------------------------------------------------- driver side


def exit_reason(exc: BaseException) -> str:
    """The n/a reason of an actor that died, from what Ray tells: its exit status when known."""
    status = re.search(r"exits? with an exit code (-?\d+)", str(exc))
    return f"worker exited with status {status.group(1)}" if status else "worker exited (status unknown)"


@dataclass(eq=False)
class _Job:
    """A task or a description, its limits, and its answer once known."""

    kind: str  # "task" or "describe"
    payload: Any  # ExplainTask or ExplainerSpec
    group: str  # the distribution whose code it runs
    prepared_key: str  # the (explainer, model) the actor builds first
    call_limit: float | None
    setup_limit: float | None
    answer: Any = None
    done: bool = False


@dataclass(eq=False)
class _Slot:
    """One actor: ``start`` (``ref`` is its readiness), ``idle``, ``setup`` or ``call``."""

    actor: Any
    ref: Any
    phase: str = "start"
    deadline: float | None = None
    job: _Job | None = None
    group: str | None = None  # the distribution it serves once it ran code of one
    prepared: set[str] = field(default_factory=set)


class RayExecutor:
    """Runs explanation tasks on ``workers`` Ray actors (see the module doc).

    ``registry`` is the driver's: it tells each explainer's distribution; each actor builds its
    own registry from the installed plugins.
    """

    def __init__(self, registry: Any = None, *, workers: int, threads: int, address: str | None) -> None:
        ray = import_ray()
        self.ray = ray
        self.registry = registry
        self.size = max(1, int(workers))
        self.threads = max(1, int(threads))
        if not ray.is_initialized():
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
            os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")  # actors see this machine's GPUs
            # Ray runs workers at nice 15: next to any other work they would get a sliver of the
            # CPU, where local workers run at the runner's priority.
            os.environ.setdefault("RAY_worker_niceness", "0")
            quiet: dict[str, Any] = {"logging_level": logging.ERROR, "log_to_driver": False}
            try:
                if address:
                    ray.init(address=address, **quiet)
                else:
                    ray.init(address="local", num_cpus=self.size * self.threads, include_dashboard=False, **quiet)
            except Exception as exc:
                where = f"--ray-address {address}" if address else "--executor ray"
                text = str(exc).strip().splitlines()
                raise XaibenchError(f"{where}: Ray did not start: {text[0] if text else type(exc).__name__}") from exc
        self.env = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
        self.actor_class = ray.remote(RayWorker).options(num_cpus=self.threads, max_restarts=0, max_task_retries=0)
        self.slots: list[_Slot] = []
        self.queue: deque[_Job] = deque()
        self.start_failures = 0
        self.groups: dict[str, str] = {}
        self._start()

    # ------------------------------------------------------------------ actors

    def _start(self) -> None:
        while len(self.slots) < self.size:
            self.slots.append(self._fresh())

    def _fresh(self) -> _Slot:
        actor = self.actor_class.remote(self.threads, self.env)
        return _Slot(actor=actor, ref=actor.ready.remote(), deadline=time.monotonic() + START_SECONDS)

    def _replace(self, slot: _Slot) -> None:
        """Kill ``slot``'s actor for real and start a fresh one in its place."""
        _kill(self.ray, slot.actor)
        self.slots[self.slots.index(slot)] = self._fresh()

    def group(self, name: str) -> str:
        """The distribution of explainer ``name`` (its name when the registry does not know it)."""
        if name not in self.groups:
            try:
                self.groups[name] = str(self.registry.info("explainer", name).distribution)
            except Exception:  # noqa: BLE001 - no registry, or a name only the actors know
                self.groups[name] = f"explainer {name}"
        return self.groups[name]

    # ------------------------------------------------------------------ the Executor protocol

    def run(self, tasks: Sequence[ExplainTask]) -> Iterator[ExplainOutcome]:
        """Outcomes of ``tasks`` in their order. A later call goes ahead of the tasks still queued
        by an earlier one."""
        jobs = []
        for task in tasks:
            limit = task.timeout if task.timeout and task.timeout > 0 else None
            key = repr((spec_key(task.explainer), task.model.identity, task.model.device))
            setup = None if limit is None else max(limit, SETUP_SECONDS)
            jobs.append(_Job("task", task, self.group(task.explainer.name), key, limit, setup))
        yield from self._execute(jobs)

    def describe(self, spec: ExplainerSpec, timeout: float | None = None) -> Description:
        """Construct the explainer of ``spec`` on an actor (see ``WorkerState.describe``)."""
        setup = None if not timeout or timeout <= 0 else max(timeout, SETUP_SECONDS)
        job = _Job("describe", spec, self.group(spec.name), "", None, setup)
        (answer,) = list(self._execute([job]))
        return answer

    def started(self) -> None:
        """Wait until every actor has started (tests and benchmarks use it)."""
        self._start()
        while any(s.phase == "start" for s in self.slots):
            self._step()

    def close(self) -> None:
        """Kill the actors (Ray itself stays up for a later executor in this process); a later
        ``run`` starts fresh ones."""
        slots, self.slots = self.slots, []
        for slot in slots:
            _kill(self.ray, slot.actor)
        self.queue.clear()

    # ------------------------------------------------------------------ scheduling

    def _execute(self, jobs: list[_Job]) -> Iterator[Any]:
        self._start()
        self.queue.extendleft(reversed(jobs))
        try:
            for job in jobs:
                while not job.done:
                    self._step()
                yield job.answer
        finally:  # abandoned (interrupted): drop what was not sent, kill what runs (a later run starts afresh)
            left = {id(j) for j in jobs if not j.done}
            if left:
                self.queue = deque(j for j in self.queue if id(j) not in left)
                for slot in list(self.slots):
                    if slot.job is not None and id(slot.job) in left:
                        _kill(self.ray, slot.actor)
                        self.slots.remove(slot)

    def _dispatch(self) -> None:
        """Give queued jobs, in order, to idle actors of their distribution or fresh ones; replace
        an idle actor of another distribution when the job's own actors are too few."""
        while self.queue:
            job = self.queue[0]
            idle = [s for s in self.slots if s.phase == "idle"]
            slot = next((s for s in idle if s.group == job.group), None) or next(
                (s for s in idle if s.group is None), None
            )
            if slot is None:
                coming = sum(1 for s in self.slots if s.group == job.group or (s.phase == "start"))
                waiting = sum(1 for j in self.queue if j.group == job.group)
                stale = next((s for s in idle if s.group != job.group), None)
                if stale is not None and coming < waiting:
                    self._replace(stale)
                return
            self.queue.popleft()
            self._assign(slot, job)

    def _assign(self, slot: _Slot, job: _Job) -> None:
        slot.job, slot.group = job, job.group
        if job.kind == "describe":
            self._send(slot, "setup", slot.actor.describe.remote(job.payload), job.setup_limit)
        elif job.prepared_key in slot.prepared:
            self._send(slot, "call", slot.actor.run.remote(job.payload), job.call_limit)
        else:
            self._send(slot, "setup", slot.actor.prepare.remote(job.payload), job.setup_limit)

    @staticmethod
    def _send(slot: _Slot, phase: str, ref: Any, limit: float | None) -> None:
        slot.phase, slot.ref = phase, ref
        slot.deadline = None if limit is None else time.monotonic() + limit

    def _step(self) -> None:
        """Dispatch, then wait for the next event: an answer, an actor ready, a deadline."""
        self._dispatch()
        busy = [s for s in self.slots if s.ref is not None]
        if not busy:
            return
        deadlines = [s.deadline for s in busy if s.deadline is not None]
        wait = None if not deadlines else max(0.0, min(deadlines) - time.monotonic())
        done, _ = self.ray.wait([s.ref for s in busy], num_returns=1, timeout=wait)
        for slot in busy:
            if slot.ref is not None and any(slot.ref == ref for ref in done):
                self._answer(slot)
        now = time.monotonic()
        for slot in list(self.slots):
            if slot.ref is not None and slot.deadline is not None and now >= slot.deadline:
                ready, _ = self.ray.wait([slot.ref], timeout=0)
                if ready:  # arrived in the meantime: read it on the next step
                    continue
                self._overran(slot)

    def _answer(self, slot: _Slot) -> None:
        ref, slot.ref = slot.ref, None
        try:
            value = self.ray.get(ref)
        except self.ray.exceptions.RayActorError as exc:
            self._died(slot, exit_reason(exc))
            return
        except Exception as exc:  # noqa: BLE001 - a Ray failure that left the actor in doubt
            cause = getattr(exc, "cause", None) or exc  # an exception raised in the actor method
            text = str(cause).strip().splitlines()
            self._died(slot, f"worker failed: {type(cause).__name__}: {text[0] if text else ''}"[:300])
            return
        job = slot.job
        if slot.phase == "start":
            slot.phase, slot.deadline, self.start_failures = "idle", None, 0
            return
        assert job is not None
        if slot.phase == "setup" and job.kind == "task":
            slot.prepared.add(job.prepared_key)
            self._send(slot, "call", slot.actor.run.remote(job.payload), job.call_limit)
            return
        try:
            answer = _checked(load_reply(value), job.kind)
        except Exception as exc:  # noqa: BLE001 - a reply that is not plain data
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            self._finish(job, self._failure(job, f"worker sent a reply that is not allowed: {text}"[:300]))
            self._replace(slot)
            return
        self._finish(job, answer)
        slot.job, slot.phase, slot.deadline = None, "idle", None

    def _died(self, slot: _Slot, reason: str) -> None:
        if slot.phase == "start":
            self.start_failures += 1
            if self.start_failures >= START_FAILURES:
                raise XaibenchError(f"--executor ray: Ray workers die while starting ({reason})")
        elif slot.job is not None:
            self._finish(slot.job, self._failure(slot.job, reason))
        self._replace(slot)

    def _overran(self, slot: _Slot) -> None:
        job = slot.job
        if slot.phase == "start":
            raise XaibenchError(
                f"--executor ray: a Ray worker did not start within {START_SECONDS:g} s "
                f"(each needs {self.threads} free CPU{'s' if self.threads > 1 else ''})"
            )
        assert job is not None
        if slot.phase == "call":
            self._finish(job, ExplainOutcome(error=f"killed after {job.call_limit:g} s", timed_out=True))
        else:
            reason = f"killed after {job.setup_limit:g} s building the model and the explainer"
            self._finish(job, self._failure(job, reason))
        self._replace(slot)

    @staticmethod
    def _failure(job: _Job, reason: str) -> Any:
        if job.kind == "describe":
            return ("failed", f"explainer constructor: {reason}")
        return ExplainOutcome(error=reason)

    @staticmethod
    def _finish(job: _Job, answer: Any) -> None:
        job.answer, job.done = answer, True


def _checked(message: Any, kind: str) -> Any:
    """The answer in an actor's reply, or ``ValueError`` when it does not follow the protocol."""
    if kind == "task" and isinstance(message, tuple) and len(message) == 4 and message[0] == "done":
        _, outputs, error, timed_out = message
        if error is None and not isinstance(outputs, list):
            return ExplainOutcome(error="worker sent outputs that are not a list")
        return ExplainOutcome(
            outputs=list(outputs) if outputs is not None else None,
            error=None if error is None else str(error),
            timed_out=bool(timed_out),
        )
    if kind == "describe" and isinstance(message, tuple) and len(message) == 2 and message[0] == "described":
        answer = message[1]
        if isinstance(answer, (tuple, list)) and len(answer) == 2 and answer[0] in ("ok", "invalid", "failed"):
            return tuple(answer)
    raise ValueError("it does not follow the protocol")


def _kill(ray: Any, actor: Any) -> None:
    with contextlib.suppress(Exception):  # already dead, or Ray is down
        ray.kill(actor, no_restart=True)
