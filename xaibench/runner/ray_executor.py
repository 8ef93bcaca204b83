"""The Ray executor (``--executor ray``): explanation tasks on long-lived Ray actors.

Each of ``workers`` actors is a Ray worker process holding one :class:`WorkerState`, built from
the plugin registry of that process (:func:`get_registry`): the same code as a local worker, so
the same maps for the same task. A task is one batch of one (track, explainer), a shard of the
track's samples, formed by the driver: its seeds do not depend on the executor or the worker
count. :class:`RayExecutor` is the one scheduling core
(:class:`~xaibench.runner.scheduling.Scheduler`: job queue, groups, deadlines, deaths, answers
in task order, the driver alone writing records and the cache) on :class:`RayTransport`, so the
rules and n/a reasons are the local executor's (but for an exit status Ray does not know, see
below). What the transport adds:

- **Timeouts are enforced from outside.** Building the model and the explainer and the explainer
  call are two actor calls (``prepare``, then ``run``; an actor that built them already gets
  ``run`` alone), so the call's clock starts when the call does. An actor that overruns is
  killed (``ray.kill``: its process ends, plugin code cannot swallow it) and replaced.
- **An actor that dies** (``sys.exit``, ``os._exit``, a crash) gives ``"worker exited with status
  N"`` when Ray knows the status (``sys.exit``), else ``"worker exited (status unknown)"``
  (``os._exit``, a signal), and is replaced.
  Explainer exceptions come back as :attr:`ExplainOutcome.error` (``WorkerState.run``).
- **An actor serves one distribution.** Its group is the explainer's plugin distribution (all
  built-in explainers are one: ``xaibench``): a task of another distribution gets a fresh actor,
  so whatever a plugin leaves behind in its process never reaches another distribution's calls.
  Idle actors are not parked: each holds its CPUs. (Local workers serve one explainer each; a
  fresh Ray actor costs a process start and an import of torch and the plugins, a few seconds,
  where a local worker is forked.) A new actor that does not start within ``START_SECONDS``,
  or three dying in a row while starting, stop the run with one line.
- **Constructors run on the actors** (:meth:`RayExecutor.describe`), never in the driver.
- **Answers are data.** An actor returns its outcome as bytes of :mod:`xaibench.runner.wire` (a
  JSON header and raw numpy arrays, no pickle) that the driver decodes within the job's limit.
  This stops an explainer's return value from running code in the driver or expanding there.
  It does not stop plugin code that subverts the Ray worker process itself (Ray's own messages
  are unpickled by the driver, and Ray reads a whole reply before the driver checks its size):
  for untrusted plugins, prefer ``--executor local``.

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
import re
import signal
from collections.abc import Collection, Sequence
from typing import Any

from xaibench.errors import XaibenchError
from xaibench.plugins.manager import get_registry
from xaibench.runner.executors import (
    ExplainerSpec,
    ExplainOutcome,
    ExplainTask,
    WorkerState,
    encode_reply,
    failure_reason,
    plain_reply,
    spec_key,
)
from xaibench.runner.scheduling import Died, Event, Job, Ready, Reply, Scheduler, Slot

RAY_MISSING = "--executor ray needs Ray: pip install 'xaibench[ray]'"
# Seconds a new actor may take to start before the run stops (e.g. a cluster without free CPUs).
START_SECONDS = 300.0
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
        return encode_reply(("done", plain_reply(outcome.outputs), outcome.error, outcome.timed_out))

    def describe(self, spec: ExplainerSpec) -> bytes:
        return encode_reply(("described", self.state.describe(spec)))


# ---------------------------------------------------------------------------------------- driver side


def exit_reason(exc: BaseException) -> str:
    """The n/a reason of an actor that died, from what Ray tells: its exit status when known."""
    status = re.search(r"exits? with an exit code (-?\d+)", str(exc))
    return f"worker exited with status {status.group(1)}" if status else "worker exited (status unknown)"


def _prepared_key(task: ExplainTask) -> str:
    """What an actor builds before a task's call: its explainer and model, on its device."""
    return repr((spec_key(task.explainer), task.model.identity, task.model.device))


