"""Plugin discovery and the component registry.

Built-in plugins and entry-point plugins (group ``xaibench``) are loaded the
same way, each in isolation: a plugin that fails to import, or whose hook
raises, is recorded with its error and skipped; every other plugin still loads
(the llm issue 1280 lesson). ``XAIBENCH_LOAD_PLUGINS`` (allow list) and
``XAIBENCH_DISABLE_PLUGINS`` (block list) take comma-separated entry-point names.
"""

from __future__ import annotations

import difflib
import importlib
import os
import traceback
from dataclasses import dataclass, field
from importlib import metadata
from types import ModuleType
from typing import Any, TypeVar

import pluggy

from xaibench.api import (
    FAMILIES,
    Component,
    ComponentInfo,
    Dataset,
    Encoder,
    Explainer,
    Metric,
    Model,
    Suite,
)
from xaibench.errors import RegistrationError, UnknownComponentError, XaibenchError
from xaibench.plugins import hookspecs
from xaibench.version import __version__

ENTRY_POINT_GROUP = "xaibench"
DEFAULT_PLUGINS: tuple[str, ...] = (
    "xaibench.datasets.plugin",
    "xaibench.models.plugin",
    "xaibench.explainers.plugin",
    "xaibench.metrics.plugin",
    "xaibench.pasta.plugin",
    "xaibench.suites.plugin",
)
KIND_BASES: dict[str, type[Component]] = {
    "explainer": Explainer,
    "dataset": Dataset,
    "model": Model,
    "metric": Metric,
    "suite": Suite,
    "encoder": Encoder,
}

C = TypeVar("C", bound=Component)


@dataclass
class PluginStatus:
    """One plugin as ``xaibench list plugins`` shows it."""

    name: str
    distribution: str
    version: str
    source: str
    ok: bool = True
    error: str | None = None
    components: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Entry:
    cls: type[Component]
    info: ComponentInfo


def _dist_of(module_name: str) -> tuple[str, str]:
    top = module_name.split(".")[0]
    dists = metadata.packages_distributions().get(top, [])
    for dist in dists:
        try:
            return dist, metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return top, "unknown"


def _env_list(name: str) -> set[str] | None:
    raw = os.environ.get(name)
    if raw is None:
        return None
    return {item.strip() for item in raw.split(",") if item.strip()}


