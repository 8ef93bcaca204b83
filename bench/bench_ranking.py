"""Ranking at the field's scale (issue 28): ``leaderboard_rows`` on synthetic entries.

For E in (10, 20, 50) explainers x 20 tracks x 30 ranking metrics x 1,000 samples (random
values, about 3 % n/a), each in a fresh subprocess: the seconds to build the entries, the
seconds of ``leaderboard_rows`` (every track's paired ranking from one shared resample per
(track, metric), family and overall ranks), and the subprocess's peak RSS. ``--build`` also
times ``build_board`` end to end from in-memory submission data (entries, ranking, win rates,
labels). Goal: 50 explainers within 60 s and 2 GB end to end, the ranking well under 30 s.

Run: ``.venv/bin/python bench/bench_ranking.py [--explainers 10 20 50] [--build] [--profile]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

TRACKS, METRICS, SAMPLES, NA = 20, 30, 1000, 0.03
FAMILIES = ("alignment", "faithfulness", "robustness")


def submissions(n_explainers: int, seed: int = 0) -> list[tuple[Path, dict]]:
    """``(path, data)`` of n synthetic submissions: every explainer on every track and metric."""
    rng = np.random.default_rng(seed)
    ids = [f"s{k:04d}" for k in range(SAMPLES)]
    out = []
    for x in range(n_explainers):
        tracks = {}
        for t in range(TRACKS):
            metrics = {}
            for m in range(METRICS):
                values = rng.normal(0.5 + 0.002 * x, 0.2, SAMPLES)
                na = rng.random(SAMPLES) < NA
                samples = {s: (None if gone else float(v)) for s, v, gone in zip(ids, values, na, strict=True)}
                kept = values[~na]
                metrics[f"m{m:02d}"] = {
                    "id": f"m{m:02d}",
                    "version": "1.0.0",
                    "family": FAMILIES[m % len(FAMILIES)],
                    "direction": "higher" if m % 2 else "lower",
                    "params": {},
                    "ranking": True,
                    "mean": float(kept.mean()),
                    "ci_low": float(kept.mean()) - 0.01,
                    "ci_high": float(kept.mean()) + 0.01,
                    "n": int(kept.size),
                    "n_na": int(na.sum()),
                    "samples": samples,
                }
            provenance = {"dataset": {"name": "d", "revision": "r"}, "model": {"name": "m", "identity": "m@1"}}
            tracks[f"t{t:02d}"] = {"provenance": {**provenance, "n_samples": SAMPLES}, "metrics": metrics}
        data = {
            "schema": "xaibench.submission/1",
            "explainer": {"name": f"x{x:02d}", "version": "1.0.0", "params": {}},
            "disclosure": {"tuned_on_benchmark": False, "reference_only": False, "notes": ""},
            "created": "2026-01-01T00:00:00+00:00",
            "tracks": tracks,
        }
        out.append((Path(f"x{x:02d}.json"), data))
    return out


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_mb() -> float:
    """Resident memory now (Linux), MB."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def one(n_explainers: int, build: bool, profile: bool) -> dict[str, float]:
    from xaibench.publish.board import build_board
    from xaibench.publish.leaderboard import entries_from_submissions, leaderboard_rows

    start = time.perf_counter()
    subs = submissions(n_explainers)
    made = time.perf_counter() - start
    start = time.perf_counter()
    entries = entries_from_submissions(subs)
    to_entries = time.perf_counter() - start
    result = {"explainers": n_explainers, "make_s": made, "entries_s": to_entries, "data_rss_mb": rss_mb()}
    if profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
    start, cpu = time.perf_counter(), time.process_time()
    rows = leaderboard_rows(entries)
    result["rank_s"], result["rank_cpu_s"] = time.perf_counter() - start, time.process_time() - cpu
    if profile:
        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(25)
    result["rows"] = len(rows)
    del entries, rows
    if build:
        start, cpu = time.perf_counter(), time.process_time()
        board = build_board(subs)
        result["build_s"], result["build_cpu_s"] = time.perf_counter() - start, time.process_time() - cpu
        result["build_rows"] = len(board.rows)
    result["peak_rss_mb"] = peak_mb()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--explainers", type=int, nargs="+", default=[10, 20, 50])
    parser.add_argument("--build", action="store_true", help="also time build_board end to end")
    parser.add_argument("--profile", action="store_true", help="cProfile leaderboard_rows (to stderr)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(one(args.one, args.build, args.profile)))
        return
    print(f"{TRACKS} tracks x {METRICS} metrics x {SAMPLES} samples, {NA:.0%} n/a; one subprocess per row")
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average now: {load} (CPU s: this process alone)")
    for n in args.explainers:
        extra = [f for f, on in (("--build", args.build), ("--profile", args.profile)) if on]
        cmd = [sys.executable, __file__, "--one", str(n), *extra]
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
        if args.profile:
            print(done.stderr)
        r = json.loads(done.stdout)
        build = f", build_board {r['build_s']:.1f} s (CPU {r['build_cpu_s']:.1f} s)" if "build_s" in r else ""
        print(
            f"E = {n:3d}: leaderboard_rows {r['rank_s']:.1f} s (CPU {r['rank_cpu_s']:.1f} s, {r['rows']} rows), "
            f"entries {r['entries_s']:.1f} s"
            f"{build}; peak RSS {r['peak_rss_mb']:.0f} MB, of which the synthetic submissions and entries "
            f"{r['data_rss_mb']:.0f} MB (made in {r['make_s']:.1f} s)"
        )


if __name__ == "__main__":
    main()
