"""docs/writing-plugins.md documents every hook with its signature and every name of the kit, and
its example plugin is at most 20 lines of code and works: run in-process on the tiny track, and
pip-installed as a real distribution, discovered through its entry point and run by `xaibench run`.
The plugin `xaibench new-plugin` writes is about as short."""

from __future__ import annotations

import ast
import inspect
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tokenize
import tomllib
import types
from pathlib import Path

import numpy as np
import pytest

from xaibench import kit
from xaibench.plugins import hookspecs
from xaibench.scaffold import scaffold_plugin

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "writing-plugins.md"
MAX_EXAMPLE_LINES = 20


def _hookspecs() -> dict[str, types.FunctionType]:
    marker = f"{hookspecs.PROJECT}_spec"
    return {name: fn for name, fn in vars(hookspecs).items() if inspect.isfunction(fn) and hasattr(fn, marker)}


def _annotation(value: object) -> str:
    if isinstance(value, str):
        return value
    return getattr(value, "__name__", repr(value))


def _signature(name: str, fn: types.FunctionType) -> str:
    """``name(param: Annotation, ...) -> Return`` as written in the hookspec source."""
    sig = inspect.signature(fn)
    params = ", ".join(
        f"{p.name}: {_annotation(p.annotation)}" if p.annotation is not inspect.Parameter.empty else p.name
        for p in sig.parameters.values()
    )
    ret = "" if sig.return_annotation is inspect.Signature.empty else f" -> {_annotation(sig.return_annotation)}"
    return f"{name}({params}){ret}"


def _code_blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def test_every_hookspec_is_found() -> None:
    assert set(_hookspecs()) >= set(hookspecs.HOOK_KINDS), "HOOK_KINDS names a hook that is not a hookspec"


@pytest.mark.parametrize("name", sorted(_hookspecs()))
def test_hook_is_documented_with_its_signature(name: str) -> None:
    text = DOC.read_text(encoding="utf-8")
    signature = _signature(name, _hookspecs()[name])
    assert f"### `{signature}`" in text, f"{DOC.name} has no section '### `{signature}`' for hook {name!r}"


def test_signature_format_matches_source() -> None:
    assert _signature("register_explainers", hookspecs.register_explainers) == (
        "register_explainers(register: Register) -> None"
    )


