"""The README `xaibench new-plugin` writes: no link to a page that may not exist, and it says which
environment its commands run in."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from xaibench import scaffold
from xaibench.scaffold import scaffold_plugin


def test_scaffold_templates_link_no_web_page() -> None:
    """Links cannot be checked offline and the package index has no xaibench page: the templates name
    xaibench's own files instead."""
    for name in ("PYPROJECT", "MODULE", "TEST", "README"):
        template = getattr(scaffold, name).template
        assert not re.search(r"https?://|www\.|\]\(", template), f"{name} links a web page"


def test_scaffold_readme_says_which_environment(tmp_path: Path) -> None:
    readme = (scaffold_plugin("env-probe", tmp_path) / "README.md").read_text(encoding="utf-8")
    assert "`source XAIBENCH_CHECKOUT/.venv/bin/activate`" in readme
    assert "`XAIBENCH_CHECKOUT/.venv/bin/`" in readme
    assert "pip install -e ." in readme and "xaibench list explainers" in readme
    assert "`docs/writing-plugins.md` in xaibench's source tree" in readme
    assert (Path(__file__).resolve().parents[1] / "docs" / "writing-plugins.md").is_file()


def test_next_steps_print_each_command_whole_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """However narrow the terminal, every command sits on one line, its path quoted for the shell."""
    monkeypatch.setenv("COLUMNS", "30")
    root = scaffold_plugin("wrap-probe", tmp_path / "a folder with spaces" / ("deep" * 12))
    scaffold.echo_next_steps(root)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"created {root}"
    commands = [shlex.split(line) for line in lines if line.startswith("  ")]
    assert commands == [["pip", "install", "-e", str(root)], ["pytest", str(root)], ["xaibench", "list", "explainers"]]


def test_new_plugin_command_prints_the_next_steps_unwrapped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The command itself prints through :func:`scaffold.echo_next_steps`: at 30 columns the
    ``pip install -e`` line still holds the whole path."""
    from click.testing import CliRunner

    from xaibench.cli import cli

    monkeypatch.setenv("COLUMNS", "30")
    dest = tmp_path / ("nested" * 8)
    result = CliRunner().invoke(cli, ["new-plugin", "unwrapped-probe", "--dest", str(dest)])
    assert result.exit_code == 0, result.output
    root = dest / "xaibench-unwrapped-probe"
    assert f"  pip install -e {shlex.quote(str(root))}" in result.output.splitlines()
