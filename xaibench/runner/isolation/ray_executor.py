"""The Ray executor (``--executor ray``): explanation tasks on long-lived Ray actors.

Each of ``workers`` actors is a Ray worker process (:class:`~xaibench.runner.isolation.ray_actor.RayWorker`)
that runs no plugin code itself: it relays every request to one sandboxed child process of its
own (:mod:`xaibench.runner.isolation.ray_child`), which holds one :class:`WorkerState` built from its own
plugin registry: the same code as a local worker, so the same maps for the same task. A task is
one batch of one (track, explainer), a shard of the track's samples, formed by the driver: its
seeds do not depend on the executor or the worker count. :class:`RayExecutor` is the one
scheduling core (:class:`~xaibench.runner.isolation.scheduling.Scheduler`: job queue, groups, deadlines,
deaths, answers in task order, the driver alone writing records and the cache) on
:class:`RayTransport`, so the rules and n/a reasons are the local executor's. What the transport
adds:

- **Sandboxed.** A Ray actor's process runs Ray's threads before any code of ours, and Landlock
  confines only the thread that enters it, so the actor itself cannot be sandboxed. Its child
  enters the local workers' sandbox (:mod:`xaibench.sandbox`) before it imports torch or
  any plugin: it writes only its own scratch folder (its ``TMPDIR``), opens no TCP connection
  (it talks to its actor over a socket pair), and signals no process outside itself (the actor,
  the driver, Ray). :attr:`RayExecutor.sandbox` says whether (:func:`ray_sandbox`, recorded as
  the run's ``sandbox``); a missing sandbox is said once on stderr; ``XAIBENCH_SANDBOX=0``
  turns it off (the child still runs, unconfined). On a cluster, a node without Landlock cannot
  start a child while the driver's machine has it: the run stops with one line.
- **Timeouts are enforced from outside.** Building the model and the explainer and the explainer
  call are two actor calls (``prepare``, then ``run``; an actor that built them already gets
  ``run`` alone), so the call's clock starts when the call does. An actor that overruns is
  killed (``ray.kill``: its process ends, plugin code cannot swallow it; its child dies with it,
  ``PR_SET_PDEATHSIG``) and replaced.
- **A worker that dies** (``sys.exit``, ``os._exit``, a signal) is the child: the actor answers
  :class:`~xaibench.runner.isolation.ray_actor.ChildEnded` with the local executor's reason (``"worker
  exited with status 3"``, ``"worker killed by signal SIGKILL"``) and is killed and replaced.
  An actor that dies itself gives ``"worker exited with status N"`` when Ray knows the status,
  else ``"worker exited (status unknown)"``. Explainer exceptions come back as
  :attr:`ExplainOutcome.error` (``WorkerState.run``).
- **An actor serves one distribution.** Its group is the explainer's plugin distribution (all
  built-in explainers are one: ``xaibench``): a task of another distribution gets a fresh actor,
  so whatever a plugin leaves behind in its process never reaches another distribution's calls.
  Idle actors are not parked: each holds its CPUs. (Local workers serve one explainer each; a
  fresh Ray actor costs two process starts and an import of torch and the plugins in its child,
  a few seconds, where a local worker is forked.) A new actor that does not start within
  ``START_SECONDS`` (the line says Ray's free CPUs, each waiting actor's state and where Ray's
  logs are: :func:`start_diagnosis`), or three dying in a row while starting (their child's
  last line in the reason), stop the run with one line.
- **Constructors run in the children** (:meth:`RayExecutor.describe`), never in the driver.
- **Answers are data.** A child answers in bytes of :mod:`xaibench.runner.isolation.wire` (a JSON header
  and raw numpy arrays, no pickle), at most ``MAX_REPLY_BYTES``, which its actor relays unread
  and the driver decodes within the job's limit. This stops an explainer's return value from
  running code in the driver or expanding there. Requests go the other way pickled by the driver
  (the trusted direction), so an actor never unpickles a task and never imports torch. Plugin
  code never runs in an actor, so it cannot subvert Ray's own messages to the driver (which the
  driver unpickles).
- **Output.** What a child prints goes, one escaped ``[worker]`` line at a time, to its actor's
  stderr, which Ray keeps in its session's logs (not the terminal).

Without ``address`` a local Ray instance starts (``num_cpus = workers x threads``, no dashboard,
workers at normal priority rather than Ray's nice 15, Ray's own and the actors' logs kept in
Ray's session folder, ``/tmp/ray`` by default); with one,
the executor joins that cluster, whose nodes need xaibench and the same plugins installed. An
already initialised Ray is reused, and :meth:`RayExecutor.close` leaves Ray running (it ends
with the process). Each actor reserves ``threads`` CPUs and no GPU: on a local instance the
actors' children use this machine's GPUs (``--device``); on a cluster, a CUDA device needs a GPU
on every node that runs a worker.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import re
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from xaibench.errors import XaibenchError
from xaibench.plugins import catalogue
from xaibench.runner.executors import ExplainTask, spec_key
from xaibench.runner.isolation.processes import say_once
from xaibench.runner.isolation.ray_actor import ChildEnded, RayWorker
from xaibench.runner.isolation.scheduling import Died, Event, Job, Ready, Reply, Scheduler, Slot
from xaibench.runner.isolation.trusted import model_origin
from xaibench.sandbox import OFF_VARIABLE, WRITABLE_VARIABLE, sandbox_enabled, sandbox_status

RAY_MISSING = "--executor ray needs Ray: pip install 'xaibench[ray]'"
# Seconds a new actor may take to start before the run stops (e.g. a cluster without free CPUs).
START_SECONDS = 300.0
# Environment variables of the driver an actor's child reads: the plugins its registry loads,
# more folders its sandbox may write.
FORWARDED_ENV = ("XAIBENCH_LOAD_PLUGINS", "XAIBENCH_DISABLE_PLUGINS", WRITABLE_VARIABLE)
# How long an idle actor is given to end its child before it is killed.
CLOSE_SECONDS = 5.0


def import_ray() -> Any:
    """The ``ray`` module, or the one-line error naming the extra to install."""
    try:
        import ray
    except ImportError as exc:
        raise XaibenchError(RAY_MISSING) from exc
    return ray


# ---------------------------------------------------------------------------------------- driver side


def exit_reason(exc: BaseException) -> str:
    """The n/a reason of an actor that died, from what Ray tells: its exit status when known."""
    status = re.search(r"exits? with an exit code (-?\d+)", str(exc))
    return f"worker exited with status {status.group(1)}" if status else "worker exited (status unknown)"


def _prepared_key(task: ExplainTask) -> str:
    """What an actor builds before a task's call: its explainer and model, on its device."""
    return repr((spec_key(task.explainer), task.model.identity, task.model.device))


