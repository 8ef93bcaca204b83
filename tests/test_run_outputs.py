"""One run, one answer (issue 24, items 4-6): where a run writes (``--output-path``, the finer
options, ``--no-publish``; ``xaibench.run`` without an output path writes nothing in the current
folder), the terminal table shows only the run's own tracks, health errors exit 1 after
everything is written, ``python -m xaibench`` works and ``run --help`` lists its options in groups."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import xaibench
from xaibench.cli import RUN_OPTION_GROUPS, cli, main
from xaibench.errors import XaibenchError

TINY = ["-q", "-e", "gradient,random", "--limit", "4", "--metric", "iou"]


def _run(*args: str) -> Any:
    return CliRunner().invoke(cli, ["run", *TINY, *args], catch_exceptions=False)


def _boards(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The boards the command line prints, as it prints them."""
    from xaibench.publish import writers

    seen: list[Any] = []
    real = writers.print_leaderboard

    def spy(board: Any, console: Any = None, *, wide: bool = False) -> None:
        seen.append(board)
        real(board, console, wide=wide)

    monkeypatch.setattr(writers, "print_leaderboard", spy)
    return seen


def _tree(root: Path) -> set[str]:
    return {p.name for p in root.iterdir()}


def test_output_path_holds_the_workdir_submissions_and_leaderboard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registry: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    result = _run("--track", "shapes", "--output-path", "out")
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    assert _tree(tmp_path) == {"out"}, "nothing but the output path is written in the current folder"
    assert _tree(out) == {".xaibench", "submissions", "leaderboard"}
    assert (out / ".xaibench" / "summary.json").is_file()
    assert sorted(p.name for p in (out / "submissions").glob("*.json")) == ["gradient.json", "random.json"]
    assert (out / "leaderboard" / "leaderboard.csv").is_file() and (out / "leaderboard" / "site").is_dir()
    assert "records in out/.xaibench/results" in result.output


def test_a_finer_option_overrides_the_output_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registry: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    result = _run("--track", "shapes", "--output-path", "out", "--submissions", "elsewhere")
    assert result.exit_code == 0, result.output
    assert _tree(tmp_path) == {"out", "elsewhere"}
    assert _tree(tmp_path / "out") == {".xaibench", "leaderboard"}
    assert sorted(p.name for p in (tmp_path / "elsewhere").glob("*.json")) == ["gradient.json", "random.json"]


def test_no_publish_writes_records_but_no_submissions_or_leaderboard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registry: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    boards = _boards(monkeypatch)
    result = _run("--track", "shapes", "--output-path", "out", "--no-publish")
    assert result.exit_code == 0, result.output
    assert _tree(tmp_path) == {"out"} and _tree(tmp_path / "out") == {".xaibench"}
    assert (tmp_path / "out" / ".xaibench" / "summary.json").is_file()
    assert "wrote " not in result.output and "site:" not in result.output
    [board] = boards  # the table is still shown, from a board built in memory
    assert board.track_names() == ["shapes"] and set(board.explainers) == {"gradient", "random"}
    iou = {r["explainer"]: r["value"] for r in board.rows if r["metric"] == "iou"}
    assert set(iou) == {"gradient", "random"} and all(0 <= v <= 1 for v in iou.values())


def test_no_publish_with_a_publishing_folder_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(["run", *TINY, "--track", "shapes", "--no-publish", "--submissions", "s"])
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("error: --no-publish with --submissions: give one or the other") and err.count("\n") == 1
    (tmp_path / "afile").write_text("x")
    with pytest.raises(SystemExit):
        main(["run", *TINY, "--track", "shapes", "--output-path", "afile"])
    assert capsys.readouterr().err == "error: --output-path afile: is a file, not a folder; pass a folder\n"
    assert _tree(tmp_path) == {"afile"}


def test_the_table_of_a_run_shows_only_its_own_tracks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registry: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    boards = _boards(monkeypatch)
    assert _run("--track", "shapes", "--output-path", "out").exit_code == 0
    second = _run("--track", "shapes-shortcut", "--output-path", "out")
    assert second.exit_code == 0, second.output
    first_board, run_board = boards
    assert first_board.track_names() == ["shapes"]
    assert run_board.track_names() == ["shapes-shortcut"]
    assert {r["track"] for r in run_board.rows} == {"shapes-shortcut"}
    assert set(run_board.tracks) == {"shapes-shortcut"}
    assert "shapes x shapes-cnn" not in second.output.replace("\n", " ")
    # the leaderboard files still rank every submission of the folder, and `leaderboard build` shows all
    with (tmp_path / "out" / "leaderboard" / "leaderboard.csv").open() as fh:
        assert {r["track"] for r in csv.DictReader(fh)} == {"shapes", "shapes-shortcut"}
    built = CliRunner().invoke(
        cli,
        ["leaderboard", "build", "--submissions", "out/submissions", "--out", "lb", "--no-site"],
        catch_exceptions=False,
    )
    assert built.exit_code == 0, built.output
    assert boards[-1].track_names() == ["shapes", "shapes-shortcut"]
    assert set(boards[-1].summary["explainers"]) == {"gradient", "random"}


