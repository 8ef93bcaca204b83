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


# ----------------------------------------------------------------------------- devices and executors, decided once


def _option_default(command: str, name: str) -> object:
    from xaibench.cli import cli

    [param] = [p for p in cli.commands[command].params if p.name == name]
    return param.default


def test_both_front_doors_have_one_default_device_and_executor() -> None:
    """The command line, ``xaibench.run``, :func:`make_run_config` and :class:`RunConfig` itself
    (a configuration built by hand) default to the same device and executor."""
    import dataclasses
    import inspect

    from xaibench.runner.config import DEFAULT_DEVICE, DEFAULT_EXECUTOR, RunConfig, make_run_config

    fields = {f.name: f.default for f in dataclasses.fields(RunConfig)}
    for name, default in (("device", DEFAULT_DEVICE), ("executor", DEFAULT_EXECUTOR)):
        seen = {
            "xaibench run": _option_default("run", name),
            "xaibench.run": inspect.signature(xaibench.run).parameters[name].default,
            "make_run_config": inspect.signature(make_run_config).parameters[name].default,
            "RunConfig": fields[name],
        }
        assert seen == dict.fromkeys(seen, default), name
    assert DEFAULT_DEVICE == "auto" and DEFAULT_EXECUTOR == "local"
    for command in ("tune", "select"):  # the shared option, one default
        assert _option_default(command, "device") == DEFAULT_DEVICE


def test_a_bad_device_is_one_line_from_one_check_at_every_door(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``tpu`` is refused before any work with the same line from the command line, a
    :class:`RunConfig` given to the runner and ``xaibench.run``, each spelled for its door; the
    choices in every message are the one check's (patching them changes all three)."""
    from xaibench.errors import XaibenchError
    from xaibench.plugins.manager import get_registry
    from xaibench.runner import config
    from xaibench.runner.run import Runner

    monkeypatch.setattr(config, "DEVICE_CHOICES", "cpu or mps (patched)")
    cli_line = "--device tpu: unknown device; use cpu or mps (patched)"
    with pytest.raises(SystemExit) as code:
        main(["run", "-q", "-e", "random", *OPTIONS, "--workdir", str(tmp_path / "w"), "--device", "tpu"])
    assert code.value.code == 2  # a usage error: click's hint, then the line
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"Error: Invalid value: {cli_line}"
    with pytest.raises(XaibenchError) as runner:
        by_hand = config.RunConfig(explainers=["random"], workdir=tmp_path / "r", device="tpu", executor="inprocess")
        Runner(by_hand, get_registry())
    assert str(runner.value) == cli_line  # the runner speaks the command line's spelling
    with pytest.raises(XaibenchError) as api:
        xaibench.run("random", tracks="shapes", limit=2, workdir=tmp_path / "a", publish=False, device="tpu")
    assert str(api.value) == "device='tpu': expected cpu or mps (patched)"
    assert not any((tmp_path / d).exists() for d in ("w", "r", "a")), "a bad device must stop the run before any work"


def test_device_and_executor_names_are_defined_in_one_module() -> None:
    """The device choices and the executor names have one home, ``runner/config.py``: no other
    module assigns them or spells an executor name that only the table knows."""
    names = {"DEVICE_CHOICES", "DEVICE_PATTERN", "DEFAULT_DEVICE", "EXECUTORS", "CLI_EXECUTORS", "DEFAULT_EXECUTOR"}
    assigned: dict[str, list[str]] = {}
    spelled: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name) and target.id in names:
                        assigned.setdefault(target.id, []).append(rel)
            if isinstance(node, ast.Constant) and node.value == "inprocess":
                spelled.append(rel)
    assert assigned == {name: ["runner/config.py"] for name in names}
    assert spelled == ["runner/config.py"]


def test_every_executor_is_one_entry_of_the_table() -> None:
    """A backend is one entry (name, the run options it takes, its constructor) plus its module:
    the names the front doors offer come from the table, and ``make_executor`` builds each entry's
    class with the options its entry takes, ignoring the others."""
    import dataclasses
    import inspect

    from xaibench.plugins.manager import get_registry
    from xaibench.runner.config import CLI_EXECUTORS, EXECUTOR_TABLE, EXECUTORS, RunConfig, executor_options
    from xaibench.runner.executors import InProcessExecutor
    from xaibench.runner.isolation.workers import make_executor

    fields = {f.name for f in dataclasses.fields(RunConfig)}
    assert EXECUTORS == ("local", "ray", "inprocess") and CLI_EXECUTORS == ("local", "ray")
    assert _option_default("run", "executor") in CLI_EXECUTORS
    for entry in EXECUTOR_TABLE:
        module, _, name = entry.constructor.partition(":")
        cls = getattr(__import__(module, fromlist=[name]), name)
        assert all(callable(getattr(cls, m, None)) for m in ("describe", "run", "close")), entry.name  # an Executor
        assert set(entry.options) <= fields, entry.name  # options are run options
        assert set(entry.options.values()) <= set(inspect.signature(cls).parameters), entry.name
    config = RunConfig(explainers=["random"], executor="ray", workers=3, threads=2, ray_address="host:1")
    assert executor_options(config) == {"workers": 3, "threads": 2, "ray_address": "host:1"}
    built = make_executor("inprocess", get_registry(), workers=3, threads=2, ray_address="host:1")
    try:
        assert isinstance(built, InProcessExecutor)
    finally:
        built.close()
    with pytest.raises(ValueError, match=r"^unknown executor 'threads'; known: local, ray, inprocess$"):
        make_executor("threads", get_registry())