class RaySlot:
    """One actor, as :class:`~xaibench.runner.isolation.scheduling.Scheduler` drives it. ``ref`` is the
    answer it owes: to ``ready`` (starting), ``prepare`` (building a task's explainer and model),
    ``run`` or ``describe``."""

    def __init__(self, ray: Any, actor: Any) -> None:
        self.ray = ray
        self.actor = actor
        self.ref: Any = actor.ready.remote()
        self.method = "ready"
        self.task: ExplainTask | None = None
        self.request = b""  # the job sent, pickled for the actor's child (the actor does not unpickle it)
        self.prepared: set[str] = set()  # the (explainer, model) pairs it has built
        self.closed = False

    def _call(self, method: str) -> None:
        self.method, self.ref = method, getattr(self.actor, method).remote(self.request)

    def send(self, job: Job) -> str:
        self.request = pickle.dumps((job.kind, job.payload), protocol=pickle.HIGHEST_PROTOCOL)
        if job.kind == "describe":
            self._call("describe")
            return "setup"
        self.task = job.payload
        if _prepared_key(job.payload) in self.prepared:
            self._call("run")
            return "call"
        self._call("prepare")  # two actor calls: the call's clock starts with the second
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
        if isinstance(value, ChildEnded):  # the actor's child ended: the actor is as good as dead
            return Died(value.reason)
        if self.method == "ready":
            return Ready()
        if self.method == "prepare":
            if value is not None:  # an answer before the explainer call (a constructor error)
                return Reply(value)
            assert self.task is not None
            self.prepared.add(_prepared_key(self.task))
            self._call("run")
            return Ready()
        return Reply(value)

    def ended(self) -> str | None:
        return None  # an actor's end comes as the error of the answer it owes

    def alive(self) -> bool:
        return True  # (never parked)

    def kill(self) -> None:
        """Kill the actor for real (its process ends, and its child with it: ``PR_SET_PDEATHSIG``).
        An idle actor first ends its child itself, which removes the child's scratch folder."""
        if self.closed:
            return
        self.closed = True
        if self.ref is None:
            with contextlib.suppress(Exception):  # dead, or slow to answer: killed all the same
                self.ray.get(self.actor.close.remote(), timeout=CLOSE_SECONDS)
        with contextlib.suppress(Exception):  # already dead, or Ray is down
            self.ray.kill(self.actor, no_restart=True)

    abandon = kill


