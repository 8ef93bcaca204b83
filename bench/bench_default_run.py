"""Cold and warm wall time of the default run, their ratio, and (optionally) the fresh-install time.

Cold: empty workdir and empty model cache (the shapes CNNs train, nothing is cached).
Warm: the same command again (records, explanations and models are reused).
Goals: cold at most 120 s on 2 cores; warm at most 0.1 x cold.

    .venv/bin/python bench/bench_default_run.py [--explainer default] [--install]

``--install`` also times a fresh virtual environment with the README's set-up (pip only,
from the local wheel files; about 6 GB of disk).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed_run(args: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(args, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def fresh_install_seconds(tmp: Path) -> float:
    venv = tmp / "venv"
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "-r", str(ROOT / "requirements-torch.txt")], check=True)
    plugins = [f"{p}" for p in sorted((ROOT / "plugins").iterdir()) if (p / "pyproject.toml").exists()]
    subprocess.run([*pip, f"{ROOT}[test,lint,clip,ray]", *plugins], check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--explainer", default="default")
    parser.add_argument("--install", action="store_true", help="also time a fresh install")
    opts = parser.parse_args()
    xaibench = str(Path(sys.executable).parent / "xaibench")
    with tempfile.TemporaryDirectory(prefix="xaibench-bench-") as tmp_name:
        tmp = Path(tmp_name)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "XAIBENCH_CACHE": str(tmp / "model-cache")}
        args = [xaibench, "run", "--suite", "default", "--explainer", opts.explainer, "--quiet"]
        args += [
            "--workdir",
            str(tmp / "work"),
            "--submissions",
            str(tmp / "subs"),
            "--leaderboard-dir",
            str(tmp / "lb"),
        ]
        cold = timed_run(args, env, tmp)
        warm = timed_run(args, env, tmp)
        print(f"default run ({opts.explainer}): cold {cold:.1f} s, warm {warm:.1f} s, warm/cold {warm / cold:.3f}")
        print(
            f"  goals: cold <= 120 s ({'met' if cold <= 120 else 'missed'}), "
            f"warm/cold <= 0.1 ({'met' if warm / cold <= 0.1 else 'missed'})"
        )
        if opts.install:
            seconds = fresh_install_seconds(tmp)
            print(f"fresh install (venv + pip, local wheels): {seconds:.1f} s")


if __name__ == "__main__":
    main()
