"""The cost of the worker sandbox and of the integrity checks: a small default-suite-like run, cold and warm.

The run: the default explainers (those installed) on the ``shapes`` track, the default metrics,
``--limit`` samples, one worker, the explanation cache on, a fresh ``XAIBENCH_CACHE`` (so a fresh
PASTA embedding cache). *Cold*: a new workdir. *Warm*: the same workdir again with its records
deleted, so every explanation and embedding is read back from the caches, each entry's tag checked.
Runs with the sandbox on and off alternate, ``--repeats`` of each in this one process, so all see
the same load. Printed, against the goal 1.05 each (cold and warm):

- sandbox on/off: the ratio of the medians of the runs with the sandbox on and off, in wall time
  and in CPU time (the runner's, the zygote's and the workers': less sensitive to other load);
- integrity checks on/off: each run counts the seconds it spends in :mod:`xaibench.integrity`
  (keys read or made, tags made and checked, tag files written and read: the outermost call of
  ``secret``, ``sign``, ``verify``, ``write_tag``, ``file_verified``, wrapped here for the bench
  only); a run without them would take its wall time less those seconds, so the ratio is
  ``wall / (wall - integrity)``, the median over all runs;
- both: the median of the runs with the sandbox on over that of the runs with it off, less their
  integrity seconds.

Also the cost of entering the sandbox itself (measured in forked children), and the load average.

    PYTHONPATH=. HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_sandbox.py [--limit 8] [--repeats 3]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import resource
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xaibench import integrity
from xaibench.pasta import scorer
from xaibench.plugins.manager import get_registry
from xaibench.runner.run import DEFAULT_EXPLAINERS, RunConfig, run
from xaibench.sandbox import OFF_VARIABLE, enter_sandbox, sandbox_status

GOAL = 1.05
COUNTED = ("secret", "sign", "verify", "write_tag", "file_verified")
"""The functions of :mod:`xaibench.integrity` whose time is counted (every caller goes through them)."""
KINDS = ("cold", "warm")


@dataclass
class IntegrityClock:
    """Seconds spent in the outermost calls of :data:`COUNTED` (a call inside another is not counted twice)."""

    seconds: Counter[str] = field(default_factory=Counter)  # by function
    calls: Counter[str] = field(default_factory=Counter)
    _depth: threading.local = field(default_factory=threading.local)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            depth = getattr(self._depth, "n", 0)
            if depth:
                return fn(*args, **kwargs)
            self._depth.n = 1
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - started
                self._depth.n = 0
                with self._lock:
                    self.seconds[name] += elapsed
                    self.calls[name] += 1

        return timed


@contextlib.contextmanager
def counting_integrity() -> Iterator[IntegrityClock]:
    """While inside, the functions :data:`COUNTED` of :mod:`xaibench.integrity` add their time to
    the clock yielded (callers look them up on the module at each call, so all are seen)."""
    clock = IntegrityClock()
    originals = {name: getattr(integrity, name) for name in COUNTED}
    try:
        for name, fn in originals.items():
            setattr(integrity, name, clock.wrap(name, fn))
        yield clock
    finally:
        for name, fn in originals.items():
            setattr(integrity, name, fn)


@dataclass
class Timing:
    wall: float
    cpu: float  # the runner's and its reaped children's (the zygote and its workers) CPU seconds
    clock: IntegrityClock

    @property
    def integrity(self) -> float:
        return sum(self.clock.seconds.values())


def one_run(workdir: Path, explainers: list[str], limit: int, sandbox: bool) -> Timing:
    """One run in ``workdir`` (its PASTA embeddings under ``workdir/xaibench-cache``), timed."""
    os.environ[OFF_VARIABLE] = "1" if sandbox else "0"
    os.environ["XAIBENCH_CACHE"] = str(workdir / "xaibench-cache")
    scorer._SCORERS.clear()  # a new scorer, with its embedding cache there, as in a new process
    config = RunConfig(
        explainers=explainers,
        tracks=["shapes"],
        limit=limit,
        workdir=workdir,
        progress=False,
        examples=0,
    )
    with counting_integrity() as clock:
        started, cpu = time.perf_counter(), _cpu_seconds()
        summary = run(config, get_registry()).summary
        seconds, cpu = time.perf_counter() - started, _cpu_seconds() - cpu
    assert summary["run"]["sandbox"].startswith("landlock" if sandbox else "off"), summary["run"]["sandbox"]
    return Timing(seconds, cpu, clock)


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def cold_and_warm(workdir: Path, explainers: list[str], limit: int, sandbox: bool) -> dict[str, Timing]:
    """A run in a new ``workdir``, then one again there with the records deleted (from the caches)."""
    cold = one_run(workdir, explainers, limit, sandbox)
    for records in (workdir / "results").glob("*.jsonl"):
        records.unlink()
    return {"cold": cold, "warm": one_run(workdir, explainers, limit, sandbox)}


def enter_seconds(scratch: Path, n: int = 20) -> float:
    """Median seconds that entering the sandbox takes, measured in ``n`` forked children."""
    seconds = []
    for _ in range(n):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            started = time.perf_counter()
            enter_sandbox([scratch, Path("/dev/null")])
            os.write(write, repr(time.perf_counter() - started).encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as fh:
            seconds.append(float(fh.read()))
        os.waitpid(pid, 0)
    return statistics.median(seconds)


def _verdict(ratio: float) -> str:
    return f"{ratio:.3f} ({'met' if ratio <= GOAL else 'missed'})"


def report(times: dict[tuple[str, bool], list[Timing]]) -> list[str]:
    """The lines printed for the timings of each (kind, sandbox)."""
    lines = []
    for kind in KINDS:
        on, off = times[kind, True], times[kind, False]
        wall_on, wall_off = statistics.median(t.wall for t in on), statistics.median(t.wall for t in off)
        bare_off = statistics.median(t.wall - t.integrity for t in off)
        checks = statistics.median(t.wall / (t.wall - t.integrity) for t in on + off)
        calls = sum((t.clock.calls for t in on + off), Counter())
        spent = sum((t.clock.seconds for t in on + off), Counter())
        by_name = ", ".join(
            f"{n} {calls[n] // len(on + off)} x {1e6 * spent[n] / max(calls[n], 1):.0f} us" for n in COUNTED
        )
        lines += [
            f"  {kind}:",
            f"    sandbox on : {' '.join(f'{t.wall:.2f}' for t in on)} s (median {wall_on:.2f} s)",
            f"    sandbox off: {' '.join(f'{t.wall:.2f}' for t in off)} s (median {wall_off:.2f} s)",
            f"    in integrity checks: {' '.join(f'{1e3 * t.integrity:.0f}' for t in on + off)} ms",
            f"      calls per run x mean time: {by_name}",
            f"    sandbox on/off          {_verdict(wall_on / wall_off)}; in CPU seconds "
            f"{_verdict(statistics.median(t.cpu for t in on) / statistics.median(t.cpu for t in off))}",
            f"    integrity checks on/off {_verdict(checks)}",
            f"    both on/off             {_verdict(wall_on / bare_off)}",
        ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    opts = parser.parse_args()
    status = sandbox_status()
    if not status.startswith("landlock"):
        raise SystemExit(f"no sandbox to measure: {status}")
    registry = get_registry()
    explainers = [name for name in DEFAULT_EXPLAINERS if name in registry.names("explainer")]
    times: dict[tuple[str, bool], list[Timing]] = {(k, s): [] for k in KINDS for s in (True, False)}
    load_before = os.getloadavg()
    cache_before = os.environ.get("XAIBENCH_CACHE")
    try:
        with tempfile.TemporaryDirectory(prefix="xaibench-bench-sandbox-") as tmp:
            one_run(Path(tmp, "warm-up"), explainers, limit=2, sandbox=True)  # imports, model weights
            for i in range(opts.repeats):
                for sandbox in (i % 2 == 0, i % 2 != 0):  # on/off, then off/on: no side always first
                    for kind, timing in cold_and_warm(
                        Path(tmp, f"run-{i}-{sandbox}"), explainers, opts.limit, sandbox
                    ).items():
                        times[kind, sandbox].append(timing)
            entering = enter_seconds(Path(tmp))
    finally:
        if cache_before is None:
            os.environ.pop("XAIBENCH_CACHE", None)
        else:
            os.environ["XAIBENCH_CACHE"] = cache_before
    load_after = os.getloadavg()
    print(
        f"{status}; {', '.join(explainers)} on shapes, {opts.limit} samples, {opts.repeats} runs each; goal <= {GOAL}"
    )
    print("\n".join(report(times)))
    print(f"  entering the sandbox: {1e3 * entering:.2f} ms per worker (median)")
    print(f"  load average before {load_before[0]:.2f}, after {load_after[0]:.2f} ({os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
