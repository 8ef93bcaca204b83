"""bench/gpu_check.sh: the dry run (every step on the CPU, tiny sizes) writes every step's figures
and finds the CPU-vs-CPU default-suite runs identical; on a CUDA machine, the real check."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "gpu_check.sh"
STEPS = ("sandbox", "default-suite", "explainers", "road", "field", "field-profile", "throughput", "ray")


def run_check(out: Path, *args: str, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable}
    return subprocess.run(
        [str(SCRIPT), "--out", str(out), *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )


def check_report(report: dict, device: str) -> None:
    assert report["device"] == device
    assert report["torch"] == torch.__version__
    assert report["wall_s"] > 0
    assert set(report["steps"]) == set(STEPS)
    for name, step in report["steps"].items():
        assert step["status"] == "ran", f"{name}: {step.get('error')}"
        assert step["figures"], name
        for key, value in step["figures"].items():
            assert isinstance(value, int | float) and math.isfinite(value), f"{name}.{key} = {value!r}"
        for key, g in step["goals"].items():
            assert isinstance(g["passed"], bool) and math.isfinite(g["value"]), f"{name}.{key}"


@pytest.mark.slow
def test_dry_run_runs_every_step_on_the_cpu(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    pytest.importorskip("quantus")
    out = tmp_path / "x.json"
    done = run_check(out, "--dry-run", timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["dry_run"] is True
    check_report(report, "cpu")
    suite = report["steps"]["default-suite"]
    assert suite["compared"] == "cpu against cpu"
    assert suite["figures"]["differences"] == 0 and suite["differences"] == []
    assert suite["figures"]["records"] > 0 and suite["figures"]["leaderboard_rows"] > 0
    assert report["steps"]["explainers"]["dtoh_copies"] == {"skipped": "no CUDA"}
    assert report["steps"]["ray"]["figures"]["differences"] == 0
    sandboxed = report["steps"]["sandbox"]
    if "skipped" not in sandboxed:  # Landlock here: each variant ran on the CPU
        assert {v: r["device"] for v, r in sandboxed["variants"].items()} == dict.fromkeys(sandboxed["variants"], "ok")
        assert sandboxed["figures"]["na_records"] == 0
    profile = report["steps"]["field-profile"]["profile"]  # where each faithfulness metric's time goes
    assert set(profile) == {"faithfulness_correlation", "pixel_flipping", "infidelity"}
    for name, p in profile.items():
        assert p["wall_s"] > 0 and p["device_busy_s"] is None, name  # no device time on the CPU
        assert p["torch_ops"] and p["python"], name
        assert p["torch_ops_threads"] in ("all", "calling") and p["python_threads"] >= 1, name
        own = sum(sec for _, _, sec in p["python"])  # own times, not cumulative: at most a wall per thread
        assert own <= p["python_wall_s"] * p["python_threads"] * 1.2 + 0.05, name  # of the profiled call
        assert any(key.startswith("aten::") for key, _, _ in p["torch_ops"]), name
    assert "where pixel_flipping's" in done.stdout
    assert "goal" in done.stdout and "default-suite" in done.stdout  # the summary table


def test_unknown_step_is_refused(tmp_path: Path) -> None:
    done = run_check(tmp_path / "y.json", "--only", "no-such-step", timeout=60)
    assert done.returncode == 2 and "invalid choice" in done.stderr
    assert not (tmp_path / "y.json").exists()


def test_a_crashed_step_exits_1_and_the_others_still_run(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    import gpu_check

    def crash(cfg):
        raise RuntimeError("boom\nsecond line")

    def fine(cfg):
        return {"figures": {"x_s": 1.5}, "goals": {"x": {"value": 2.0, "goal": ">= 1", "passed": True}}}

    monkeypatch.setattr(gpu_check, "STEPS", {"road": crash, "ray": fine})
    out = tmp_path / "z.json"
    monkeypatch.setattr(
        sys, "argv", ["gpu_check.py", "--dry-run", "--out", str(out), "--only", "road", "--only", "ray"]
    )
    assert gpu_check.main() == 1
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["steps"]["road"] == {
        "status": "crashed",
        "error": "RuntimeError: boom",
        "wall_s": pytest.approx(0, abs=5),
    }
    assert report["steps"]["ray"]["status"] == "ran" and report["steps"]["ray"]["figures"] == {"x_s": 1.5}
    printed = capsys.readouterr().out
    assert "CRASHED: RuntimeError: boom" in printed and "met" in printed


@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: bench/gpu_check.sh checks the device")
def test_full_check_on_the_gpu(tmp_path: Path) -> None:
    out = tmp_path / "gpu_check.json"
    done = run_check(out, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text(encoding="utf-8"))
    check_report(report, torch.cuda.get_device_name())
    assert report["steps"]["default-suite"]["compared"] == "cuda against cpu"
