"""One scheduling core for the executors that run explainer code in worker processes.

:class:`Scheduler` is the job queue and the rules; a :class:`Transport` starts, feeds and kills
the workers: local processes forked from a zygote (:mod:`xaibench.runner.isolation.workers`) or Ray actors
(:mod:`xaibench.runner.isolation.ray_executor`). The rules are the same for both, so every executor gives
the same records, failures and n/a reasons:

- **A job** is one :class:`~xaibench.runner.executors.ExplainTask` or one description of an
  explainer (construct it where it will run, :meth:`~xaibench.runner.executors.WorkerState.describe`).
  Jobs of one :meth:`Scheduler.run` call wait in one queue, in order; a later call goes ahead of the
  jobs an earlier one still has queued. Answers are yielded in the order of the jobs, whatever
  order the workers finish in, so records do not depend on the worker count.
- **Groups.** Each job belongs to a group (the transport says which: one explainer for local
  workers, one plugin distribution for Ray actors; a transport with ``model_group`` adds the
  distribution of a task's model when it is not one of xaibench's own, since building it runs that
  distribution's code in the worker). A worker serves one group for its whole life,
  so whatever plugin code leaves behind in its process never reaches another group's calls. The
  queue's first job goes to an idle worker of its group, else to a fresh idle one; failing both,
  an idle worker of another group is swapped out: at once where workers start at once, else only
  when the group's own workers (busy or starting) are fewer than its queued jobs (a start costs
  seconds). A swapped-out worker is *parked* (kept idle, up to the transport's ``park_limit``,
  the least recently parked killed first) and serves its group again when one of its jobs comes
  back; transports whose idle workers hold resources park none.
- **Two clocks.** Building the model and the explainer (the ``setup`` phase) gets
  ``max(timeout, SETUP_SECONDS)`` seconds; the explainer call (the ``call`` phase) gets the task's
  ``timeout``. The transport tells when the call starts. A worker that overruns is killed from
  outside and replaced, and its job fails: ``"killed after 3 s"`` (``timed_out``: the retry
  policy of :func:`~xaibench.runner.explain.explain_track` depends on it) for the call,
  ``"killed after 120 s building the model and the explainer"`` for the setup.
- **A worker that dies** fails its job with the reason the transport gives (``"worker exited with
  status 3"``) and is replaced. A description that fails gives ``("failed", "explainer
  constructor: <reason>")``.
- **Answers are data.** A reply is bytes of the format of :mod:`xaibench.runner.isolation.wire` (JSON and
  raw numpy arrays, no pickle), decoded by :func:`~xaibench.runner.isolation.wire.decode` within the
  job's limit (:func:`reply_limit`), and must follow the protocol; otherwise the job fails with
  the reason and the worker is replaced.
- **Starting.** A transport whose workers start asynchronously (``start_seconds`` set) reports
  each start; a start that takes longer, or ``START_FAILURES`` workers dying in a row while
  starting, stops the run with the transport's :meth:`Transport.start_error`.
- **Interrupted runs.** When the consumer of :meth:`Scheduler.run` stops early (an exception, a
  Ctrl-C), that call's queued jobs are dropped and the workers running its jobs are killed; a
  later call starts fresh ones.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from xaibench.runner.cost import checked
from xaibench.runner.executors import Description, ExplainerSpec, ExplainOutcome, ExplainTask
from xaibench.runner.isolation.wire import MAX_ARRAY_BYTES, decode

# Seconds allowed to build a model and an explainer in a worker, at least (the explainer call
# itself gets the task's timeout). None when the run has no timeout.
SETUP_SECONDS = 120.0
# Workers that die while starting, in a row, before the run stops.
START_FAILURES = 3
# Bytes of arrays a reply may hold with no task to size it by (a "ready", a description).
SMALL_REPLY_BYTES = 1 << 20
# Bytes per input pixel a task's reply may hold in arrays: a map per sample of up to 4 channels
# of 8-byte numbers (the kit's check wants one channel; the rest is room for it to say why).
REPLY_BYTES_PER_PIXEL = 4 * 8

# ---------------------------------------------------------------------------------------- jobs


@dataclass(eq=False)
class Job:
    """A task (``kind == "task"``, ``payload`` an :class:`ExplainTask`) or a description
    (``"describe"``, an :class:`ExplainerSpec`), the group of workers that may run it, its time
    limits in seconds (``None``: none), and its answer once ``done``: an :class:`ExplainOutcome`
    for a task, a :data:`~xaibench.runner.executors.Description` for a description."""

    kind: str
    payload: Any
    group: str
    call_limit: float | None
    setup_limit: float | None
    answer: Any = None
    done: bool = False


def task_job(task: ExplainTask, group: str) -> Job:
    """The job of ``task``: the call gets ``task.timeout`` (``None`` or at most 0: no limit), the
    setup ``max(timeout, SETUP_SECONDS)``."""
    limit = task.timeout if task.timeout and task.timeout > 0 else None
    return Job("task", task, group, limit, None if limit is None else max(limit, SETUP_SECONDS))


def describe_job(spec: ExplainerSpec, timeout: float | None, group: str) -> Job:
    """The job of describing ``spec``: the constructor gets ``max(timeout, SETUP_SECONDS)``."""
    limit = timeout if timeout and timeout > 0 else None
    return Job("describe", spec, group, None, None if limit is None else max(limit, SETUP_SECONDS))


def failure(job: Job, reason: str, *, timed_out: bool = False) -> Any:
    """The answer of ``job`` when it failed for ``reason``."""
    if job.kind == "describe":
        return ("failed", f"explainer constructor: {reason}")
    return ExplainOutcome(error=reason, timed_out=timed_out)


def reply_limit(job: Job | None) -> int:
    """The bytes of arrays a reply to ``job`` may hold: for a task of ``B`` inputs of ``S x S``
    pixels, ``B x S x S x REPLY_BYTES_PER_PIXEL`` (at least ``SMALL_REPLY_BYTES``, at most
    :data:`~xaibench.runner.isolation.wire.MAX_ARRAY_BYTES`), else ``SMALL_REPLY_BYTES``."""
    inputs = getattr(job.payload, "inputs", None) if job is not None and job.kind == "task" else None
    shape = getattr(inputs, "shape", ())
    if len(shape) != 4:
        return SMALL_REPLY_BYTES
    pixels = int(shape[0]) * int(shape[2]) * int(shape[3])
    return min(MAX_ARRAY_BYTES, max(SMALL_REPLY_BYTES, pixels * REPLY_BYTES_PER_PIXEL))


def _kind(message: Any) -> str | None:
    """The first item of a reply that is a tuple starting with a string (what the protocol sends)."""
    if isinstance(message, tuple) and message and isinstance(message[0], str):
        return message[0]
    return None


def parse_answer(message: Any, kind: str) -> ExplainOutcome | Description:
    """The answer in a worker's reply (already decoded) to a job of ``kind``: ``("done",
    outputs, error, timed_out, cost)`` for a task (``cost``: :mod:`xaibench.runner.cost`, kept only
    when it checks; a reply without it has no cost), ``("described", (status, detail))`` for a
    description. Raises ``ValueError`` for a reply that does not follow the protocol."""
    if kind == "task" and _kind(message) == "done" and len(message) in (4, 5):
        _, outputs, error, timed_out, cost = (*message, None) if len(message) == 4 else message
        if error is None and not isinstance(outputs, list):
            return ExplainOutcome(error="worker sent outputs that are not a list")
        return ExplainOutcome(
            outputs=list(outputs) if isinstance(outputs, list) else None,
            error=None if error is None else str(error),
            timed_out=bool(timed_out),
            cost=checked(cost) if error is None else None,
        )
    if kind == "describe" and _kind(message) == "described" and len(message) == 2:
        answer = message[1]
        if isinstance(answer, (tuple, list)) and len(answer) == 2 and answer[0] in ("ok", "invalid", "failed"):
            return (str(answer[0]), answer[1])
    raise ValueError("the reply does not follow the protocol")


# ---------------------------------------------------------------------------------------- transport


@dataclass(frozen=True)
class Ready:
    """A worker started (it was starting), or built the model and the explainer and starts the
    explainer call now (it was in its setup phase)."""


@dataclass(frozen=True)
class Reply:
    """A worker's answer to its job, as it sent it (bytes of :mod:`xaibench.runner.isolation.wire`, which the
    scheduler decodes; or a :class:`~xaibench.runner.isolation.wire.Refused` reply the transport did not read)."""

    data: Any


@dataclass(frozen=True)
class Died:
    """A worker ended; ``reason`` is the n/a reason of its job (``"worker exited with status 3"``)."""

    reason: str


Event = Ready | Reply | Died


class WorkerGone(Exception):
    """Raised by :meth:`Slot.send` when the worker died while idle (it is reaped); the scheduler
    sends the job to a fresh worker once more."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Slot(Protocol):
    """One worker of a transport: a local process or a Ray actor."""

    def send(self, job: Job) -> str:
        """Start ``job`` on this worker and return the phase it starts in: ``"setup"`` (the worker
        reports :class:`Ready` when the explainer call starts, or answers first) or ``"call"``
        (the model and explainer are built already). Raises :class:`WorkerGone`."""
        ...

    def has_reply(self) -> bool:
        """Whether an event is there for :meth:`receive` now (an answer, a report, an end)."""
        ...

    def receive(self, deadline: float | None) -> Event:
        """The next event (blocks until it comes; a transport that reads a reply in parts stops
        reading a few seconds after ``deadline``, ``time.monotonic()`` seconds)."""
        ...

    def ended(self) -> str | None:
        """The n/a reason when the worker has ended without a word (it is reaped), else ``None``."""
        ...

    def alive(self) -> bool:
        """Whether a parked worker can serve again."""
        ...

    def kill(self) -> None:
        """Kill the worker (if it still runs) and reap it; harmless on an ended worker."""
        ...

    def abandon(self) -> None:
        """Kill the worker without waiting for its end (an interrupted run, closing)."""
        ...


