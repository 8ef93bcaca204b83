"""The one scheduling core (``xaibench.runner.isolation.scheduling``), on both transports and on a fake.

The same scenarios (normal jobs, a worker that dies, a call that overruns its timeout, group
affinity and parking) run against both real transports: local worker processes and Ray actors.
Their misbehaving explainers come from two throw-away installed distributions (a dist-info with
an ``xaibench`` entry point on ``PYTHONPATH``), so Ray's workers load them as they would a real
plugin, and the two distributions are two groups for Ray as well. A fake in-memory transport with
a fake clock then checks the core's rules one by one, deterministically and without processes.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import sys
import textwrap
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from xaibench.errors import XaibenchError
from xaibench.plugins import manager
from xaibench.runner.executors import ExplainerSpec, ExplainTask, InProcessExecutor
from xaibench.runner.explain import track_model_spec
from xaibench.runner.isolation import scheduling
from xaibench.runner.isolation.scheduling import Died, Event, Job, Ready, Reply, Scheduler, WorkerGone
from xaibench.runner.isolation.wire import encode
from xaibench.runner.isolation.workers import LocalExecutor
from xaibench.runner.track import load_track

HAS_RAY = importlib.util.find_spec("ray") is not None
BAD = "shapes-test-0001"  # the sample the misbehaving explainers fail on
PLUGINS = "xbs-a,xbs-b"  # the throw-away distributions (and the only plugins the Ray workers load)

PLUGIN_A = '''
"""Explainers of distribution xbs-a: they misbehave on one sample, inside the worker process."""
import os
import sys
import time

import numpy as np

from xaibench import hookimpl
from xaibench.api import Explainer

BAD = "shapes-test-0001"


class _Base(Explainer):
    version = "1.0.0"
    licence = "test"

    def explain(self, model, inputs, targets, *, seed=0, context=None):
        if any(s.id == BAD for s in context.samples):
            self.misbehave()
        maps = np.zeros((inputs.shape[0], *inputs.shape[-2:]), dtype=np.float32)
        maps[:, 0, 0] = os.getpid()
        return maps


class PidA(_Base):
    name = "xbs-pid-a"


class Hangs(_Base):
    name = "xbs-hangs"

    def misbehave(self):
        while True:  # swallows whatever is raised at it
            try:
                time.sleep(0.05)
            except BaseException:
                pass


class SysExit(_Base):
    name = "xbs-sys-exit"

    def misbehave(self):
        sys.exit(3)


@hookimpl
def register_explainers(register):
    for cls in (PidA, Hangs, SysExit):
        register(cls)
'''

PLUGIN_B = '''
"""Distribution xbs-b: another group for Ray actors too."""
import os

import numpy as np

from xaibench import hookimpl
from xaibench.api import Explainer


class PidB(Explainer):
    name = "xbs-pid-b"
    version = "1.0.0"
    licence = "test"

    def explain(self, model, inputs, targets, *, seed=0, context=None):
        maps = np.zeros((inputs.shape[0], *inputs.shape[-2:]), dtype=np.float32)
        maps[:, 0, 0] = os.getpid()
        return maps


@hookimpl
def register_explainers(register):
    register(PidB)
'''


def _install(site: Path, name: str, source: str) -> None:
    module = name.replace("-", "_")
    (site / f"{module}.py").write_text(textwrap.dedent(source))
    info = site / f"{module}-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(f"[xaibench]\n{name} = {module}\n")


@pytest.fixture(scope="module")
def plugins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[manager.Registry]:
    """The two distributions installed on this process's path and on ``PYTHONPATH`` (for Ray's
    workers, which start with it), and a registry that has them; Ray is shut down afterwards."""
    site = tmp_path_factory.mktemp("site")
    _install(site, "xbs-a", PLUGIN_A)
    _install(site, "xbs-b", PLUGIN_B)
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "XAIBENCH_LOAD_PLUGINS")}
    os.environ["PYTHONPATH"] = os.pathsep.join([str(site), *([saved["PYTHONPATH"]] if saved["PYTHONPATH"] else [])])
    os.environ["XAIBENCH_LOAD_PLUGINS"] = PLUGINS
    sys.path.insert(0, str(site))
    try:
        registry = manager.Registry()
        assert {"xbs-pid-a", "xbs-pid-b"} <= set(registry.names("explainer"))
        yield registry
    finally:
        sys.path.remove(str(site))
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if HAS_RAY:
            import ray

            if ray.is_initialized():
                ray.shutdown()


@pytest.fixture(scope="module")
def ray_started(plugins: manager.Registry) -> None:
    """One Ray instance for the module (2 CPUs, no dashboard), started with the plugins on the
    workers' path (a Ray started earlier without them is shut down first)."""
    import ray

    from xaibench.runner.isolation.ray_executor import start_ray

    if ray.is_initialized():
        ray.shutdown()
    start_ray(ray, cpus=2, address=None)


