"""Ray executor: speed-up over one local worker on the same explanation work, and identical records.

1. Speed: the same ``xaibench run`` with ``--executor local --workers 1`` and with ``--executor ray
   --workers 2``, in one invocation, each in a fresh workdir (nothing cached but the trained
   models). The work is chosen so that explaining dominates: RISE (xaibench-rise plugin) with
   ``--param rise.n_masks=N`` on the shapes track, scored with the cheap ``sparseness`` metric
   only. Wall times include everything the command does: Ray's start (about 5 s), the workers'
   start, loading the track and scoring. Goal: at least 1.6x on 2 cores. The two runs' records
   are compared too.
2. ``--suite``: the default suite with ``--explainer default``, ``--executor local`` and
   ``--executor ray --workers 2``: prints whether their records are identical (the number of
   records that differ). Takes several minutes.

    .venv/bin/python bench/bench_executors.py [--limit 64] [--n-masks 4000] [--repeat 1] [--suite [--no-speed]]

Both commands run as subprocesses (``xaibench run ... --quiet``), one after the other; the best
of ``--repeat`` runs of each is reported (the runs alternate, so a busy machine hurts both). The
speed-up needs two idle cores: the load average printed after each run is about 1 (local) and
2 (Ray) on an otherwise idle machine; anything above that is other work taking the cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
XAIBENCH = str(Path(sys.executable).parent / "xaibench")


def run(args: list[str], workdir: Path, env: dict[str, str]) -> float:
    """Wall seconds of ``xaibench run ARGS`` with its own workdir, submissions and leaderboard folders."""
    out = [
        "--workdir",
        str(workdir / "work"),
        "--submissions",
        str(workdir / "subs"),
        "--leaderboard-dir",
        str(workdir / "lb"),
    ]
    started = time.perf_counter()
    done = subprocess.run([XAIBENCH, "run", *args, *out, "--quiet"], env=env, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"xaibench run {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return seconds


def records(workdir: Path) -> dict[str, tuple[Any, ...]]:
    """Every record's numbers by key (wall times left out)."""
    out: dict[str, tuple[Any, ...]] = {}
    for path in sorted((workdir / "work" / "results").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            out[r["key"]] = (r["value"], r["na_reason"], r.get("curve"), r.get("extras"), r.get("target"))
    return out


def differing(a: dict[str, tuple[Any, ...]], b: dict[str, tuple[Any, ...]]) -> int:
    """Records present in only one of ``a`` and ``b``, or with other numbers or reasons."""
    return len(a.keys() ^ b.keys()) + sum(a[k] != b[k] for k in a.keys() & b.keys())


def compare(label: str, commands: dict[str, list[str]], tmp: Path, env: dict[str, str], repeat: int) -> dict[str, Any]:
    """Run every command ``repeat`` times, alternating, in fresh workdirs; best times and records."""
    best: dict[str, float] = {}
    found: dict[str, dict[str, tuple[Any, ...]]] = {}
    for round_ in range(repeat):
        for name, args in commands.items():
            workdir = tmp / f"{label}-{name}-{round_}"
            seconds = run(args, workdir, env)
            print(f"  {name:<28} {seconds:7.1f} s   (load average {os.getloadavg()[0]:.2f} after)", flush=True)
            best[name] = min(best.get(name, seconds), seconds)
            found.setdefault(name, records(workdir))
    return {"best": best, "records": found}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=64, help="samples per shapes track (default 64: all)")
    parser.add_argument("--n-masks", type=int, default=4000, help="RISE masks per sample (default 4000)")
    parser.add_argument("--workers", type=int, default=2, help="Ray workers (default 2)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each command; the best counts (default 1)")
    parser.add_argument("--suite", action="store_true", help="also compare records on the default suite (minutes)")
    parser.add_argument("--no-speed", action="store_true", help="skip the speed comparison (with --suite)")
    opts = parser.parse_args()
    try:
        import ray  # noqa: F401
    except ImportError:
        sys.exit("this benchmark needs Ray: pip install 'xaibench[ray]'")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "RAY_USAGE_STATS_ENABLED": "0"}
    print(f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f} at the start")
    with tempfile.TemporaryDirectory(prefix="xaibench-bench-executors-") as tmp_name:
        tmp = Path(tmp_name)
        ray_args = ["--executor", "ray", "--workers", str(opts.workers)]
        if not opts.no_speed:
            tracks = ["--suite", "full", "--track", "shapes", "--track", "shapes-shortcut"]
            work = ["-e", "rise", "--param", f"rise.n_masks={opts.n_masks}", *tracks, "--metric", "sparseness"]
            run([*work, "--limit", "1"], tmp / "warm-up", env)  # the models are trained (once) and cached here
            work += ["--limit", str(opts.limit)]
            print(f"RISE ({opts.n_masks} masks) on {opts.limit} samples of each shapes track, sparseness only:")
            commands = {
                "--executor local --workers 1": [*work, "--executor", "local", "--workers", "1"],
                " ".join(ray_args): [*work, *ray_args],
            }
            result = compare("speed", commands, tmp, env, opts.repeat)
            (local_name, local_s), (ray_name, ray_s) = result["best"].items()
            speedup = local_s / ray_s
            found = list(result["records"].values())
            verdict = "met" if speedup >= 1.6 else "missed"
            print(f"speed-up of {ray_name} over {local_name}: {speedup:.2f}x (goal >= 1.6x: {verdict})")
            print(f"records differing: {differing(*found)} of {len(found[0])}")
        if opts.suite:
            print("default suite, --explainer default:")
            suite = ["--suite", "default", "--explainer", "default"]
            commands = {"--executor local": [*suite, "--executor", "local"], " ".join(ray_args): [*suite, *ray_args]}
            result = compare("suite", commands, tmp, env, 1)
            found = list(result["records"].values())
            n = differing(*found)
            verdict = "identical" if n == 0 else "NOT identical"
            print(f"default suite records differing: {n} of {len(found[0])} ({verdict})")


if __name__ == "__main__":
    main()