class RayTransport:
    """Ray actors (see the module doc). An actor's group is the plugin distribution of the
    explainer; idle actors are never parked (each holds its CPUs)."""

    park_limit = 0
    poll_seconds = None  # an actor's end comes as an event: wait for events and deadlines only

    def __init__(self, ray: Any, registry: Any, *, threads: int, sandboxed: bool = False) -> None:
        self.start_seconds: float | None = START_SECONDS
        self.ray = ray
        self.registry = registry
        self.threads = threads
        self.sandboxed = sandboxed
        self.env = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
        self.actor_class = ray.remote(RayWorker).options(num_cpus=threads, max_restarts=0, max_task_retries=0)
        self.groups: dict[str, str] = {}
        self.slots: list[RaySlot] = []  # the actors started and not yet closed (for start_error's diagnosis)

    def start(self) -> RaySlot:
        plugins = catalogue.handed_over()  # the actors' children register them without probing again
        slot = RaySlot(self.ray, self.actor_class.remote(self.threads, self.env, self.sandboxed, plugins))
        self.slots = [s for s in self.slots if not s.closed] + [slot]
        return slot

    def group(self, explainer: str) -> str:
        """The distribution of ``explainer`` (its name when the registry does not know it)."""
        if explainer not in self.groups:
            try:
                self.groups[explainer] = str(self.registry.info("explainer", explainer).distribution)
            except Exception:  # noqa: BLE001 - no registry, or a name only the actors know
                self.groups[explainer] = f"explainer {explainer}"
        return self.groups[explainer]

    def model_group(self, model: Any) -> str | None:
        """``None`` for xaibench's own models; else the model's distribution: an actor's child that
        built it serves only tasks of that distribution's models, as local workers do (issue 42)."""
        return model_origin(self.registry, model.name)

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
        starting = [s for s in self.slots if s.method == "ready" and s.ref is not None and not s.closed]
        return XaibenchError(
            f"--executor ray: a Ray worker did not start within {START_SECONDS:g} s "
            f"(each needs {self.threads} free CPU{'s' if self.threads > 1 else ''}; "
            f"{start_diagnosis(self.ray, [s.actor for s in starting])})"
        )

    def close(self) -> None:
        """Nothing: Ray itself stays up for a later executor in this process."""


