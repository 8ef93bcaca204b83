"""The package is layered: no module imports from a layer above its own, and there are no import
circles, counting imports inside functions (lazy imports) too.

Layers, bottom to top (``docs/architecture.md`` shows the same table):

0. ground floor: errors, version, files, integrity, sandbox, imaging, imagenet, seeds, params, stats,
   randomisation, allocator, lazyjson, device_random, metric_cost, torch_numerics,
   blas_threads
1. the public types: ``api``, and the metric families' policy table: ``families``
2. the plugin system and the author kit: ``plugins``, ``kit``, and ``tokens`` (text samples as a model sees them)
3. components: ``datasets``, ``models``, ``explainers``, ``metrics``, ``pasta`` (not its training),
   ``suites``
4. the run lifecycle: ``runner``
5. publishing and tools built on runs: ``publish``, ``pasta.training``, ``results`` (DataFrames), ``run_results``,
   ``applications`` (``xaibench tune`` and ``select``), ``metaeval`` (meta-evaluation, ``xaibench meta``)
6. the static site: ``site``
7. the entry points: ``testing``, ``scaffold``, ``cli``, ``python_api``, ``record`` and the package facade ``xaibench``

Within a layer a module may import a sibling, as long as no circle forms. Both rules are checked
on two graphs: modules, and the top-level modules and sub-packages (where a circle between two
packages shows even when no two modules import each other).
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "xaibench"

LAYERS: dict[str, int] = {
    "xaibench.errors": 0,
    "xaibench.version": 0,
    "xaibench.files": 0,
    "xaibench.integrity": 0,
    "xaibench.sandbox": 0,
    "xaibench.imaging": 0,
    "xaibench.imagenet": 0,
    "xaibench.seeds": 0,
    "xaibench.params": 0,
    "xaibench.stats": 0,
    "xaibench.randomisation": 0,
    "xaibench.allocator": 0,
    "xaibench.lazyjson": 0,
    "xaibench.device_random": 0,
    "xaibench.safe_names": 0,
    "xaibench.metric_cost": 0,
    "xaibench.torch_numerics": 0,
    "xaibench.blas_threads": 0,
    "xaibench.api": 1,
    "xaibench.families": 1,
    "xaibench.plugins": 2,
    "xaibench.kit": 2,
    "xaibench.tokens": 2,
    "xaibench.datasets": 3,
    "xaibench.models": 3,
    "xaibench.explainers": 3,
    "xaibench.metrics": 3,
    "xaibench.pasta": 3,
    "xaibench.suites": 3,
    "xaibench.runner": 4,
    "xaibench.publish": 5,
    "xaibench.pasta.training": 5,
    "xaibench.results": 5,
    "xaibench.run_results": 5,
    "xaibench.applications": 5,
    "xaibench.metaeval": 5,
    "xaibench.site": 6,
    "xaibench.testing": 7,
    "xaibench.scaffold": 7,
    "xaibench.cli": 7,
    "xaibench.python_api": 7,
    "xaibench.record": 7,
    "xaibench": 7,
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int:
    """The layer of the longest prefix of ``module`` in :data:`LAYERS`."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in LAYERS:
            return LAYERS[prefix]
    raise KeyError(module)


def imports(path: Path, module: str) -> set[str]:
    """Every xaibench module that ``path`` imports, at any depth of its syntax tree."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "xaibench"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target.split(".")[0] != "xaibench":
                continue
            for alias in node.names:  # `from pkg import module` imports the module
                candidate = f"{target}.{alias.name}"
                found.add(candidate if candidate in MODULES else target)
    return found - {module}


MODULES: dict[str, Path] = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
GRAPH: dict[str, set[str]] = {m: imports(p, m) for m, p in MODULES.items()}


def node_of(module: str) -> str:
    """The top-level module or sub-package (``xaibench.metrics``) holding ``module``."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_every_module_has_a_layer() -> None:
    missing = [m for m in MODULES if not any(m == p or m.startswith(p + ".") for p in LAYERS)]
    assert not missing, f"add these modules to LAYERS (and docs/architecture.md): {missing}"