class Transport(Protocol):
    """Starts workers and waits for them. ``start_seconds``: how long a worker may take to start
    (``None``: it is ready when :meth:`start` returns); ``park_limit``: idle workers of other
    groups kept for later (0: none); ``poll_seconds``: the longest the scheduler waits before it
    looks at the workers again, deadline or not (``None``: until an event or a deadline)."""

    start_seconds: float | None
    park_limit: int
    poll_seconds: float | None

    def start(self) -> Slot:
        """A new worker."""
        ...

    def group(self, explainer: str) -> str:
        """The group of the jobs of explainer ``explainer`` (see the module doc)."""
        ...

    # Optional: ``model_group(model: ModelSpec) -> str | None``, what a task's model adds to its
    # group (``None``: nothing, for models whose building runs no plugin code); see the module doc.

    def warm(self, slot: Slot, job: Job) -> Slot:
        """The worker to send ``job`` to instead of the fresh ``slot``: ``slot`` itself, or (after
        killing it) a new worker that starts warmer for ``job``."""
        ...

    def wait(self, slots: Sequence[Slot], timeout: float | None) -> Collection[Slot]:
        """Wait up to ``timeout`` seconds (``None``: no limit) for an event of one of ``slots``;
        those that have one."""
        ...

    def start_error(self, reason: str | None) -> Exception:
        """What stops the run when workers die while starting (``reason``: the last one's) or one
        does not start within ``start_seconds`` (``reason`` is ``None``)."""
        ...

    def close(self) -> None:
        """Release what the transport holds beyond its workers (they are abandoned first)."""
        ...