def code_lines(source: str) -> int:
    """Lines of code as the doc counts them: non-blank lines that are neither comments nor
    docstrings (a string literal opening a module, class or function body)."""
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                docstrings |= set(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    code: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in skip:
            code |= set(range(token.start[0], token.end[0] + 1))
    return len(code - docstrings)


def _example() -> tuple[str, str, str]:
    """The example plugin's ``__init__.py``, its ``pyproject.toml`` and its tests, from the doc."""
    section = DOC.read_text(encoding="utf-8").split("## A complete explainer plugin", 1)[1]
    tests = DOC.read_text(encoding="utf-8").split("## Testing a plugin", 1)[1]
    return _code_blocks(section, "python")[0], _code_blocks(section, "toml")[0], _code_blocks(tests, "python")[0]


def test_code_lines_counts_code_only() -> None:
    source = (
        '"""Module doc."""\n\nimport os  # a comment\n\n\n'
        'def f():\n    """Doc\n    string."""\n    # only a comment\n    return (\n        1\n    )\n'
    )
    assert code_lines(source) == 5  # import, def, and the three lines of the return


def test_example_plugin_is_at_most_20_lines() -> None:
    code = _example()[0]
    lines = code_lines(code)
    assert lines <= MAX_EXAMPLE_LINES, f"the example plugin has {lines} lines of code; the docs promise at most 20"
    text = DOC.read_text(encoding="utf-8")
    assert f"`xaibench_blurgrad/__init__.py`, {lines} lines of code" in text, "the doc states another count"
    assert "from xaibench.kit import" in code, "the example should show the kit"


def test_scaffolded_plugin_is_about_as_short(tmp_path: Path) -> None:
    root = scaffold_plugin("short-probe", tmp_path)
    source = (root / "xaibench_short_probe" / "__init__.py").read_text(encoding="utf-8")
    assert code_lines(source) <= MAX_EXAMPLE_LINES, source
    assert "from xaibench.kit import" in source


def test_every_kit_name_is_documented() -> None:
    text = DOC.read_text(encoding="utf-8")
    missing = [name for name in kit.__all__ if f"`{name}" not in text and f"{name}`" not in text]
    assert not missing, f"{DOC.name} does not document these names of xaibench.kit: {missing}"


def test_example_plugin_runs_end_to_end(register_plugin, tiny_track, monkeypatch) -> None:
    module = types.ModuleType("xaibench_blurgrad")
    exec(compile(_example()[0], f"{DOC.name}:example", "exec"), module.__dict__)
    monkeypatch.setitem(sys.modules, "xaibench_blurgrad", module)

    status = register_plugin(module, name="blurgrad")
    assert status.components == ["explainer:blurred-gradient"]

    from xaibench.errors import XaibenchError
    from xaibench.plugins.manager import get_registry

    registry = get_registry()
    maps = tiny_track.run(registry.create("explainer", "blurred-gradient", radius=1))
    assert (maps >= 0).all() and maps.max() > 0
    assert registry.create("explainer", "blurred-gradient", radius="3").params == {"radius": 3}
    for bad in (-1, 1.5, 33):
        with pytest.raises(XaibenchError, match=r"'radius' must be an integer in \[0, 32\]"):
            registry.create("explainer", "blurred-gradient", radius=bad)
    # radius 0 is the plain gradient magnitude: the built-in `gradient` explainer
    plain = tiny_track.run(registry.create("explainer", "blurred-gradient", radius=0))
    np.testing.assert_allclose(plain, tiny_track.run(registry.create("explainer", "gradient")), rtol=1e-6)


def test_example_pyproject_declares_the_entry_point() -> None:
    config = tomllib.loads(_example()[1])
    assert config["project"]["entry-points"]["xaibench"] == {"blurgrad": "xaibench_blurgrad"}
    assert config["project"]["version"] == "0.1.0"


@pytest.mark.slow
def test_example_plugin_installs_and_runs_through_the_runner(tmp_path: Path) -> None:
    """Build the distribution from the doc, pip-install it into a folder, then in fresh processes:
    run the doc's tests against it, and `xaibench run` it on a few samples of the shapes track."""
    code, pyproject, tests = _example()
    project = tmp_path / "xaibench-blurgrad"
    (project / "xaibench_blurgrad").mkdir(parents=True)
    (project / "xaibench_blurgrad" / "__init__.py").write_text(code, encoding="utf-8")
    (project / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    (project / "tests").mkdir()
    (project / "tests" / "test_blurgrad.py").write_text(tests, encoding="utf-8")
    site = tmp_path / "site"
    build = tmp_path / "build"
    shutil.copytree(project, build)  # pip builds in place: keep the project pristine
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--disable-pip-version-check", "--target", str(site), str(build)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stdout + installed.stderr
    env = {**os.environ, "PYTHONPATH": str(site), "HF_HUB_OFFLINE": "1"}
    env.pop("XAIBENCH_LOAD_PLUGINS", None)
    env.pop("XAIBENCH_DISABLE_PLUGINS", None)

    doc_tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(project / "tests")],
        capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert doc_tests.returncode == 0, doc_tests.stdout[-3000:] + doc_tests.stderr[-2000:]
    assert "2 passed" in doc_tests.stdout

    work = tmp_path / "work"
    xaibench = [sys.executable, "-c", "from xaibench.cli import main; main()"]
    run = subprocess.run(
        [*xaibench, "run", "--explainer", "blurred-gradient", "--track", "shapes", "--limit", "4",
         "--metric", "iou", "--metric", "pointing_game", "--param", "blurred-gradient.radius=1",
         "--workdir", str(work), "--submissions", str(tmp_path / "submissions"),
         "--leaderboard-dir", str(tmp_path / "leaderboard"), "--quiet"],
        capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    summary = json.loads((work / "summary.json").read_text(encoding="utf-8"))
    result = summary["tracks"]["shapes"]["explainers"]["blurred-gradient"]
    assert result["explained"] == {"computed": 4, "cached": 0, "failed": 0}, result["explained"]
    for metric in ("iou", "pointing_game"):
        assert result["metrics"][metric]["n"] == 4, result["metrics"][metric]
    text = json.dumps(summary)
    assert "xaibench-blurgrad" in text and '"radius": 1' in text, "the record names the distribution and params"
