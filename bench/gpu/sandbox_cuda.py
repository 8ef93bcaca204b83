"""``sandbox``: CUDA starts in a sandboxed worker, and why not where it does not.

A fresh process with torch imported and CUDA not started (as the zygote that forks workers; this
check's own process has started CUDA) forks one child per variant; the child enters the sandbox
as a worker does and computes on the device (``torch.ones(4) * 2`` there).
Variants: no sandbox; the worker's sandbox (Landlock, CUDA started by ``before_filter``, then the
seccomp filter on every thread, limits); the same without ``before_filter`` (the state before the
fix of 2026-11-29: CUDA started under the filter); Landlock and limits without the filter. Then a
small run (``gradient``, ``center`` on ``shapes``, ``--limit 4``, ``iou``, ``deletion``) on the
device, counting n/a records. Dry run (no CUDA): the variants run on the CPU and say what they did.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from xaibench import sandbox

from .common import Config, env, goal, records, xaibench_run

BENCH = Path(__file__).resolve().parents[1]

VARIANTS = ("no sandbox", "worker sandbox", "filter before CUDA", "no filter")


def _child(variant: str, device: str) -> dict[str, str]:
    scratch = tempfile.mkdtemp(prefix="xaibench-gpu-sandbox-")
    out: dict[str, str] = {}
    try:
        if variant != "no sandbox":
            if variant == "no filter":
                sandbox._install_seccomp = lambda libc, tcp: "off (this check)"  # in this child only
            before = sandbox.start_gpu_runtime if variant == "worker sandbox" else None
            out["entered"] = sandbox.enter_sandbox(sandbox.worker_writable(scratch), before_filter=before).summary()
        out["device"] = "ok" if float((torch.ones(4, device=device) * 2).sum()) == 8.0 else "wrong value"
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        out["device"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    return out


def forked(variant: str, device: str) -> dict[str, str]:
    """``_child`` in a child forked from this process (which must not have started CUDA)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        os.write(write, json.dumps(_child(variant, device)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        data = fh.read()
    os.waitpid(pid, 0)
    return json.loads(data) if data else {"device": "the child died"}


def in_child(variant: str, device: str) -> dict[str, str]:
    """:func:`forked` in a fresh interpreter, the way a worker is forked from the zygote."""
    code = f"from gpu.sandbox_cuda import forked; import json; print(json.dumps(forked({variant!r}, {device!r})))"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env(), cwd=BENCH, capture_output=True, text=True, timeout=300
    )
    lines = done.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {"device": f"failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}"}


def run(cfg: Config) -> dict[str, Any]:
    if not sandbox.sandbox_status().startswith("landlock"):
        return {"figures": {"landlock": 0.0}, "goals": {}, "skipped": sandbox.sandbox_status()}
    found = {variant: in_child(variant, cfg.device) for variant in VARIANTS}
    for variant, result in found.items():
        print(f"   {variant:<22} {result['device']}", flush=True)
    args = ["-e", "gradient,center", "--track", "shapes", "--limit", "4", "--metric", "iou,deletion"]
    seconds = xaibench_run([*args, "--device", cfg.device, "--no-publish"], cfg.tmp / "sandbox-run")
    recs = list(records(cfg.tmp / "sandbox-run").values())
    missing = sum(r.get("na_reason") is not None for r in recs)
    return {
        "figures": {
            "worker_sandbox_ok": float(found["worker sandbox"]["device"] == "ok"),
            "run_s": seconds,
            "records": len(recs),
            "na_records": missing,
        },
        "goals": {
            "device_in_worker_sandbox": goal(float(found["worker sandbox"]["device"] == "ok"), "==", 1),
            "no_na_records": goal(missing, "==", 0),
        },
        "variants": found,
    }
