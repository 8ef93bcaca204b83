"""The kit is the whole plugin API (issue 23): the first-party plugins, what `xaibench new-plugin`
writes and the documented example plugin import nothing from xaibench but ``xaibench.kit``; their
tests import nothing but the kit and the testing kit, ``xaibench.testing``.

Imports are read with ``ast`` at any depth of the syntax tree (lazy imports inside functions and
``if TYPE_CHECKING:`` blocks count) and in every form: ``import xaibench.api``, ``from xaibench
import hookimpl`` (the facade), ``from xaibench.api import Register``, and
``importlib.import_module("xaibench.api")`` with a literal name."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from xaibench.scaffold import scaffold_plugin

REPO = Path(__file__).resolve().parents[1]
PLUGINS = REPO / "plugins"
FIRST_PARTY = ("captum", "gradcam", "quantus", "rise", "vit", "zennit")

SOURCE_MAY_IMPORT: tuple[str, ...] = ("xaibench.kit",)
"""What a plugin's own modules may import from xaibench."""
TESTS_MAY_IMPORT: tuple[str, ...] = ("xaibench.kit", "xaibench.testing")
"""What a plugin's tests may import from xaibench."""


def _is_xaibench(module: str) -> bool:
    return module.split(".")[0] == "xaibench"


def _literal_import(node: ast.Call) -> str | None:
    """The module named by ``importlib.import_module("...")`` or ``__import__("...")``, if literal."""
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if name not in {"import_module", "__import__"} or not node.args:
        return None
    first = node.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def xaibench_imports(source: str) -> list[tuple[int, str]]:
    """``(line, module)`` for every import of xaibench in ``source``, at any depth. ``from
    xaibench import name`` counts as ``xaibench.name`` (a submodule, or a name of the facade,
    which is not the kit either); relative imports stay inside the plugin and are skipped."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if _is_xaibench(alias.name)]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module and _is_xaibench(node.module):
            if node.module == "xaibench":
                found += [(node.lineno, f"xaibench.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Call):
            module = _literal_import(node)
            if module is not None and _is_xaibench(module):
                found.append((node.lineno, module))
    return sorted(found)


def forbidden_imports(source: str, allowed: tuple[str, ...]) -> list[str]:
    """``"line N: module"`` for each import of xaibench in ``source`` outside ``allowed`` (a
    module or its submodules)."""
    return [
        f"line {line}: {module}"
        for line, module in xaibench_imports(source)
        if not any(module == ok or module.startswith(ok + ".") for ok in allowed)
    ]


# ----------------------------------------------------------------------------- the check itself

SYNTHETIC = """\
import xaibench
import xaibench.api as api
from xaibench import hookimpl, kit
from xaibench.api import Register
from xaibench.kit import Explainer
from xaibench.kit.sub import thing
from xaibench.testing.tiny import tiny_track
from xaibench_captum import maps
from . import sibling
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xaibench.plugins.manager import Registry


def lazy():
    from xaibench.runner.run import resolve_metrics
    import importlib
    importlib.import_module("xaibench.imaging")
    __import__("numpy")
"""


def test_the_check_finds_every_form_of_import() -> None:
    assert forbidden_imports(SYNTHETIC, SOURCE_MAY_IMPORT) == [
        "line 1: xaibench",
        "line 2: xaibench.api",
        "line 3: xaibench.hookimpl",
        "line 4: xaibench.api",
        "line 7: xaibench.testing.tiny",
        "line 13: xaibench.plugins.manager",
        "line 17: xaibench.runner.run",
        "line 19: xaibench.imaging",
    ]
    # the test kit is allowed in tests, nothing else is
    assert forbidden_imports(SYNTHETIC, TESTS_MAY_IMPORT) == [
        "line 1: xaibench",
        "line 2: xaibench.api",
        "line 3: xaibench.hookimpl",
        "line 4: xaibench.api",
        "line 13: xaibench.plugins.manager",
        "line 17: xaibench.runner.run",
        "line 19: xaibench.imaging",
    ]


def test_the_check_passes_a_source_that_imports_the_kit_only() -> None:
    source = "from xaibench.kit import Explainer, hookimpl\nimport xaibench.kit as kit\nfrom xaibench import kit\n"
    assert forbidden_imports(source, SOURCE_MAY_IMPORT) == []
    assert forbidden_imports("from xaibench.kitchen import sink\n", SOURCE_MAY_IMPORT) == [
        "line 1: xaibench.kitchen"
    ], "a module whose name merely starts like the kit is not the kit"


# ----------------------------------------------------------------------------- first-party plugins


def _files(pattern: str) -> list[Path]:
    return sorted(p for p in PLUGINS.glob(pattern) if p.is_file())


PLUGIN_SOURCES = _files("*/xaibench_*/**/*.py")
PLUGIN_TESTS = _files("*/tests/**/*.py")


def test_every_first_party_distribution_is_checked() -> None:
    assert sorted(p.name.removeprefix("xaibench-") for p in PLUGINS.iterdir() if p.is_dir()) == list(FIRST_PARTY)
    for name in FIRST_PARTY:
        assert any(p.is_relative_to(PLUGINS / f"xaibench-{name}") for p in PLUGIN_SOURCES), f"no sources of {name}"
        assert any(p.is_relative_to(PLUGINS / f"xaibench-{name}") for p in PLUGIN_TESTS), f"no tests of {name}"


@pytest.mark.parametrize("path", PLUGIN_SOURCES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_plugin_sources_import_only_the_kit(path: Path) -> None:
    bad = forbidden_imports(path.read_text(encoding="utf-8"), SOURCE_MAY_IMPORT)
    assert not bad, f"{path.relative_to(REPO)} imports from xaibench beyond xaibench.kit: {bad}"


@pytest.mark.parametrize("path", PLUGIN_TESTS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_plugin_tests_import_only_the_kit_and_the_test_kit(path: Path) -> None:
    bad = forbidden_imports(path.read_text(encoding="utf-8"), TESTS_MAY_IMPORT)
    assert not bad, f"{path.relative_to(REPO)} imports from xaibench beyond xaibench.kit and xaibench.testing: {bad}"


# ----------------------------------------------------------------------------- the scaffold and the docs


def test_the_scaffolded_plugin_imports_only_the_kit(tmp_path: Path) -> None:
    root = scaffold_plugin("api-probe", tmp_path)
    sources = sorted((root / "xaibench_api_probe").rglob("*.py"))
    tests = sorted((root / "tests").rglob("*.py"))
    assert sources and tests
    assert sorted(root.rglob("*.py")) == sorted(sources + tests), "a generated Python file is not checked"
    for path in sources:
        text = path.read_text(encoding="utf-8")
        assert xaibench_imports(text), f"{path.name} should import the kit"
        assert forbidden_imports(text, SOURCE_MAY_IMPORT) == [], path.name
    for path in tests:
        assert forbidden_imports(path.read_text(encoding="utf-8"), TESTS_MAY_IMPORT) == [], path.name


def test_the_documented_example_plugin_imports_only_the_kit() -> None:
    doc = (REPO / "docs" / "writing-plugins.md").read_text(encoding="utf-8")
    plugin = re.findall(r"```python\n(.*?)```", doc.split("## A complete explainer plugin", 1)[1], flags=re.S)[0]
    tests = re.findall(r"```python\n(.*?)```", doc.split("## Testing a plugin", 1)[1], flags=re.S)[0]
    assert xaibench_imports(plugin) and forbidden_imports(plugin, SOURCE_MAY_IMPORT) == []
    assert forbidden_imports(tests, TESTS_MAY_IMPORT) == []