class RaySlot:
    """One actor, as :class:`~xaibench.runner.scheduling.Scheduler` drives it. ``ref`` is the
    answer it owes: to ``ready`` (starting), ``prepare`` (building a task's explainer and model),
    ``run`` or ``describe``."""

    def __init__(self, ray: Any, actor: Any) -> None:
        self.ray = ray
        self.actor = actor
        self.ref: Any = actor.ready.remote()
        self.method = "ready"
        self.task: ExplainTask | None = None
        self.prepared: set[str] = set()  # the (explainer, model) pairs it has built

    def _call(self, method: str, payload: Any) -> None:
        self.method, self.ref = method, getattr(self.actor, method).remote(payload)

    def send(self, job: Job) -> str:
        if job.kind == "describe":
            self._call("describe", job.payload)
            return "setup"
        self.task = job.payload
        if _prepared_key(job.payload) in self.prepared:
            self._call("run", job.payload)
            return "call"
        self._call("prepare", job.payload)  # two actor calls: the call's clock starts with the second
        return "setup"

    def has_reply(self) -> bool:
        return self.ref is not None and bool(self.ray.wait([self.ref], timeout=0)[0])

    def receive(self, deadline: float | None) -> Event:
        ref, self.ref = self.ref, None
        try:
            value = self.ray.get(ref)
        except self.ray.exceptions.RayActorError as exc:
            return Died(exit_reason(exc))
        except Exception as exc:  # noqa: BLE001 - a Ray failure that left the actor in doubt
            cause = getattr(exc, "cause", None) or exc  # an exception raised in the actor method
            text = str(cause).strip().splitlines()
            return Died(f"worker failed: {type(cause).__name__}: {text[0] if text else ''}"[:300])
        if self.method == "ready":
            return Ready()
        if self.method == "prepare":
            assert self.task is not None
            self.prepared.add(_prepared_key(self.task))
            self._call("run", self.task)
            return Ready()
        return Reply(value)

    def ended(self) -> str | None:
        return None  # an actor's end comes as the error of the answer it owes

    def alive(self) -> bool:
        return True  # (never parked)

    def kill(self) -> None:
        """Kill the actor for real (its process ends)."""
        with contextlib.suppress(Exception):  # already dead, or Ray is down
            self.ray.kill(self.actor, no_restart=True)

    abandon = kill


class RayTransport:
    """Ray actors (see the module doc). An actor's group is the plugin distribution of the
    explainer; idle actors are never parked (each holds its CPUs)."""

    park_limit = 0
    poll_seconds = None  # an actor's end comes as an event: wait for events and deadlines only

    def __init__(self, ray: Any, registry: Any, *, threads: int) -> None:
        self.start_seconds: float | None = START_SECONDS
        self.ray = ray
        self.registry = registry
        self.threads = threads
        self.env = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
        self.actor_class = ray.remote(RayWorker).options(num_cpus=threads, max_restarts=0, max_task_retries=0)
        self.groups: dict[str, str] = {}

    def start(self) -> RaySlot:
        return RaySlot(self.ray, self.actor_class.remote(self.threads, self.env))

    def group(self, explainer: str) -> str:
        """The distribution of ``explainer`` (its name when the registry does not know it)."""
        if explainer not in self.groups:
            try:
                self.groups[explainer] = str(self.registry.info("explainer", explainer).distribution)
            except Exception:  # noqa: BLE001 - no registry, or a name only the actors know
                self.groups[explainer] = f"explainer {explainer}"
        return self.groups[explainer]

    def warm(self, slot: Slot, job: Job) -> Slot:
        return slot

    def wait(self, slots: Sequence[Slot], timeout: float | None) -> Collection[Slot]:
        owing = [s for s in slots if isinstance(s, RaySlot) and s.ref is not None]
        if not owing:
            return []
        done, _ = self.ray.wait([s.ref for s in owing], num_returns=1, timeout=timeout)
        return [s for s in owing if any(s.ref == ref for ref in done)]

    def start_error(self, reason: str | None) -> Exception:
        if reason is not None:
            return XaibenchError(f"--executor ray: Ray workers die while starting ({reason})")
        return XaibenchError(
            f"--executor ray: a Ray worker did not start within {START_SECONDS:g} s "
            f"(each needs {self.threads} free CPU{'s' if self.threads > 1 else ''})"
        )

    def close(self) -> None:
        """Nothing: Ray itself stays up for a later executor in this process."""


def start_ray(ray: Any, *, cpus: int, address: str | None) -> None:
    """Join the cluster at ``address``, or start a local Ray instance with ``cpus`` CPUs (see the
    module doc); an already initialised Ray is reused."""
    if ray.is_initialized():
        return
    # Ray reads these when it starts (the raylet and its workers inherit them); the driver's own
    # environment is restored afterwards, so a run leaves the process environment as it was.
    ray_env = {
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0",  # actors see this machine's GPUs
        # Ray runs workers at nice 15: next to any other work they would get a sliver of the CPU,
        # where local workers run at the runner's priority.
        "RAY_worker_niceness": "0",
    }
    added = [k for k in ray_env if k not in os.environ]
    os.environ.update({k: ray_env[k] for k in added})
    quiet: dict[str, Any] = {"logging_level": logging.ERROR, "log_to_driver": False}
    try:
        if address:
            ray.init(address=address, **quiet)
        else:
            ray.init(address="local", num_cpus=cpus, include_dashboard=False, **quiet)
    except Exception as exc:
        where = f"--ray-address {address}" if address else "--executor ray"
        text = str(exc).strip().splitlines()
        raise XaibenchError(f"{where}: Ray did not start: {text[0] if text else type(exc).__name__}") from exc
    finally:
        for key in added:
            os.environ.pop(key, None)


class RayExecutor(Scheduler):
    """Runs explanation tasks on ``workers`` Ray actors (see the module doc).

    ``registry`` is the driver's: it tells each explainer's distribution; each actor builds its
    own registry from the installed plugins.
    """

    def __init__(self, registry: Any = None, *, workers: int, threads: int, address: str | None) -> None:
        ray = import_ray()
        self.ray = ray
        self.threads = max(1, int(threads))
        start_ray(ray, cpus=max(1, int(workers)) * self.threads, address=address)
        super().__init__(RayTransport(ray, registry, threads=self.threads), workers)