NEEDS_RAY = pytest.mark.skipif(not HAS_RAY, reason="Ray is not installed (pip install 'xaibench[ray]')")


@pytest.fixture(scope="module", params=["local", pytest.param("ray", marks=NEEDS_RAY)])
def executor(request: pytest.FixtureRequest, plugins: manager.Registry) -> Iterator[Scheduler]:
    """Two workers of the transport under test, for the module (each test checks what it changes)."""
    if request.param == "ray":
        request.getfixturevalue("ray_started")
        from xaibench.runner.isolation.ray_executor import RayExecutor

        made: Scheduler = RayExecutor(plugins, workers=2, threads=1, address=None)
    else:
        made = LocalExecutor(plugins, workers=2, threads=1)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture(scope="module")
def track(plugins: manager.Registry) -> Any:
    spec = next(t for t in plugins.create("suite", "default").tracks() if t.name == "shapes")
    return load_track(spec, plugins, limit=4)


def _tasks(
    track: Any, explainer: str, ids: Sequence[str] | None = None, timeout: float | None = None
) -> list[ExplainTask]:
    """One task per sample (all of the track's, or ``ids``)."""
    index = {s.id: i for i, s in enumerate(track.samples)}
    rows = [index[i] for i in ids] if ids is not None else list(range(len(track.samples)))
    return [
        ExplainTask(
            model=track_model_spec(track),
            explainer=ExplainerSpec(explainer, {}),
            inputs=track.inputs[[row]].detach().cpu().numpy(),
            targets=np.asarray(track.targets[[row]], dtype=np.int64),
            samples=[track.samples[row]],
            seed=0,
            batch_seed=row,
            timeout=timeout,
        )
        for row in rows
    ]


def _pids(executor: Scheduler, track: Any, explainer: str) -> set[int]:
    """The workers that ran three tasks of ``explainer`` (on samples it does not misbehave on), once
    the group has its workers and all have started. (Ray swaps an actor in for a group only while
    the group's actors are fewer than its queued jobs, and one takes seconds to start: meanwhile
    the tasks go to the group's other worker.)"""
    tasks = _tasks(track, explainer, [s.id for s in track.samples if s.id != BAD])
    list(executor.run(tasks))
    executor.started()
    outcomes = list(executor.run(tasks))
    assert all(o.error is None for o in outcomes), outcomes
    return {int(o.outputs[0][0, 0]) for o in outcomes}  # type: ignore[index]


# ---------------------------------------------------------------------------------------- both transports


def test_normal_jobs_come_back_in_order_with_the_in_process_maps(executor: Scheduler, track: Any) -> None:
    tasks = _tasks(track, "random")
    outcomes = list(executor.run(tasks))
    alone = list(InProcessExecutor(manager.get_registry()).run(tasks))
    assert len(outcomes) == len(tasks) == 4
    for mine, theirs in zip(outcomes, alone, strict=True):
        assert mine.error is None and theirs.error is None
        np.testing.assert_array_equal(np.stack(mine.outputs), np.stack(theirs.outputs))  # type: ignore[arg-type]
    assert len({float(np.stack(o.outputs).sum()) for o in outcomes}) == 4  # four different maps, in task order


