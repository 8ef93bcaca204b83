"""Plugin discovery through real entry points: isolation, allow/block lists, collisions, names."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from xaibench import hookimpl
from xaibench.api import Explainer
from xaibench.cli import cli
from xaibench.plugins import manager

GOOD = """
from xaibench import hookimpl
from xaibench.api import Explainer

class Flat(Explainer):
    name = "flat-good"
    version = "2.0.0"
    licence = "MIT"

    def explain(self, model, inputs, targets, *, seed=0, context=None):
        return inputs.abs().sum(1).numpy()

@hookimpl
def register_explainers(register):
    register(Flat)
"""

CLASHING = """
from xaibench import hookimpl
from xaibench.api import Explainer

class Gradient(Explainer):
    name = "gradient"

@hookimpl
def register_explainers(register):
    register(Gradient)
"""


def _install_fake_distribution(site: Path, name: str, version: str, entry_points: dict[str, str]) -> None:
    """Write a minimal installed distribution (dist-info with entry points) into ``site``."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = "\n".join(f"{k} = {v}" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[xaibench]\n{lines}\n")


@pytest.fixture()
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    (site / "xb_good_plugin.py").write_text(textwrap.dedent(GOOD))
    (site / "xb_broken_plugin.py").write_text("import this_module_does_not_exist_anywhere\n")
    (site / "xb_clashing_plugin.py").write_text(textwrap.dedent(CLASHING))
    _install_fake_distribution(site, "xb-good", "2.0.0", {"good": "xb_good_plugin"})
    _install_fake_distribution(site, "xb-broken", "0.1.0", {"broken": "xb_broken_plugin"})
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv("XAIBENCH_LOAD_PLUGINS", raising=False)
    monkeypatch.delenv("XAIBENCH_DISABLE_PLUGINS", raising=False)
    monkeypatch.setattr(manager, "_REGISTRY", None)
    return site


def test_broken_plugin_is_reported_and_changes_nothing_else(site: Path) -> None:
    registry = manager.Registry()
    broken = registry.plugins["broken"]
    assert not broken.ok and "ModuleNotFoundError" in (broken.error or "")
    assert (broken.distribution, broken.version) == ("xb-broken", "0.1.0")
    good = registry.info("explainer", "flat-good")
    assert (good.distribution, good.distribution_version, good.plugin) == ("xb-good", "2.0.0", "good")
    assert "gradient" in registry.names("explainer")  # built-ins untouched


def test_cli_lists_the_broken_plugin_and_other_commands_still_work(site: Path) -> None:
    runner = CliRunner()
    listed = runner.invoke(cli, ["list", "plugins", "--json"], catch_exceptions=False)
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert rows["broken"]["ok"] is False and "this_module_does_not_exist_anywhere" in rows["broken"]["error"]
    # and said once on stderr, one line naming the distribution and the entry point
    assert listed.stderr.count("\n") == 1
    assert listed.stderr.startswith("warning: plugin xb-broken (entry point broken): import raised ModuleNotFoundError")
    assert rows["good"]["ok"] is True
    explainers = runner.invoke(cli, ["list", "explainers", "--json"], catch_exceptions=False)
    names = {r["name"]: r for r in json.loads(explainers.stdout)}
    assert names["flat-good"]["distribution"] == "xb-good"


def test_allow_and_block_lists(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XAIBENCH_DISABLE_PLUGINS", "broken")
    registry = manager.Registry()
    assert "broken" not in registry.plugins and "flat-good" in registry.names("explainer")
    monkeypatch.delenv("XAIBENCH_DISABLE_PLUGINS")
    monkeypatch.setenv("XAIBENCH_LOAD_PLUGINS", "xb-broken")  # distributions, not entry-point names
    registry = manager.Registry()
    assert "good" not in registry.plugins and "flat-good" not in registry.names("explainer")
    assert registry.plugins["broken"].ok is False
    assert "gradient" in registry.names("explainer")  # the lists govern installed plugins, not built-ins


def test_a_name_already_held_is_refused_to_the_newcomer_in_one_line_naming_both(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install_fake_distribution(site, "xb-clash", "3.1.0", {"clash": "xb_clashing_plugin"})
    lines: list[str] = []
    monkeypatch.setattr(manager, "on_plugin_error", lines.append)
    registry = manager.Registry()
    said = [line for line in lines if "(entry point clash)" in line]
    assert len(said) == 1 and "xaibench.explainers.plugin" in said[0] and "xb-clash 3.1.0" in said[0], lines
    assert registry.info("explainer", "gradient").distribution == "xaibench"  # the built-in keeps its name


def test_unknown_names_suggest_close_matches() -> None:
    registry = manager.Registry(load_entry_points=False)
    with pytest.raises(manager.UnknownComponentError, match="did you mean 'pointing_game'"):
        registry.entry("metric", "pointing_gam")
    with pytest.raises(manager.UnknownComponentError) as err:
        registry.entry("explainer", "zzzzzz")
    assert "did you mean" not in str(err.value)


def test_registration_is_validated() -> None:
    class NotAnExplainer:
        name = "x"

    class Nameless(Explainer):
        pass

    class Plugin:
        @hookimpl
        def register_explainers(self, register):  # type: ignore[no-untyped-def]
            register(NotAnExplainer)

    class Plugin2:
        @hookimpl
        def register_explainers(self, register):  # type: ignore[no-untyped-def]
            register(Nameless)

    registry = manager.Registry(load_entry_points=False)
    status = registry.add_plugin(Plugin(), name="p1", distribution=("p1", "0"))
    assert not status.ok and "not a subclass of xaibench.api.Explainer" in (status.error or "")
    status = registry.add_plugin(Plugin2(), name="p2", distribution=("p2", "0"))
    assert not status.ok and "has no name" in (status.error or "")
    registry.remove_plugin("p1")
    assert "p1" not in registry.plugins