def test_the_walk_sees_lazy_imports() -> None:
    """The checker itself: an import inside a function counts."""
    source = "def f():\n    from xaibench.runner.run import run\n"
    tree = ast.parse(source)
    assert any(isinstance(n, ast.ImportFrom) and n.module == "xaibench.runner.run" for n in ast.walk(tree))
    assert "xaibench.files" in GRAPH["xaibench.integrity"], "a known module-level import was not seen"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_import_runs_up_the_layers(module: str) -> None:
    own = layer_of(module)
    upward = sorted(
        f"{target} (layer {layer_of(target)})"
        for target in GRAPH[module]
        if target in MODULES and layer_of(target) > own and node_of(target) != "xaibench"
    )
    # The facade `xaibench/__init__.py` is imported implicitly by Python for every submodule;
    # only explicit imports of it count, and those are caught here too.
    explicit_facade = module != "xaibench" and "xaibench" in GRAPH[module]
    assert not upward, f"{module} (layer {own}) imports from above: {upward}"
    assert not explicit_facade, f"{module} imports the package facade `xaibench`; import the defining module"


def test_no_import_circles_between_modules() -> None:
    assert cycles(GRAPH) == []


def test_no_import_circles_between_packages() -> None:
    nodes: dict[str, set[str]] = defaultdict(set)
    for module, targets in GRAPH.items():
        for target in targets:
            if node_of(target) != node_of(module):
                nodes[node_of(module)].add(node_of(target))
    assert cycles(dict(nodes)) == []


def test_the_cycle_finder_finds_a_circle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_docs_architecture_lists_the_same_layers() -> None:
    """The floor table of docs/architecture.md names every layer prefix, on its floor."""
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    documented: dict[str, int] = {}
    for line in doc.splitlines():
        row = re.match(r"\| (\d) [^|]*\| ([^|]*) \|", line)
        if not row:
            continue
        for name in re.findall(r"`([^`]+)`", row.group(2)):
            path = name.removesuffix("/__init__.py").removesuffix(".py").removesuffix("/")
            module = "xaibench" if path == "xaibench" else "xaibench." + path.replace("/", ".")
            documented[module] = int(row.group(1))
    assert documented == LAYERS


RUNNER = "xaibench.runner"


def runner_public_names() -> set[str]:
    """The names of ``xaibench/runner/__init__.py``'s ``__all__`` (a literal list)."""
    tree = ast.parse(MODULES[RUNNER].read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return {ast.literal_eval(e) for e in node.value.elts}  # type: ignore[attr-defined]
    raise AssertionError("xaibench/runner/__init__.py has no literal __all__")


def runner_internals_imported(path: Path, public: set[str]) -> list[str]:
    """The imports in ``path`` that reach past the runner's public face: a runner module by name, or
    a name of ``xaibench.runner`` outside its ``__all__``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [f"line {node.lineno}: import {a.name}" for a in node.names if a.name.startswith(RUNNER + ".")]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module.startswith(RUNNER + "."):
                found.append(f"line {node.lineno}: from {node.module} import ...")
            elif node.module == RUNNER:
                found += [f"line {node.lineno}: {a.name}" for a in node.names if a.name not in public]
    return found


def test_outside_the_runner_only_its_public_names_are_imported() -> None:
    """Package modules outside ``xaibench/runner/`` use the names of ``xaibench.runner.__all__``
    and nothing else (its life cycle, isolation and storage modules are internal); tests and
    benches may reach in."""
    public = runner_public_names()
    offenders = {
        module: bad
        for module, path in MODULES.items()
        if module != RUNNER and not module.startswith(RUNNER + ".")
        for bad in [runner_internals_imported(path, public)]
        if bad
    }
    assert offenders == {}, f"import these through xaibench.runner's public names: {offenders}"


def test_the_public_face_check_catches_an_internal_import(tmp_path: Path) -> None:
    """The checker itself: a runner module by name, or an unlisted name, is caught; public names pass."""
    source = tmp_path / "m.py"
    source.write_text(
        "from xaibench.runner import Runner, _private\n"
        "def f():\n    from xaibench.runner.storage.store import RecordStore\n"
        "import xaibench.runner.run\n",
        encoding="utf-8",
    )
    assert sorted(runner_internals_imported(source, {"Runner"})) == [
        "line 1: _private",
        "line 3: from xaibench.runner.storage.store import ...",
        "line 4: import xaibench.runner.run",
    ]


def test_the_public_names_resolve_to_their_one_definition() -> None:
    """Every public name is defined in the module :data:`xaibench.runner.PUBLIC` says, resolves
    lazily, and ``__all__`` lists exactly those names."""
    import importlib

    import xaibench.runner as runner

    assert sorted(runner.__all__) == sorted(runner.PUBLIC)
    for name, module in runner.PUBLIC.items():
        value = getattr(runner, name)
        assert value is getattr(importlib.import_module(module), runner.ALIASES.get(name, name)), name
    with pytest.raises(AttributeError, match="no public name 'workers'"):
        runner.workers  # noqa: B018