class Registry:
    """A typed facade over the plugin manager: components by kind and name."""

    def __init__(self, load_entry_points: bool = True) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.plugins: dict[str, PluginStatus] = {}
        self._entries: dict[str, dict[str, Entry]] = {kind: {} for kind in KIND_BASES}
        self._conflicts: dict[tuple[str, str], str] = {}
        for module_name in DEFAULT_PLUGINS:
            self._load_module(module_name, module_name, ("xaibench", __version__), "built-in")
        if load_entry_points:
            self._load_entry_points()

    # ------------------------------------------------------------------ loading

    def _load_module(self, name: str, module_name: str, dist: tuple[str, str], source: str) -> None:
        status = PluginStatus(name=name, distribution=dist[0], version=dist[1], source=source)
        self.plugins[name] = status
        try:
            module = importlib.import_module(module_name)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            status.ok, status.error = False, _one_line(exc)
            return
        self.add_plugin(module, name=name, distribution=dist, source=source)

    def _load_entry_points(self) -> None:
        allow = _env_list("XAIBENCH_LOAD_PLUGINS")
        block = _env_list("XAIBENCH_DISABLE_PLUGINS") or set()
        for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            if ep.name in self.plugins:
                continue
            if (allow is not None and ep.name not in allow) or ep.name in block:
                continue
            dist = (ep.dist.name, ep.dist.version) if ep.dist else ("unknown", "unknown")
            status = PluginStatus(name=ep.name, distribution=dist[0], version=dist[1], source=ep.value)
            self.plugins[ep.name] = status
            try:
                obj = ep.load()
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt):
                    raise
                status.ok, status.error = False, _one_line(exc)
                continue
            self.add_plugin(obj, name=ep.name, distribution=dist, source=ep.value)

    def add_plugin(
        self,
        plugin: ModuleType | object,
        *,
        name: str,
        distribution: tuple[str, str] | None = None,
        source: str = "runtime",
    ) -> PluginStatus:
        """Register a plugin object (a module or any object with hook implementations).

        Errors are recorded on the returned status, never raised: a broken plugin
        must not break the others.
        """
        dist = distribution or _dist_of(getattr(plugin, "__name__", type(plugin).__module__))
        status = self.plugins.get(name) or PluginStatus(name, dist[0], dist[1], source)
        self.plugins[name] = status
        try:
            self.pm.register(plugin, name=name)
            self.pm.check_pending()
        except Exception as exc:  # noqa: BLE001 - isolate plugin and user code failures
            status.ok, status.error = False, _one_line(exc)
            if self.pm.is_registered(plugin):
                self.pm.unregister(plugin)
            return status
        for hook_name, kind in hookspecs.HOOK_KINDS.items():
            caller = getattr(self.pm.hook, hook_name)
            for impl in caller.get_hookimpls():
                if impl.plugin_name != name:
                    continue
                try:
                    impl.function(register=self._registrar(kind, status, dist))
                except Exception as exc:  # noqa: BLE001 - isolate plugin and user code failures
                    status.ok = False
                    status.error = f"{hook_name}: {_one_line(exc)}"
        return status

    def remove_plugin(self, name: str) -> None:
        """Unregister a plugin and every component it registered (test fixtures use this)."""
        plugin = self.pm.get_plugin(name)
        if plugin is not None:
            self.pm.unregister(plugin)
        for entries in self._entries.values():
            for key in [k for k, e in entries.items() if e.info.plugin == name]:
                del entries[key]
        self._conflicts = {k: v for k, v in self._conflicts.items() if f"plugin {name!r}" not in v}
        self.plugins.pop(name, None)

    def _registrar(self, kind: str, status: PluginStatus, dist: tuple[str, str]) -> Any:
        base = KIND_BASES[kind]

        def register(cls: type[Component]) -> None:
            if not (isinstance(cls, type) and issubclass(cls, base)):
                raise RegistrationError(f"{status.name}: {cls!r} is not a subclass of xaibench.api.{base.__name__}")
            if not cls.name:
                raise RegistrationError(f"{status.name}: {cls.__name__} has no name")
            if kind == "metric":
                _check_metric(cls, status.name)  # type: ignore[arg-type]
            info = ComponentInfo(
                name=cls.name,
                kind=kind,
                version=cls.version,
                description=cls.description or (cls.__doc__ or "").strip().split("\n")[0],
                licence=cls.licence,
                needs=tuple(cls.needs),
                distribution=dist[0],
                distribution_version=dist[1],
                plugin=status.name,
            )
            existing = self._entries[kind].get(cls.name)
            if existing is not None and existing.cls is not cls:
                message = (
                    f"{kind} name {cls.name!r} is registered twice: by plugin {existing.info.plugin!r} "
                    f"({existing.info.distribution} {existing.info.distribution_version}) and by plugin "
                    f"{status.name!r} ({dist[0]} {dist[1]})"
                )
                self._conflicts[(kind, cls.name)] = message
                raise RegistrationError(message)
            self._entries[kind][cls.name] = Entry(cls, info)
            status.components.append(f"{kind}:{cls.name}")

        return register

    # ------------------------------------------------------------------ lookup

    def names(self, kind: str) -> list[str]:
        return sorted(self._entries[kind])

    def entries(self, kind: str) -> list[Entry]:
        return [self._entries[kind][n] for n in self.names(kind)]

    def entry(self, kind: str, name: str) -> Entry:
        conflict = self._conflicts.get((kind, name))
        if conflict:
            raise RegistrationError(conflict)
        try:
            return self._entries[kind][name]
        except KeyError:
            close = difflib.get_close_matches(name, self._entries[kind], n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise UnknownComponentError(f"unknown {kind} {name!r}{hint} (see `xaibench list {kind}s`)") from None

    def create(self, kind: str, name: str, **params: Any) -> Any:
        """Instantiate a component with parameters (validated by the component)."""
        cls = self.entry(kind, name).cls
        try:
            return cls(**params)
        except (TypeError, ValueError) as exc:
            prefix = f"{kind} {name!r}: "
            text = str(exc)
            raise XaibenchError(text if text.startswith(prefix) else prefix + text) from exc

    def info(self, kind: str, name: str) -> ComponentInfo:
        return self.entry(kind, name).info


def _check_metric(cls: type[Metric], plugin: str) -> None:
    if cls.family not in FAMILIES:
        raise RegistrationError(f"{plugin}: metric {cls.name!r} has family {cls.family!r}; use one of {FAMILIES}")
    if cls.direction not in ("higher", "lower"):
        raise RegistrationError(f"{plugin}: metric {cls.name!r} must declare direction 'higher' or 'lower'")


def _one_line(exc: BaseException) -> str:
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" ({last[0].filename}:{last[0].lineno})" if last else ""
    return f"{type(exc).__name__}: {exc}{where}".replace("\n", " ")


_REGISTRY: Registry | None = None


def get_registry() -> Registry:
    """The process-wide registry, built on first use."""
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = Registry()
    return _REGISTRY


def reset_registry() -> None:
    global _REGISTRY
    _REGISTRY = None