def test_a_job_whose_worker_dies_fails_with_the_exit_status_and_the_worker_is_replaced(
    executor: Scheduler, track: Any
) -> None:
    before = _pids(executor, track, "xbs-sys-exit")  # no misbehaviour on these samples
    other = [s.id for s in track.samples if s.id != BAD]
    died, after = executor.run(_tasks(track, "xbs-sys-exit", [BAD, other[0]]))
    assert (died.error, died.timed_out, died.outputs) == ("worker exited with status 3", False, None)
    assert after.error is None
    now = _pids(executor, track, "xbs-sys-exit")
    assert len(now) == 2 and len(now & before) == 1  # the dead worker was replaced, the other kept


def test_a_job_that_overruns_its_timeout_is_killed_and_its_worker_replaced(executor: Scheduler, track: Any) -> None:
    before = _pids(executor, track, "xbs-hangs")
    other = [s.id for s in track.samples if s.id != BAD]
    hung, after = executor.run(_tasks(track, "xbs-hangs", [BAD, other[0]], timeout=1.0))
    assert (hung.error, hung.timed_out, hung.outputs) == ("killed after 1 s", True, None)
    assert after.error is None
    now = _pids(executor, track, "xbs-hangs")
    assert len(now) == 2 and len(now & before) == 1  # the hung worker was replaced, the other kept


def test_a_group_keeps_its_workers_and_another_group_gets_its_own(executor: Scheduler, track: Any) -> None:
    """Jobs go to the workers of their group; another group's jobs never share a worker with it.
    Back to the first group: local workers were parked and serve again, Ray actors are fresh."""
    first = _pids(executor, track, "xbs-pid-a")
    assert len(first) == 2 and os.getpid() not in first
    assert _pids(executor, track, "xbs-pid-a") == first  # the same workers
    second = _pids(executor, track, "xbs-pid-b")
    assert not second & first
    again = _pids(executor, track, "xbs-pid-a")
    if executor.transport.park_limit:
        assert again == first  # parked while the other group ran
    else:
        assert not again & (first | second)


def test_a_description_runs_the_constructor_in_a_worker(executor: Scheduler) -> None:
    assert executor.describe(ExplainerSpec("center", {}), 3.0) == ("ok", {"sigma": 0.25})


# ---------------------------------------------------------------------------------------- the core, on a fake


