"""What every step shares: the configuration, ``xaibench`` subprocesses, timing and goals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Config:
    dry: bool
    device: str  # "cuda" on a GPU machine, "cpu" for --dry-run or without CUDA
    tmp: Path  # a fresh folder for this check's runs

    @property
    def cuda(self) -> bool:
        return self.device.startswith("cuda")


def env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)  # the .sh adds plugins/
    return {**os.environ, "HF_HUB_OFFLINE": "1", "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": path}


def xaibench_run(args: list[str], out: Path) -> float:
    """Wall seconds of ``xaibench run ARGS --output-path OUT --quiet``; raises with the tail of stderr."""
    cmd = [sys.executable, "-m", "xaibench", "run", *args, "--output-path", str(out), "--quiet"]
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env(), cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    # exit 1 means "the answer has warnings" (e.g. tracks mostly n/a) when records were written
    if done.returncode not in (0, 1) or not (out / ".xaibench" / "summary.json").exists():
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"xaibench run {' '.join(args)} failed ({done.returncode}): {tail[0]}")
    return seconds


def records(out: Path) -> dict[str, dict[str, Any]]:
    """Every record of a run by key (``value``, ``na_reason``, ``curve``, ``extras``, ``target``...)."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted((out / ".xaibench" / "results").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            found[r["key"]] = r
    return found


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(fn: Callable[[], Any], device: str, repeat: int = 1) -> tuple[float, Any]:
    """Best wall seconds of ``repeat`` calls of ``fn`` (the device synchronised), and its last result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        sync(device)
        started = time.perf_counter()
        result = fn()
        sync(device)
        best = min(best, time.perf_counter() - started)
    return best, result


def goal(value: float, op: str, target: float) -> dict[str, Any]:
    """A goal: ``value op target`` with op ``>=``, ``<=`` or ``==``."""
    passed = {">=": value >= target, "<=": value <= target, "==": value == target}[op]
    return {"value": float(value), "goal": f"{op} {target:g}", "passed": bool(passed)}


def dtoh_copies(fn: Callable[[], Any]) -> int:
    """Device-to-host memory copies made by ``fn()`` (CUDA only): each one makes the host wait
    for the work queued before it."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(e.count for e in prof.key_averages() if "DtoH" in e.key or "Device -> Pageable" in e.key)
