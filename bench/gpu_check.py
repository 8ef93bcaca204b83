"""Every GPU check of issue 29 in one command (about 4 minutes on one H100), figures to one JSON file.

Steps (``--only STEP``, repeatable): sandbox, default-suite, explainers, road, field, field-profile, throughput,
ray; each is a module of ``bench/gpu/`` whose docstring says what it measures and its goals. ``--dry-run`` runs
every step on the CPU with tiny sizes (a few minutes at most on 2 cores) to check the plumbing.
Each figure is printed with the device name; the JSON holds {"device", "torch", "started",
"wall_s", "steps": {name: {"status": "ran"|"crashed", "figures", "goals", ...}}}.

Exit code: 0 when every step ran (goals met or not: see the summary table), 1 when a step crashed
(its one-line error is printed and the other steps still run).

    bench/gpu_check.sh [--out gpu_check.json] [--only road] [--dry-run]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))  # bench_*.py and _faithfulness_common.py import as modules
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import torch  # noqa: E402
from gpu import default_suite, explainers, field, field_profile, ray_check, road, sandbox_cuda, throughput  # noqa: E402
from gpu.common import Config  # noqa: E402

STEPS = {
    "sandbox": sandbox_cuda.run,
    "default-suite": default_suite.run,
    "explainers": explainers.run,
    "road": road.run,
    "field": field.run,
    "field-profile": field_profile.run,
    "throughput": throughput.run,
    "ray": ray_check.run,
}


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def run_step(name: str, cfg: Config, device_name: str) -> dict[str, Any]:
    print(f"== {name} on {device_name}", flush=True)
    started = time.perf_counter()
    try:
        result = STEPS[name](cfg)
    except Exception as exc:  # noqa: BLE001  (a crashed step is reported; the others still run)
        traceback.print_exc(file=sys.stderr)
        print(f"   CRASHED: {one_line(exc)}", flush=True)
        return {"status": "crashed", "error": one_line(exc), "wall_s": time.perf_counter() - started}
    result = {"status": "ran", **result, "wall_s": time.perf_counter() - started}
    for key, value in result.get("figures", {}).items():
        print(f"   {key:<40} {value:12.4g}   [{device_name}]", flush=True)
    return result


def summary(steps: dict[str, dict[str, Any]]) -> None:
    print(f"\n{'step':<15} {'goal':<40} {'value':>12} {'target':>10}  result")
    for name, step in steps.items():
        if step["status"] != "ran":
            print(f"{name:<15} {'(step crashed)':<40} {'':>12} {'':>10}  CRASHED: {step['error']}")
            continue
        for goal_name, g in step.get("goals", {}).items():
            verdict = "met" if g["passed"] else "MISSED"
            print(f"{name:<15} {goal_name:<40} {g['value']:12.4g} {g['goal']:>10}  {verdict}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="gpu_check.json", help="JSON file for every figure (default gpu_check.json)")
    parser.add_argument("--only", action="append", choices=list(STEPS), help="run this step only (repeatable)")
    parser.add_argument("--dry-run", action="store_true", help="every step on the CPU with tiny sizes")
    opts = parser.parse_args()
    cuda = torch.cuda.is_available() and not opts.dry_run
    device_name = torch.cuda.get_device_name() if cuda else "cpu"
    if not cuda and not opts.dry_run:
        print("warning: no CUDA device; the full-size steps run on the CPU (slow; try --dry-run)", file=sys.stderr)
    started = time.perf_counter()
    report: dict[str, Any] = {
        "device": device_name,
        "torch": torch.__version__,
        "dry_run": opts.dry_run,
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "steps": {},
    }
    with tempfile.TemporaryDirectory(prefix="xaibench-gpu-check-") as tmp:
        if opts.dry_run:
            torch.set_num_threads(1)  # on a shared machine, spinning OpenMP threads distort the ratios
        cfg = Config(dry=opts.dry_run, device="cuda" if cuda else "cpu", tmp=Path(tmp))
        for name in opts.only or list(STEPS):
            report["steps"][name] = run_step(name, cfg, device_name)
            report["wall_s"] = time.perf_counter() - started
            Path(opts.out).write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    summary(report["steps"])
    print(f"\n{device_name}, torch {torch.__version__}: {report['wall_s']:.1f} s; figures in {opts.out}")
    return 1 if any(s["status"] != "ran" for s in report["steps"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