class Clock:
    """Seconds that pass only when the fake transport waits."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Script:
    """What a fake worker does with a job: ``events`` at seconds after it got it, starting in
    ``phase``; ``vanish``: seconds after which it ends without a word."""

    events: list[tuple[float, Event]] = field(default_factory=list)
    phase: str = "call"
    vanish: float | None = None


def done(value: Any = 1.0, after: float = 1.0) -> Script:
    return Script([(after, Reply(encode(("done", [value], None, False))))])


class FakeSlot:
    def __init__(self, transport: FakeTransport, number: int) -> None:
        self.transport = transport
        self.number = number
        self.pending: list[tuple[float, Event]] = []
        self.end: tuple[float, str] | None = None
        self.jobs: list[Job] = []
        self.killed = False

    def send(self, job: Job) -> str:
        if self.transport.gone:
            self.transport.gone -= 1
            self.killed = True
            raise WorkerGone(f"worker {self.number} exited with status 9")
        now, script = self.transport.clock(), job.payload
        self.jobs.append(job)
        self.pending = [(now + t, event) for t, event in script.events]
        self.end = None if script.vanish is None else (now + script.vanish, f"worker {self.number} vanished")
        return script.phase

    def next_time(self) -> float | None:
        times = [t for t, _ in self.pending[:1]] + ([self.end[0]] if self.end else [])
        return min(times, default=None)

    def has_reply(self) -> bool:
        return bool(self.pending) and self.pending[0][0] <= self.transport.clock()

    def receive(self, deadline: float | None) -> Event:
        return self.pending.pop(0)[1]

    def ended(self) -> str | None:
        return self.end[1] if self.end is not None and self.end[0] <= self.transport.clock() else None

    def alive(self) -> bool:
        return not self.killed

    def kill(self) -> None:
        self.killed = True

    abandon = kill


class FakeTransport:
    """Workers in memory; a worker starts after ``start_after`` seconds (``Died`` with
    ``start_death`` instead) when ``start_seconds`` is set (as Ray actors do: then give
    ``poll_seconds=None`` too), at once otherwise (as local processes do)."""

    def __init__(
        self,
        clock: Clock,
        *,
        park_limit: int = 0,
        start_seconds: float | None = None,
        start_after: float = 1.0,
        start_death: str | None = None,
        poll_seconds: float | None = 1.0,
    ) -> None:
        self.clock = clock
        self.poll_seconds = poll_seconds
        self.park_limit = park_limit
        self.start_seconds = start_seconds
        self.start_after = start_after
        self.start_death = start_death
        self.slots: list[FakeSlot] = []  # every worker started, in order
        self.gone = 0  # the next sends that find their worker dead
        self.closed = False

    def start(self) -> FakeSlot:
        slot = FakeSlot(self, len(self.slots))
        if self.start_seconds is not None:
            event = Ready() if self.start_death is None else Died(self.start_death)
            slot.pending = [(self.clock() + self.start_after, event)]
        self.slots.append(slot)
        return slot

    def group(self, explainer: str) -> str:
        return explainer

    def warm(self, slot: Any, job: Job) -> Any:
        return slot

    def wait(self, slots: Sequence[Any], timeout: float | None) -> Collection[Any]:
        due = min((t for s in slots if (t := s.next_time()) is not None), default=None)
        now = self.clock.now
        if due is not None and (timeout is None or due <= now + timeout):
            self.clock.now = max(now, due)
        elif timeout is not None:
            self.clock.now = now + timeout
        else:
            raise AssertionError("the scheduler waits for ever")
        return [s for s in slots if s.has_reply()]

    def start_error(self, reason: str | None) -> Exception:
        return XaibenchError(f"workers do not start: {reason or 'too slow'}")

    def close(self) -> None:
        self.closed = True


def _job(script: Script, group: str = "a", *, call: float | None = 2.0, setup: float | None = 120.0) -> Job:
    return Job("task", script, group, call, setup)


def _ran(transport: FakeTransport) -> list[list[Job]]:
    """The jobs each worker was sent, by worker."""
    return [slot.jobs for slot in transport.slots]


@pytest.fixture()
def clock() -> Clock:
    return Clock()


def test_answers_come_in_job_order_whatever_order_the_workers_finish_in(clock: Clock) -> None:
    transport = FakeTransport(clock)
    scheduler = Scheduler(transport, 2, clock=clock)
    jobs = [_job(done(0, after=3), call=5), _job(done(1, after=1)), _job(done(2, after=1))]
    answers = list(scheduler.execute(jobs))
    assert [a.outputs for a in answers] == [[0], [1], [2]] and all(a.error is None for a in answers)
    assert _ran(transport) == [[jobs[0]], [jobs[1], jobs[2]]]  # the second worker took the third job at 1 s
    assert clock.now == 3  # in parallel


def test_a_later_call_goes_ahead_of_the_jobs_an_earlier_one_still_has_queued(clock: Clock) -> None:
    transport = FakeTransport(clock)
    scheduler = Scheduler(transport, 1, clock=clock)
    outer = [_job(done(0)), _job(done(1))]
    answers = scheduler.execute(outer)
    assert next(answers).outputs == [0]
    inner = _job(done(9))
    assert [a.outputs for a in scheduler.execute([inner])] == [[9]]
    assert next(answers).outputs == [1]
    assert _ran(transport) == [[outer[0], inner, outer[1]]]


def test_a_worker_that_dies_fails_its_job_with_the_reason_and_is_replaced(clock: Clock) -> None:
    transport = FakeTransport(clock)
    scheduler = Scheduler(transport, 1, clock=clock)
    died = _job(Script([(1.0, Died("worker exited with status 3"))]))
    vanished = _job(Script(vanish=1.0))
    described = Job("describe", Script([(1.0, Died("worker exited with status 0"))], phase="setup"), "a", None, 120.0)
    after = _job(done())
    answers = list(scheduler.execute([died, vanished, described, after]))
    assert [(a.error, a.timed_out) for a in answers[:2]] == [
        ("worker exited with status 3", False),
        ("worker 1 vanished", False),
    ]
    assert answers[2] == ("failed", "explainer constructor: worker exited with status 0")
    assert answers[3].outputs == [1.0]
    assert [s.killed for s in transport.slots] == [True, True, True, False]  # each replaced
    assert _ran(transport) == [[died], [vanished], [described], [after]]


def test_an_overrun_is_killed_and_replaced_with_the_reason_of_its_phase(clock: Clock) -> None:
    transport = FakeTransport(clock)
    scheduler = Scheduler(transport, 1, clock=clock)
    call = _job(Script(), call=2.0)
    setup = _job(Script(phase="setup"), call=2.0, setup=120.0)
    slow_call = _job(Script([(5.0, Ready())], phase="setup"), call=2.0)  # built in 5 s, then hangs
    describe = Job("describe", Script(phase="setup"), "a", None, 120.0)
    answers = list(scheduler.execute([call, setup, slow_call, describe]))
    assert [(a.error, a.timed_out) for a in answers[:3]] == [
        ("killed after 2 s", True),
        ("killed after 120 s building the model and the explainer", False),
        ("killed after 2 s", True),
    ]
    assert answers[3] == ("failed", "explainer constructor: killed after 120 s")
    assert clock.now == 2 + 120 + (5 + 2) + 120  # each killed at its deadline
    assert [s.killed for s in transport.slots] == [True, True, True, True, False]


def test_no_limit_waits_as_long_as_it_takes(clock: Clock) -> None:
    transport = FakeTransport(clock)
    answers = list(Scheduler(transport, 1, clock=clock).execute([_job(done(after=5000), call=None, setup=None)]))
    assert answers[0].outputs == [1.0] and clock.now == 5000


def test_replies_that_break_the_rules_fail_the_job_and_replace_the_worker(clock: Clock) -> None:
    class Evil:
        def __reduce__(self) -> Any:
            return (os.system, ("true",))

    transport = FakeTransport(clock)
    scheduler = Scheduler(transport, 1, clock=clock)
    replies = [
        pickle.dumps(("done", [Evil()], None, False)),  # a pickle is not a reply: never loaded
        encode(("what", 1)),
        encode(("described", ("ok", {}))),  # a description's answer to a task
        "not bytes",
        encode(("done", 5, None, False)),  # outputs that are not a list: the worker is kept
    ]
    jobs = [_job(Script([(1.0, Reply(data))])) for data in replies]
    answers = list(scheduler.execute(jobs))
    assert [a.error for a in answers] == [
        "worker sent a reply that is not allowed: a reply must start with the reply format's magic bytes",
        "worker sent a reply that does not follow the protocol",
        "worker sent a reply that does not follow the protocol",
        "worker sent a reply that is not allowed: a worker's reply must be bytes",
        "worker sent outputs that are not a list",
    ]
    assert [s.killed for s in transport.slots] == [True, True, True, True, False]


def test_a_worker_reports_when_the_call_starts(clock: Clock) -> None:
    """A "ready" reply (local workers) or a ``Ready`` event (Ray's second call) starts the call's
    clock; a "ready" that comes in the call phase breaks the protocol."""
    transport = FakeTransport(clock)
    scheduler = Scheduler(transport, 1, clock=clock)
    ready = Reply(encode(("ready",)))
    answer = Reply(encode(("done", [1.0], None, False)))
    in_time = _job(Script([(100.0, ready), (101.0, answer)], phase="setup"), call=2.0)
    twice = _job(Script([(1.0, ready), (1.5, ready)], phase="setup"), call=2.0)
    answers = list(scheduler.execute([in_time, twice]))
    assert answers[0].outputs == [1.0]
    assert answers[1].error == "worker sent a reply that does not follow the protocol"


def test_a_group_prefers_its_own_idle_worker(clock: Clock) -> None:
    transport = FakeTransport(clock)
    scheduler = Scheduler(transport, 2, clock=clock)
    a, b = _job(done(), "a"), _job(done(after=2), "b")
    list(scheduler.execute([a, b]))
    b2, a2 = _job(done(), "b"), _job(done(), "a")
    list(scheduler.execute([b2, a2]))
    assert _ran(transport) == [[a, a2], [b, b2]] and not any(s.killed for s in transport.slots)


@pytest.mark.parametrize("park_limit", [1, 0])
def test_a_worker_of_another_group_is_parked_or_killed(clock: Clock, park_limit: int) -> None:
    transport = FakeTransport(clock, park_limit=park_limit)
    scheduler = Scheduler(transport, 1, clock=clock)
    a, b, a2 = _job(done(), "a"), _job(done(), "b"), _job(done(), "a")
    list(scheduler.execute([a, b, a2]))
    if park_limit:
        assert _ran(transport) == [[a, a2], [b]]  # "a" parked while "b" ran, then served again
        assert [w.slot for w in scheduler.parked] == [transport.slots[1]]
        c = _job(done(), "c")
        list(scheduler.execute([c]))  # parks "a" beyond the limit: the oldest parked ("b") is killed
        assert [s.killed for s in transport.slots] == [False, True, False]
    else:
        assert _ran(transport) == [[a], [b], [a2]]  # "a" killed when "b" came
        assert [s.killed for s in transport.slots] == [True, True, False] and not scheduler.parked


def test_a_worker_that_died_while_parked_is_not_used_again(clock: Clock) -> None:
    transport = FakeTransport(clock, park_limit=4)
    scheduler = Scheduler(transport, 1, clock=clock)
    a, b, a2 = _job(done(), "a"), _job(done(), "b"), _job(done(), "a")
    list(scheduler.execute([a, b]))
    transport.slots[0].killed = True  # (alive() is False now)
    list(scheduler.execute([a2]))
    assert _ran(transport) == [[a], [b], [a2]]


def test_where_workers_start_at_once_every_idle_worker_is_swapped_for_the_queue(clock: Clock) -> None:
    transport = FakeTransport(clock, park_limit=8)
    scheduler = Scheduler(transport, 2, clock=clock)
    list(scheduler.execute([_job(done(), "a"), _job(done(), "a")]))
    b = [_job(done(), "b"), _job(done(), "b")]
    list(scheduler.execute(b))
    assert _ran(transport)[2:] == [[b[0]], [b[1]]] and clock.now == 2  # both in parallel


def test_where_workers_start_slowly_a_group_waits_for_its_own_busy_workers(clock: Clock) -> None:
    transport = FakeTransport(clock, start_seconds=60.0, start_after=10.0, poll_seconds=None)
    scheduler = Scheduler(transport, 2, clock=clock)
    scheduler.started()
    assert clock.now == 10
    list(scheduler.execute([_job(done(), "a"), _job(done(), "a")]))
    one = _job(done(), "b")
    list(scheduler.execute([one]))  # one job: one worker swapped
    assert [s.killed for s in transport.slots] == [True, False, False]
    two = [_job(done(after=5), "b", call=None), _job(done(after=5), "b", call=None)]
    list(scheduler.execute(two))  # two jobs, one worker of "b" already: waits for it, no swap
    assert _ran(transport)[2] == [one, *two] and len(transport.slots) == 3
    three = [_job(done(), "c") for _ in range(3)]
    list(scheduler.execute(three))  # three jobs: both workers swapped
    assert len(transport.slots) == 5 and [s.killed for s in transport.slots][1:3] == [True, True]


@pytest.mark.parametrize(("poll_seconds", "started"), [(None, 3), (1.0, 4)])
def test_where_workers_start_slowly_the_queue_is_looked_at_again_when_the_transport_says(
    clock: Clock, poll_seconds: float | None, started: int
) -> None:
    """Two jobs of a new group: the first swaps a worker out. Looked at again when it has started
    (Ray: on events only), the second waits for it; looked at again a second later (while it is
    still starting), the second swaps the other worker out too."""
    transport = FakeTransport(clock, start_seconds=60.0, start_after=10.0, poll_seconds=poll_seconds)
    scheduler = Scheduler(transport, 2, clock=clock)
    list(scheduler.execute([_job(done(), "a"), _job(done(), "a")]))
    list(scheduler.execute([_job(done(), "b"), _job(done(), "b")]))
    assert len(transport.slots) == started


def test_workers_that_keep_dying_while_starting_stop_the_run(clock: Clock) -> None:
    transport = FakeTransport(clock, start_seconds=60.0, start_death="no CPUs", poll_seconds=None)
    scheduler = Scheduler(transport, 1, clock=clock)
    with pytest.raises(XaibenchError, match=r"workers do not start: no CPUs"):
        list(scheduler.execute([_job(done())]))
    assert len(transport.slots) == scheduling.START_FAILURES  # each death replaced, but the last


def test_a_worker_that_does_not_start_in_time_stops_the_run(clock: Clock) -> None:
    transport = FakeTransport(clock, start_seconds=60.0, start_after=1000.0, poll_seconds=None)
    with pytest.raises(XaibenchError, match=r"workers do not start: too slow"):
        list(Scheduler(transport, 1, clock=clock).execute([_job(done())]))
    assert clock.now == 60


def test_a_worker_found_dead_at_send_is_replaced_and_the_job_sent_again(clock: Clock) -> None:
    transport = FakeTransport(clock)
    scheduler = Scheduler(transport, 1, clock=clock)
    transport.gone = 1
    assert next(scheduler.execute([_job(done())])).outputs == [1.0]
    transport.gone = 2  # twice in a row: the job fails with the second worker's reason
    answer = next(scheduler.execute([_job(done())]))
    assert answer.error == "worker 2 exited with status 9"
    assert [s.killed for s in transport.slots] == [True, True, True, False]


def test_an_interrupted_call_drops_its_queue_and_kills_its_running_workers(clock: Clock) -> None:
    transport = FakeTransport(clock)
    scheduler = Scheduler(transport, 2, clock=clock)
    jobs = [_job(done(0)), _job(done(1, after=50)), _job(done(2)), _job(done(3))]
    answers = scheduler.execute(jobs)
    assert next(answers).outputs == [0]  # job 1 still runs on the second worker, jobs 2 and 3 wait
    answers.close()
    assert not scheduler.queue and [w.slot for w in scheduler.workers] == transport.slots[:1]
    assert [s.killed for s in transport.slots] == [False, True]
    assert next(scheduler.execute([_job(done(4))])).outputs == [4]  # a later call fills the pool again
    assert len(transport.slots) == 3 and len(scheduler.workers) == 2


def test_jobs_get_the_setup_time_at_least_and_no_limit_without_a_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = ExplainerSpec("x", {})
    task = ExplainTask(
        model=None, explainer=spec, inputs=np.zeros(1), targets=np.zeros(1), samples=None, seed=0, batch_seed=0
    )  # type: ignore[arg-type]
    for timeout, limits in [(None, (None, None)), (0, (None, None)), (3.0, (3.0, 120.0)), (500.0, (500.0, 500.0))]:
        task.timeout = timeout
        job = scheduling.task_job(task, "g")
        assert (job.call_limit, job.setup_limit) == limits
    monkeypatch.setattr(scheduling, "SETUP_SECONDS", 0.0)
    assert scheduling.describe_job(spec, 3.0, "g").setup_limit == 3.0
    assert scheduling.describe_job(spec, None, "g").setup_limit is None


def test_close_kills_every_worker_parked_ones_included(clock: Clock) -> None:
    transport = FakeTransport(clock, park_limit=2)
    scheduler = Scheduler(transport, 1, clock=clock)
    list(scheduler.execute([_job(done(), "a"), _job(done(), "b")]))
    scheduler.close()
    assert all(s.killed for s in transport.slots) and len(transport.slots) == 2 and transport.closed
