"""One front door: the command line's ``run`` is the Python API's ``run``, every run configuration
is made in one module, the runner owns its executor, and no command changes the process
environment."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

import xaibench
from xaibench.cli import main
from xaibench.results import records

PACKAGE = Path(xaibench.__file__).resolve().parent
OPTIONS = ["--track", "shapes", "--metric", "iou", "--metric", "deletion", "--limit", "4", "--seed", "3"]


def _calls(name: str) -> dict[str, int]:
    """Source file (relative to the package) -> number of calls of ``name(...)``."""
    found: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            if isinstance(node.func, ast.Name) and node.func.id == name:
                rel = str(path.relative_to(PACKAGE))
                found[rel] = found.get(rel, 0) + 1
    return found


def test_a_run_configuration_is_made_in_one_module_only() -> None:
    assert _calls("RunConfig") == {"runner/config.py": 1}


def test_only_the_runner_closes_its_executor() -> None:
    """Callers use the runner in ``with`` blocks; closing the executor is the runner's job."""
    closing = [
        str(p.relative_to(PACKAGE)) for p in sorted(PACKAGE.rglob("*.py")) if "executor.close()" in p.read_text()
    ]
    assert closing and all(rel.startswith("runner/") for rel in closing), closing


def _cli_run(tmp_path: Path, *extra: str) -> int:
    argv = ["run", "-q", "-e", "random", "-e", "sobel", *OPTIONS, "--workdir", str(tmp_path / "work")]
    argv += ["--submissions", str(tmp_path / "sub"), "--leaderboard-dir", str(tmp_path / "lb"), *extra]
    try:
        main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def _frame(workdir: Path):
    frame = records(workdir).drop(columns=["wall_time_s"])
    return frame.sort_values(["track", "explainer", "metric", "sample_id"]).reset_index(drop=True)


@pytest.mark.slow
def test_the_command_line_and_the_api_give_identical_records(tmp_path: Path) -> None:
    assert _cli_run(tmp_path / "cli") == 0
    xaibench.run(
        ["random", "sobel"],
        tracks="shapes",
        metrics=["iou", "deletion"],
        limit=4,
        seed=3,
        progress=False,
        workdir=tmp_path / "api" / "work",
        submissions=tmp_path / "api" / "sub",
        leaderboard_dir=tmp_path / "api" / "lb",
    )
    cli, api = _frame(tmp_path / "cli" / "work"), _frame(tmp_path / "api" / "work")
    assert len(cli) == 2 * 2 * 4
    assert cli.equals(api)
    assert (tmp_path / "cli" / "lb" / "leaderboard.csv").read_text() == (
        tmp_path / "api" / "lb" / "leaderboard.csv"
    ).read_text()


@pytest.mark.slow
def test_no_command_leaves_the_environment_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XAIBENCH_DATA_DIR", raising=False)
    data = tmp_path / "data"
    data.mkdir()
    before = dict(os.environ)
    assert _cli_run(tmp_path / "cli", "--data-dir", str(data)) == 0
    assert dict(os.environ) == before
    xaibench.run(
        "random",
        tracks="shapes",
        metrics="iou",
        limit=2,
        progress=False,
        data_dir=data,
        workdir=tmp_path / "api",
        submissions=None,
        leaderboard_dir=None,
    )
    assert dict(os.environ) == before
    build = ["leaderboard", "build", "--submissions", str(tmp_path / "cli" / "sub"), "--out", str(tmp_path / "b")]
    try:
        main([*build, "--no-site", "--data-dir", str(data)])
    except SystemExit as exc:
        assert not exc.code
    assert dict(os.environ) == before
