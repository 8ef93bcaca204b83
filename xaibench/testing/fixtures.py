"""pytest fixtures shipped with xaibench (auto-loaded through the ``pytest11`` entry point).

Any project that has xaibench installed gets these fixtures without importing anything:

- ``xaibench_registry``: a fresh :class:`~xaibench.plugins.manager.Registry` (built-in
  plugins only, no entry points, so installed third-party plugins cannot interfere),
  installed as the process-wide registry for the test: ``get_registry()`` returns it.
  The previous registry is restored afterwards.
- ``register_plugin``: ``register_plugin(plugin, name=None) -> PluginStatus`` adds a
  plugin (a module or any object with ``@hookimpl`` functions) to that registry and
  fails the test if it did not load cleanly; every plugin it added is removed at teardown.
- ``tiny_track``: a :class:`~xaibench.testing.tiny.TinyTrack` (a random-weights CNN and
  four synthetic images with masks) to run an explainer end to end in milliseconds:
  ``tiny_track.run(explainer)`` checks the explainer contract and returns the maps.
- ``builtin_registry``: a registry of the built-in components only, shared by a test module,
  to build built-in models and datasets (not installed as the process-wide registry).
- ``installed_registry``: a registry as ``xaibench run`` builds it (the built-ins and every
  installed distribution's entry points), shared by a test module: is a distribution discovered?
- ``default_explainers``: the explainers ``xaibench run --explainer default`` runs.
- ``suite_metrics``: ``suite_metrics(suite) -> {track: [metric, ...]}``, the metrics a run of
  the suite scores when no ``--metric`` is given.
- ``xaibench_cli``: ``xaibench_cli(*args, env=None) -> click.testing.Result`` runs the
  command line in the test's process.

A plugin's tests import :mod:`xaibench.kit` and :mod:`xaibench.testing` only: everything else
they need comes through these fixtures.

Importing this module is cheap (no torch): pytest loads it in every session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from click.testing import Result

    from xaibench.plugins.manager import PluginStatus, Registry
    from xaibench.testing.tiny import TinyTrack


@pytest.fixture
def xaibench_registry() -> Iterator[Registry]:
    """A fresh registry (built-ins only) that ``get_registry()`` returns during the test."""
    from xaibench.plugins import manager

    previous = manager._REGISTRY
    registry = manager.Registry(load_entry_points=False)
    manager._REGISTRY = registry
    try:
        yield registry
    finally:
        manager._REGISTRY = previous


@pytest.fixture
def register_plugin(xaibench_registry: Registry) -> Iterator[Callable[..., PluginStatus]]:
    """``register_plugin(plugin, name=None, *, check=True)``: add a plugin to the test's
    registry. With ``check`` (default) a plugin that fails to load fails the test with
    its error; pass ``check=False`` to inspect a broken plugin's status yourself."""
    added: list[str] = []

    def register(plugin: Any, name: str | None = None, *, check: bool = True) -> PluginStatus:
        plugin_name = name or getattr(plugin, "__name__", None) or type(plugin).__name__
        if plugin_name in xaibench_registry.plugins:
            raise ValueError(f"a plugin named {plugin_name!r} is already registered; pass another name=")
        status = xaibench_registry.add_plugin(plugin, name=plugin_name)
        added.append(plugin_name)
        if check and not status.ok:
            pytest.fail(f"plugin {plugin_name!r} did not load: {status.error}")
        return status

    try:
        yield register
    finally:
        for plugin_name in reversed(added):
            xaibench_registry.remove_plugin(plugin_name)


@pytest.fixture
def tiny_track() -> TinyTrack:
    """Four 40 px synthetic images (a coloured square each, with its mask) preprocessed
    for a 32 px random-weights CNN, with the model's predicted classes as targets."""
    from xaibench.testing.tiny import tiny_track as build

    return build()


@pytest.fixture(scope="module")
def builtin_registry() -> Registry:
    """A registry of xaibench's built-in components only (no entry points), shared by the test
    module: build built-in models and datasets with it
    (``builtin_registry.create("model", "shapes-cnn", variant="shapes")``). It is not installed
    as the process-wide registry (``xaibench_registry`` is)."""
    from xaibench.plugins.manager import Registry

    return Registry(load_entry_points=False)


@pytest.fixture(scope="module")
def installed_registry() -> Registry:
    """A registry as ``xaibench run`` builds it, shared by the test module: the built-ins plus
    the ``xaibench`` entry points of every installed distribution (``XAIBENCH_LOAD_PLUGINS`` and
    ``XAIBENCH_DISABLE_PLUGINS`` apply). Check that a distribution is discovered with
    ``installed_registry.plugins[NAME]`` (its load status) and ``installed_registry.info(kind, name)``."""
    from xaibench.plugins.manager import Registry

    return Registry()


@pytest.fixture
def default_explainers(installed_registry: Registry) -> list[str]:
    """The explainers ``xaibench run --explainer default`` runs, in order, with the installed
    plugins (an explainer of the default set that is not installed is left out)."""
    from xaibench.runner import resolve_explainers

    return resolve_explainers(installed_registry, ["default"])


@pytest.fixture
def suite_metrics(installed_registry: Registry) -> Callable[[str], dict[str, list[str]]]:
    """``suite_metrics(suite) -> {track: [metric, ...]}``: per track of the suite, the metrics
    ``xaibench run --suite SUITE`` scores when no ``--metric`` is given (a metric with
    ``default = False`` is among them only where the suite names it)."""
    from xaibench.suites.metric_selection import resolve_metrics

    def metrics(suite: str) -> dict[str, list[str]]:
        tracks = installed_registry.create("suite", suite).tracks()
        return {t.name: [m.name for m in resolve_metrics(installed_registry, t, None)] for t in tracks}

    return metrics


@pytest.fixture
def xaibench_cli() -> Callable[..., Result]:
    """``xaibench_cli(*args, env=None) -> click.testing.Result``: run the command line in the
    test's process (``xaibench_cli("list", "explainers", "--json")``), with ``env`` added to the
    environment for the call. An exception that escapes the command fails the test with its
    traceback; check ``result.exit_code`` and ``result.output`` for the rest."""
    from click.testing import CliRunner

    from xaibench.cli import cli

    def invoke(*args: str, env: Mapping[str, str] | None = None) -> Result:
        return CliRunner(env=dict(env or {})).invoke(cli, list(args), catch_exceptions=False)

    return invoke
