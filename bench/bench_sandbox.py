"""The cost of the worker sandbox: one small default-suite-like run with it on and off.

The run: the default explainers (those installed) on the ``shapes`` track, the default metrics,
``--limit`` samples, no explanation cache, one worker. Runs with the sandbox on and off
alternate, ``--repeats`` of each in this one process, so both see the same load; the ratio of
their medians is printed, with the load average. Also the cost of entering the sandbox itself
(measured in forked children). Goal: on/off at most 1.05.

    PYTHONPATH=. HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_sandbox.py [--limit 8] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from xaibench.plugins.manager import get_registry
from xaibench.runner.run import DEFAULT_EXPLAINERS, RunConfig, run
from xaibench.sandbox import OFF_VARIABLE, enter_sandbox, sandbox_status

GOAL = 1.05


def one_run(workdir: Path, explainers: list[str], limit: int, sandbox: bool) -> float:
    os.environ[OFF_VARIABLE] = "1" if sandbox else "0"
    config = RunConfig(
        explainers=explainers,
        tracks=["shapes"],
        limit=limit,
        workdir=workdir,
        progress=False,
        use_cache=False,
        examples=0,
    )
    started = time.perf_counter()
    summary = run(config, get_registry()).summary
    seconds = time.perf_counter() - started
    assert summary["run"]["sandbox"].startswith("landlock" if sandbox else "off"), summary["run"]["sandbox"]
    return seconds


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
    times: dict[bool, list[float]] = {True: [], False: []}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="xaibench-bench-sandbox-") as tmp:
        one_run(Path(tmp, "warm-up"), explainers, limit=2, sandbox=True)  # imports, model weights
        for i in range(opts.repeats):
            for sandbox in (i % 2 == 0, i % 2 != 0):  # on/off, then off/on: no side always first
                times[sandbox].append(one_run(Path(tmp, f"run-{i}-{sandbox}"), explainers, opts.limit, sandbox))
        entering = enter_seconds(Path(tmp))
    load_after = os.getloadavg()
    on, off = statistics.median(times[True]), statistics.median(times[False])
    print(f"{status}; {', '.join(explainers)} on shapes, {opts.limit} samples, {opts.repeats} runs each")
    print(f"  sandbox on : {' '.join(f'{t:.2f}' for t in times[True])} s (median {on:.2f} s)")
    print(f"  sandbox off: {' '.join(f'{t:.2f}' for t in times[False])} s (median {off:.2f} s)")
    print(f"  on/off {on / off:.3f} (goal <= {GOAL}: {'met' if on / off <= GOAL else 'missed'})")
    print(f"  entering the sandbox: {1e3 * entering:.2f} ms per worker (median)")
    print(f"  load average before {load_before[0]:.2f}, after {load_after[0]:.2f} ({os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