# ---------------------------------------------------------------------------------------- scheduler


@dataclass(eq=False)
class Worker:
    """One worker as the scheduler sees it: its slot, the group it serves (``None`` until its first
    job), its phase (``start``, ``idle``, ``setup``, ``call``), the job it runs and the
    ``time.monotonic()`` second its phase overruns."""

    slot: Slot
    phase: str
    group: str | None = None
    job: Job | None = None
    deadline: float | None = None


class Scheduler:
    """Runs explanation tasks on ``size`` workers of ``transport`` (see the module doc); an
    :class:`~xaibench.runner.executors.Executor`. ``clock`` gives the seconds deadlines are
    measured in (``time.monotonic``; a test may pass its own)."""

    def __init__(self, transport: Transport, size: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.transport = transport
        self.size = max(1, int(size))
        self.clock = clock
        self.workers: list[Worker] = []  # the pool: one place per worker
        self.parked: list[Worker] = []  # idle workers of other groups, least recently parked first
        self.queue: deque[Job] = deque()
        self.start_failures = 0
        self._fill()

    # ------------------------------------------------------------------ the Executor protocol

    def run(self, tasks: Sequence[ExplainTask]) -> Iterator[ExplainOutcome]:
        """The outcomes of ``tasks``, in their order."""
        yield from self.execute([task_job(task, self.task_group(task)) for task in tasks])

    def task_group(self, task: ExplainTask) -> str:
        """The group of ``task``: its explainer's, with its model's when the transport says one
        (``model_group``, see the module doc)."""
        group = self.transport.group(task.explainer.name)
        model_group = getattr(self.transport, "model_group", None)
        extra = model_group(task.model) if model_group is not None else None
        return group if extra is None else f"{group} on a model of {extra}"

    def describe(self, spec: ExplainerSpec, timeout: float | None = None) -> Description:
        """Construct the explainer of ``spec`` in a worker (see ``WorkerState.describe``)."""
        (answer,) = list(self.execute([describe_job(spec, timeout, self.transport.group(spec.name))]))
        return answer

    def started(self) -> None:
        """Wait until every worker has started (tests and benchmarks use it)."""
        self._fill()
        while any(w.phase == "start" for w in self.workers):
            self._step()

    def close(self) -> None:
        """Kill every worker; a later ``run`` starts fresh ones."""
        workers, self.workers, self.parked = self.workers + self.parked, [], []
        self.queue.clear()
        for worker in workers:
            worker.slot.abandon()
        self.transport.close()

    # ------------------------------------------------------------------ the loop

    def execute(self, jobs: list[Job]) -> Iterator[Any]:
        """The answers of ``jobs``, in their order (see the module doc for an interrupted call)."""
        self._fill()
        self.queue.extendleft(reversed(jobs))
        try:
            for job in jobs:
                while not job.done:
                    self._step()
                yield job.answer
        finally:
            left = {id(job) for job in jobs if not job.done}
            if left:
                self.queue = deque(job for job in self.queue if id(job) not in left)
                for worker in list(self.workers):
                    if worker.job is not None and id(worker.job) in left:
                        worker.slot.abandon()
                        self.workers.remove(worker)

    def _step(self) -> None:
        """Dispatch, then wait for the next event of a busy worker (an answer, a report, an end, a
        deadline) and handle it."""
        self._dispatch()
        busy = [w for w in self.workers if w.phase != "idle"]
        if not busy:
            return
        limits = [max(0.0, w.deadline - self.clock()) for w in busy if w.deadline is not None]
        if self.transport.poll_seconds is not None:
            limits.append(self.transport.poll_seconds)
        timeout = min(limits, default=None)
        ready = self.transport.wait([w.slot for w in busy], timeout)
        for worker in busy:
            if worker.slot in ready:
                self._receive(worker)
        now = self.clock()
        for worker in [w for w in self.workers if w.phase != "idle"]:
            if worker.slot.has_reply():
                continue  # it arrived in the meantime: read it on the next step
            if worker.deadline is not None and now >= worker.deadline:
                self._overran(worker)
            else:
                reason = worker.slot.ended()
                if reason is not None:
                    self._died(worker, reason)

    # ------------------------------------------------------------------ assigning

    def _fill(self) -> None:
        while len(self.workers) < self.size:
            self.workers.append(self._fresh())

    def _fresh(self) -> Worker:
        slot = self.transport.start()
        if self.transport.start_seconds is None:
            return Worker(slot, "idle")
        return Worker(slot, "start", deadline=self.clock() + self.transport.start_seconds)

    def _dispatch(self) -> None:
        """Give queued jobs, in order, to idle workers of their group or fresh ones; swap in a
        worker of the job's group when its own workers are too few (see the module doc)."""
        while self.queue:
            job = self.queue[0]
            idle = [w for w in self.workers if w.phase == "idle"]
            worker = next((w for w in idle if w.group == job.group), None) or next(
                (w for w in idle if w.group is None), None
            )
            if worker is None:
                if not idle or not self._worth_swapping(job.group):
                    return
                worker = self._swap(idle[0], job.group)
                if worker.phase != "idle":
                    return  # a fresh worker is starting
            self.queue.popleft()
            self._assign(worker, job)

    def _worth_swapping(self, group: str) -> bool:
        """Whether to swap an idle worker of another group for one of ``group``: always where
        workers start at once; where a fresh worker takes a while to start, only when ``group``'s
        own workers (busy or starting) are fewer than its queued jobs."""
        if self.transport.start_seconds is None:
            return True
        coming = sum(1 for w in self.workers if w.group == group or w.phase == "start")
        return coming < sum(1 for job in self.queue if job.group == group)

    def _swap(self, stale: Worker, group: str) -> Worker:
        """Put a worker of ``group`` (parked, else fresh) in the place of the idle ``stale``, which
        is parked (or killed when the transport parks none)."""
        worker = self._unpark(group)
        if self.transport.park_limit > 0:
            self.parked.append(stale)
            while len(self.parked) > self.transport.park_limit:
                self.parked.pop(0).slot.kill()
        else:
            stale.slot.kill()
        return self._put(stale, worker or self._fresh())

    def _unpark(self, group: str) -> Worker | None:
        for worker in list(self.parked):
            if worker.group == group:
                self.parked.remove(worker)
                if worker.slot.alive():
                    return worker
                worker.slot.kill()  # it died while parked: reap it
        return None

    def _assign(self, worker: Worker, job: Job) -> None:
        if worker.group is None:
            slot = self.transport.warm(worker.slot, job)
            if slot is not worker.slot:
                worker = self._put(worker, Worker(slot, "idle"))
        for attempt in range(2):
            try:
                phase = worker.slot.send(job)
                break
            except WorkerGone as gone:  # it died while idle: another one gets the job
                worker = self._put(worker, self._fresh())
                if attempt or worker.phase != "idle":
                    self._finish(job, failure(job, gone.reason))
                    return
        worker.group, worker.job, worker.phase = job.group, job, phase
        limit = job.setup_limit if phase == "setup" else job.call_limit
        worker.deadline = None if limit is None else self.clock() + limit

    def _put(self, old: Worker, new: Worker) -> Worker:
        """``new`` in ``old``'s place in the pool."""
        self.workers[self.workers.index(old)] = new
        return new

    # ------------------------------------------------------------------ events

    def _receive(self, worker: Worker) -> None:
        """Handle what ``worker`` sent, up to its answer or its end."""
        while worker in self.workers and worker.phase != "idle" and worker.slot.has_reply():
            self._handle(worker, worker.slot.receive(worker.deadline))

    def _handle(self, worker: Worker, event: Event) -> None:
        if isinstance(event, Died):
            self._died(worker, event.reason)
            return
        message: Any = None
        if isinstance(event, Reply):
            try:
                message = decode(event.data, max_array_bytes=reply_limit(worker.job))
            except Exception as exc:  # noqa: BLE001 - a reply that is not plain data
                text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                self._reject(worker, f"worker sent a reply that is not allowed: {text}"[:300])
                return
            if _kind(message) == "ready":
                event = Ready()
        job = worker.job
        if isinstance(event, Ready) and worker.phase == "start":
            worker.phase, worker.deadline, self.start_failures = "idle", None, 0
        elif isinstance(event, Ready) and worker.phase == "setup" and job is not None and job.kind == "task":
            worker.phase = "call"
            worker.deadline = None if job.call_limit is None else self.clock() + job.call_limit
        elif isinstance(event, Reply) and job is not None:
            try:
                answer = parse_answer(message, job.kind)
            except ValueError:
                self._reject(worker, "worker sent a reply that does not follow the protocol")
                return
            self._finish(job, answer)
            worker.job, worker.phase, worker.deadline = None, "idle", None
        else:
            self._reject(worker, "worker sent a reply that does not follow the protocol")

    def _reject(self, worker: Worker, reason: str) -> None:
        """Fail ``worker``'s job for a reply that breaks the rules, and replace the worker."""
        if worker.job is not None:
            self._finish(worker.job, failure(worker.job, reason))
        self._replace(worker)

    def _died(self, worker: Worker, reason: str) -> None:
        if worker.phase == "start":
            self.start_failures += 1
            if self.start_failures >= START_FAILURES:
                raise self.transport.start_error(reason)
        elif worker.job is not None:
            self._finish(worker.job, failure(worker.job, reason))
        self._replace(worker)

    def _overran(self, worker: Worker) -> None:
        job = worker.job
        if worker.phase == "start" or job is None:
            raise self.transport.start_error(None)
        if worker.phase == "call" and job.call_limit is not None:
            self._finish(job, failure(job, f"killed after {job.call_limit:g} s", timed_out=True))
        elif job.kind == "describe":
            self._finish(job, failure(job, f"killed after {job.setup_limit:g} s"))
        else:
            self._finish(job, failure(job, f"killed after {job.setup_limit:g} s building the model and the explainer"))
        self._replace(worker)

    def _replace(self, worker: Worker) -> Worker:
        """Kill ``worker`` (reaped) and start a fresh one in its place."""
        worker.slot.kill()
        return self._put(worker, self._fresh())

    @staticmethod
    def _finish(job: Job, answer: Any) -> None:
        job.answer, job.done = answer, True