def _actor_state(ray: Any, actor: Any) -> tuple[str, int]:
    """Ray's state of ``actor`` (``"PENDING_CREATION"``, ``"ALIVE"``, ...) and its process id (0
    before it has one), from Ray's control store; ``("unknown", 0)`` where Ray does not say."""
    try:
        from ray._private import state  # no public API tells this without Ray's dashboard

        info = state.actors(actor._actor_id.hex())
        return str(info.get("State") or "unknown"), int(info.get("Pid") or 0)
    except Exception:  # noqa: BLE001 - a diagnosis only: another Ray version, Ray down
        return "unknown", 0


def ray_logs(ray: Any) -> Path | None:
    """The folder of this machine's Ray node's logs (its session's ``logs``), or ``None`` where
    this process has no local node (not started, or another Ray version)."""
    try:
        return Path(ray._private.worker._global_node.get_logs_dir_path())
    except Exception:  # noqa: BLE001 - a diagnosis only
        return None


def _last_log_line(ray: Any, pid: int) -> str:
    """The last line an actor process ``pid`` wrote to its stderr log (its child's ``[worker]``
    lines go there), on this machine's Ray node; ``""`` where there is none."""
    logs = ray_logs(ray)
    if logs is None:
        return ""
    try:
        lines = [
            line.strip()
            for path in logs.glob(f"worker-*-{pid}.err")
            for line in path.read_text(errors="replace").splitlines()
        ]
    except OSError:  # a log rotated away while read
        return ""
    lines = [line for line in lines if line and not line.startswith(":")]  # Ray's own ":job_id:" markers
    return lines[-1][:200] if lines else ""


def start_diagnosis(ray: Any, actors: Sequence[Any]) -> str:
    """Why actors have not said they are ready, as far as Ray tells, for the run's one-line error:
    Ray's free CPUs and each actor's state (``"PENDING_CREATION"``: Ray has not started its
    process, e.g. no free CPU; ``"ALIVE"``: its child has not said ready, with the last line the
    actor logged), and where Ray's logs are on this machine."""
    parts = []
    try:
        free, total = ray.available_resources().get("CPU", 0.0), ray.cluster_resources().get("CPU", 0.0)
        parts.append(f"Ray has {free:g} of {total:g} CPUs free")
    except Exception:  # noqa: BLE001 - a diagnosis only
        pass
    for actor in actors:
        state, pid = _actor_state(ray, actor)
        if state == "ALIVE":
            last = _last_log_line(ray, pid)
            said = f", its last line: {last}" if last else ", nothing logged"
            parts.append(f"actor {pid} alive, its child not ready{said}")
        else:
            parts.append(f"actor {state.lower().replace('_', ' ')}")
    logs = ray_logs(ray)
    if logs is not None:
        parts.append(f"Ray's logs: {logs}")
    return "; ".join(parts) if parts else "Ray says nothing more"


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
    """Runs explanation tasks on ``workers`` Ray actors (see the module doc); ``sandbox`` says
    what confines their children (:func:`ray_sandbox`).

    ``registry`` is the driver's: it tells each explainer's distribution; each actor's child
    builds its own registry from the installed plugins.
    """

    def __init__(self, registry: Any = None, *, workers: int, threads: int, address: str | None) -> None:
        ray = import_ray()
        self.ray = ray
        self.threads = max(1, int(threads))
        self.sandbox = ray_sandbox()
        sandboxed = self.sandbox.startswith("landlock")
        if not sandboxed and not self.sandbox.startswith("off"):
            say_once(f"warning: workers run without a sandbox ({self.sandbox})")
        start_ray(ray, cpus=max(1, int(workers)) * self.threads, address=address)
        super().__init__(RayTransport(ray, registry, threads=self.threads, sandboxed=sandboxed), workers)


def ray_sandbox() -> str:
    """What confines the actors' children: ``"landlock ABI N"`` (this machine's kernel; on a
    cluster, a child on a node without Landlock cannot start, and the run stops),
    ``"off (XAIBENCH_SANDBOX=0)"``, or ``"unavailable: <reason>"`` (children run unconfined)."""
    if not sandbox_enabled():
        return f"off ({OFF_VARIABLE}=0)"
    return sandbox_status()
