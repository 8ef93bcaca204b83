"""The first-party explainer distributions (plugins/xaibench-gradcam, -captum, -rise, -zennit,
-vit) together:
each is discovered through its entry point with no name clash, each ships its own tests (in
``plugins/<dist>/tests``, collected from the repository root), and a broken third-party
distribution changes nothing but its own status. What each plugin computes is tested in its own
folder."""

from __future__ import annotations

import ast
import textwrap
import tomllib
from pathlib import Path

import pytest

from xaibench.kit import AttributionExplainer
from xaibench.plugins.manager import Registry

REPO = Path(__file__).resolve().parents[1]
DISTRIBUTIONS: dict[str, str] = {
    "gradcam": "xaibench-gradcam",
    "captum": "xaibench-captum",
    "rise": "xaibench-rise",
    "zennit": "xaibench-zennit",
    "vit": "xaibench-vit",
}


@pytest.fixture(scope="module")
def registry() -> Registry:
    reg = Registry()
    for plugin, dist in DISTRIBUTIONS.items():
        status = reg.plugins.get(plugin)
        if status is None:
            pytest.fail(f"{dist} is not installed: pip install --no-build-isolation -e plugins/{dist}")
        assert status.ok, f"{dist}: {status.error}"
    return reg


def test_distributions_register_side_by_side(registry: Registry) -> None:
    builtin = set(Registry(load_entry_points=False).names("explainer"))
    seen: dict[str, str] = {}
    for plugin, dist in DISTRIBUTIONS.items():
        status = registry.plugins[plugin]
        assert (status.distribution, status.version) == (dist, "0.1.0")
        assert status.components, f"{dist} registered nothing"
        for component in status.components:
            kind, name = component.split(":", 1)
            if kind != "explainer":  # xaibench-vit also registers its suite
                continue
            assert name not in builtin and name not in seen, f"{name}: registered twice"
            seen[name] = dist
            assert registry.info("explainer", name).distribution == dist


@pytest.mark.parametrize("dist", sorted(DISTRIBUTIONS.values()))
def test_each_distribution_ships_its_own_tests(dist: str) -> None:
    tests = REPO / "plugins" / dist / "tests"
    modules = sorted(tests.glob("test_*.py"))
    assert modules, f"plugins/{dist} ships no tests"
    testpaths = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["testpaths"]
    assert f"plugins/{dist}/tests" in testpaths, "pytest from the repository root must collect them"
    # collected without __init__.py files: module basenames must be unique across test folders
    others = {p.name for p in REPO.glob("tests/test_*.py")} | {
        p.name for p in REPO.glob("plugins/*/tests/test_*.py") if p.parent != tests
    }
    assert not {p.name for p in modules} & others


KIT_HELPERS = ("forward_batch", "chunks", "isolated_grads", "input_gradients", "as_inputs", "as_targets", "as_maps",
               "baseline_input", "seeded", "sample_ids", "sample_seeds", "resolve_target_layers", "check_saliency",
               "check_concepts")  # fmt: skip


def _explainer_sources() -> list[Path]:
    sources = sorted(REPO.glob("plugins/*/xaibench_*/*.py")) + sorted((REPO / "xaibench" / "explainers").glob("*.py"))
    assert len(sources) > 8, sources
    return sources


@pytest.mark.parametrize("path", _explainer_sources(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_explainers_use_the_kit_instead_of_copies(path: Path) -> None:
    """The kit's helpers are defined once, in xaibench/kit.py; parameters are checked by the base
    class from ``param_specs``, never by a hand call of ``check_params``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    copies = sorted(defined & set(KIT_HELPERS))
    assert not copies, f"{path.name} defines its own {copies}; import them from xaibench.kit"
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert "check_params" not in called, f"{path.name} checks parameters by hand; declare param_specs"


def test_first_party_explainers_open_explain_through_the_kit(registry: Registry) -> None:
    """The explain opening (inputs, targets, per-image seeds, frozen parameters, the maps' check)
    is written once, in ``xaibench.kit.AttributionExplainer``: every first-party explainer
    derives from it and none defines ``explain`` again."""
    for plugin, dist in DISTRIBUTIONS.items():
        names = [c.split(":", 1)[1] for c in registry.plugins[plugin].components if c.startswith("explainer:")]
        assert names, dist
        registry.materialise(dist)  # the plugin's own classes (the runner holds stand-ins)
        for name in names:
            cls = registry.entry("explainer", name).cls
            assert issubclass(cls, AttributionExplainer), f"{dist}: {name} does not derive from AttributionExplainer"
            below_the_kit = cls.__mro__[: cls.__mro__.index(AttributionExplainer)]
            own = [k.__qualname__ for k in below_the_kit if "explain" in vars(k)]
            assert not own, f"{dist}: {name} defines explain again in {own}; implement attribute(model, batch)"


def test_a_broken_distribution_changes_nothing_else(tmp_path: Path, monkeypatch) -> None:
    clean = Registry()
    site = tmp_path / "site"
    dist_info = site / "xaibench_broken-0.3.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: xaibench-broken\nVersion: 0.3.0\n")
    (dist_info / "entry_points.txt").write_text("[xaibench]\nbroken = xaibench_broken_probe\n")
    (site / "xaibench_broken_probe.py").write_text(
        textwrap.dedent(
            """
            import a_dependency_that_is_not_installed  # noqa: F401
            """
        )
    )
    monkeypatch.syspath_prepend(str(site))
    with_broken = Registry()

    status = with_broken.plugins["broken"]
    assert not status.ok
    assert (status.distribution, status.version) == ("xaibench-broken", "0.3.0")
    assert "ModuleNotFoundError" in status.error and "a_dependency_that_is_not_installed" in status.error
    assert status.components == []
    assert with_broken.names("explainer") == clean.names("explainer")
    for kind in ("dataset", "model", "metric", "suite"):
        assert with_broken.names(kind) == clean.names(kind)
    others = {n: (s.ok, s.distribution, s.version, s.components) for n, s in with_broken.plugins.items()}
    del others["broken"]
    assert others == {n: (s.ok, s.distribution, s.version, s.components) for n, s in clean.plugins.items()}
