"""The shipped PASTA checkpoints' model cards reproduce on every CPU (DESIGN 6).

``xaibench pasta evaluate`` re-trains on the training items shipped beside each checkpoint
(``<name>.items.npz``) and compares every figure of the card (MSE, QWK, item and technique-level
Spearman per question and protocol, to 1e-3 as printed) with what it gets now. Each run is a
subprocess with ``ATEN_CPU_CAPABILITY`` set to ``default`` (no vector kernels), ``avx2``, or unset
(the machine's best), two at a time (training uses one thread each).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CAPABILITIES = (None, "default", "avx2")
CHECKPOINTS = ("proxy-v1", "proxy-handcrafted-v1")
MAIN = "import sys; from xaibench.cli import main; sys.argv[0] = 'xaibench'; main()"


def _has_avx2() -> bool:
    try:
        return " avx2" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


def _start(checkpoint: str, capability: str | None, workdir: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    if capability:
        env["ATEN_CPU_CAPABILITY"] = capability
    args = ["pasta", "evaluate", "--checkpoint", checkpoint, "--json", "--quiet", "--workdir", str(workdir)]
    return subprocess.Popen(
        [sys.executable, "-c", MAIN, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.mark.slow
def test_shipped_cards_reproduce_under_every_cpu_capability(tmp_path: Path) -> None:
    runs = [(c, cap) for c in CHECKPOINTS for cap in CAPABILITIES if cap != "avx2" or _has_avx2()]
    results: dict[tuple[str, str | None], dict] = {}
    for start in range(0, len(runs), 2):
        started = {run: _start(*run, tmp_path / f"{run[0]}-{run[1]}") for run in runs[start : start + 2]}
        for run, proc in started.items():
            out, err = proc.communicate(timeout=900)
            assert proc.returncode == 0, f"{run}: {err}"
            results[run] = json.loads(out)
    for (checkpoint, capability), result in results.items():
        saliency = result["saliency"]
        assert saliency["items"] == "shipped"
        assert saliency["matches"], (checkpoint, capability, saliency["largest_difference"])
        assert saliency["largest_difference"] <= 1e-3