def test_health_errors_exit_1_after_everything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registry: Any
) -> None:
    from xaibench.runner import health

    seen: list[Any] = []

    def fake(summary: Any) -> tuple[list[str], list[str]]:
        seen.append(summary)
        return ["track shapes: 90 % of the values are n/a"], ["the model is at chance on shapes"]

    monkeypatch.setattr(health, "health_lines", fake)
    monkeypatch.chdir(tmp_path)
    result = _run("--track", "shapes", "--output-path", "out")
    assert result.exit_code == 1, result.output
    assert seen and all("shapes" in s["tracks"] for s in seen)
    lines = result.output.splitlines()
    warning = lines.index("warning: the model is at chance on shapes")
    error = lines.index("error: track shapes: 90 % of the values are n/a")
    table = next(i for i, line in enumerate(lines) if "gradient" in line)
    assert table < warning < error
    assert (tmp_path / "out" / "leaderboard" / "leaderboard.csv").is_file()
    assert len(list((tmp_path / "out" / "submissions").glob("*.json"))) == 2


def test_health_without_errors_exits_0_with_the_warnings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registry: Any
) -> None:
    from xaibench.runner import health

    monkeypatch.setattr(health, "health_lines", lambda summary: ([], ["the model is at chance on shapes"]))
    monkeypatch.chdir(tmp_path)
    result = _run("--track", "shapes", "--output-path", "out", "--no-publish")
    assert result.exit_code == 0, result.output
    assert "warning: the model is at chance on shapes" in result.output and "error:" not in result.output


def test_api_without_an_output_path_leaves_the_current_folder_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registry: Any
) -> None:
    from xaibench.runner import health

    work, cache = tmp_path / "cwd", tmp_path / "cache"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("XAIBENCH_CACHE", str(cache))
    res = xaibench.run("gradient", tracks="shapes", metrics="iou", limit=4, progress=False)
    assert list(work.iterdir()) == []
    assert res.workdir == cache / "runs" and (cache / "runs" / "summary.json").is_file()
    assert res.submission_files == [] and res.submissions_dir is None and res.leaderboard is None
    assert res.board is not None and res.board.track_names() == ["shapes"]
    assert len(res.records) == 4
    again = xaibench.run("gradient", tracks="shapes", metrics="iou", limit=4, progress=False)
    assert again.summary["tracks"]["shapes"]["explainers"]["gradient"]["explained"]["computed"] == 0  # reused
    assert list(work.iterdir()) == []
    monkeypatch.setattr(health, "health_lines", lambda summary: (["bad"], ["doubtful"]))
    assert (again.errors, again.warnings) == (["bad"], ["doubtful"])  # reported, never raised


def test_api_output_path_and_publish_false(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registry: Any) -> None:
    monkeypatch.setenv("XAIBENCH_CACHE", str(tmp_path / "cache"))
    small: dict[str, Any] = {"tracks": "shapes", "metrics": "iou", "limit": 4, "progress": False, "site": False}
    res = xaibench.run("random", output_path=tmp_path / "out", **small)
    assert _tree(tmp_path / "out") == {".xaibench", "submissions", "leaderboard"}
    assert res.workdir == tmp_path / "out" / ".xaibench"
    assert [p.name for p in res.submission_files] == ["random.json"] and res.leaderboard is not None
    quiet = xaibench.run("random", output_path=tmp_path / "np", publish=False, **small)
    assert _tree(tmp_path / "np") == {".xaibench"} and quiet.submission_files == []
    with pytest.raises(XaibenchError, match=r"^publish=False with leaderboard_dir=: give one or the other"):
        xaibench.run("random", output_path=tmp_path / "x", publish=False, leaderboard_dir=tmp_path / "lb", **small)
    with pytest.raises(XaibenchError, match=r"^publish='no': expected True or False$"):
        xaibench.run("random", output_path=tmp_path / "x", publish="no", **small)  # type: ignore[arg-type]
    (tmp_path / "f").write_text("x")
    with pytest.raises(XaibenchError, match=r"^output_path='.*f': is a file, not a folder; pass a folder$"):
        xaibench.run("random", output_path=tmp_path / "f", **small)
    assert not (tmp_path / "x").exists() and not (tmp_path / "lb").exists()


def test_python_dash_m_xaibench() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "xaibench", "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Usage: python -m xaibench" in out.stdout and "leaderboard" in out.stdout and "run" in out.stdout


def test_run_help_lists_every_option_once_in_groups() -> None:
    result = CliRunner().invoke(cli, ["run", "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    text = result.output
    headings = [line[:-1] for line in text.splitlines() if line.endswith(":") and not line.startswith(" ")]
    assert headings[-5:] == ["What to run", "Your own model and data", "Where results go", "How it runs", "Display"]
    assert "Other options" not in text, "every option of run belongs to a group"
    import click

    command = cli.commands["run"]
    ctx = click.Context(command)
    options = [opt for p in command.get_params(ctx) for opt in p.opts if isinstance(p, click.Option)]
    assert len(options) > 30
    for opt in options:
        assert len(re.findall(rf"(?<![\w-]){re.escape(opt)}(?![\w-])(?=[ ,\n])", _option_column(text))) == 1, opt
    grouped = [name for _, names in RUN_OPTION_GROUPS for name in names]
    assert len(grouped) == len(set(grouped))
    assert "family:NAME" in text and "all (every default metric)" in text
    assert "num_classes" in text and "xaibench list models" in text


def _option_column(text: str) -> str:
    """The option names of a help text: the first column of each option row."""
    rows = [line.strip().split("  ")[0] for line in text.splitlines() if line.startswith("  -")]
    return "\n".join(rows) + "\n"
