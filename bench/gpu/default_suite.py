"""``default-suite``: the default suite on the device against the same run on the CPU.

Goal: the leaderboards agree (rank, status, label, flags, n and n_na equal; value and the 95 %
interval within 1e-3, relative above 1) and every record agrees (n/a reason equal, value within
the same tolerance). Every difference is listed. Dry run: ``--limit 4`` on the ``shapes`` track,
CPU against CPU (must be identical).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .common import Config, goal, records, xaibench_run

TOL = 1e-3
EXACT = ("rank", "status", "label", "flags", "n", "n_na")
CLOSE = ("value", "ci_low", "ci_high")


def close(a: Any, b: Any) -> bool:
    if a is None or b is None or isinstance(a, str) or isinstance(b, str):
        return a == b
    return abs(a - b) <= TOL * max(1.0, abs(a), abs(b))


def leaderboard_rows(out: Path) -> dict[str, dict[str, Any]]:
    rows = json.loads((out / "leaderboard" / "leaderboard.json").read_text(encoding="utf-8"))["rows"]
    return {f"{r['track']}/{r['explainer']}/{r['metric']}": r for r in rows}


def differences(a: dict[str, dict], b: dict[str, dict], exact: tuple, near: tuple, label: str) -> list[str]:
    found = [f"{label} {k}: only in the {'first' if k in a else 'second'} run" for k in sorted(a.keys() ^ b.keys())]
    for key in sorted(a.keys() & b.keys()):
        ra, rb = a[key], b[key]
        found += [f"{label} {key} {f}: {ra.get(f)!r} != {rb.get(f)!r}" for f in exact if ra.get(f) != rb.get(f)]
        found += [f"{label} {key} {f}: {ra.get(f)!r} vs {rb.get(f)!r}" for f in near if not close(ra.get(f), rb.get(f))]
    return found


def named(recs: dict[str, dict]) -> dict[str, dict]:
    """Records keyed by track/explainer/metric/sample (the record key includes the device)."""
    return {f"{r['track']}/{r['explainer']['name']}/{r['metric']}/{r['sample_id']}": r for r in recs.values()}


def run(cfg: Config) -> dict[str, Any]:
    if cfg.dry:
        base = ["-e", "default", "--track", "shapes", "--limit", "4"]
        runs = {"first": [*base, "--device", "cpu"], "second": [*base, "--device", "cpu"]}
    else:
        runs = {"first": ["-e", "default", "--device", cfg.device], "second": ["-e", "default", "--device", "cpu"]}
        runs["second"] += ["--threads", "8"]  # the CPU run is the slow one; the GPU machine has 16 cores
    outs = {name: cfg.tmp / f"default-suite-{name}" for name in runs}
    # on a GPU machine the two runs go side by side (the CUDA run barely uses the CPU)
    with ThreadPoolExecutor(max_workers=1 if cfg.dry else 2) as pool:
        seconds = dict(zip(runs, pool.map(lambda n: xaibench_run(runs[n], outs[n]), runs), strict=True))
    rows = [leaderboard_rows(outs[n]) for n in runs]
    recs = [named(records(outs[n])) for n in runs]
    found = differences(*rows, EXACT, CLOSE, "row") + differences(*recs, ("na_reason",), ("value",), "record")
    labels = [f"{runs[n][runs[n].index('--device') + 1]}" for n in runs]
    return {
        "compared": f"{labels[0]} against {labels[1]}",
        "figures": {
            f"{labels[0]}_run_s": seconds["first"],
            f"{labels[1]}_run_s" if labels[0] != labels[1] else f"{labels[1]}_second_run_s": seconds["second"],
            "leaderboard_rows": len(rows[0]),
            "records": len(recs[0]),
            "differences": len(found),
        },
        "goals": {"no_differences": goal(len(found), "==", 0)},
        "differences": found[:200],
    }
