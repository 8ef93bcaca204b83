"""Plugin discovery and the component registry.

Built-in plugins and entry-point plugins (group ``xaibench``) are loaded the
same way, each in isolation: a plugin that fails to import, or whose hook
raises, is recorded with its error and skipped; every other plugin still loads
(the llm issue 1280 lesson). Any exception counts, ``SystemExit`` and a ``KeyboardInterrupt``
raised by the plugin's own code included (a real Ctrl-C during loading still interrupts). Each
failure is also passed, as one line (``plugin DIST (entry point NAME): import raised ...; skipped``),
to :data:`on_plugin_error` when that is set: the command line sets it to print a warning, once.
``XAIBENCH_LOAD_PLUGINS`` (allow list) takes comma-separated distribution names (as ``pip``
spells them; case, ``-``, ``_`` and ``.`` alike): only those distributions' entry points load,
whatever their entry points are named, so another distribution's entry point of the same name
never slips in. ``XAIBENCH_DISABLE_PLUGINS`` (block list) takes distribution names too; an
entry-point name there blocks that entry point of every distribution.

A component name is held by the first plugin that registers it (the built-ins load first): a
plugin registering a name already held is refused that component, in one line naming both
distributions (``on_plugin_error``), and keeps the rest; every run goes on with the first.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import os
import re
import signal
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from types import ModuleType
from typing import Any, TypeVar

import pluggy

from xaibench.api import (
    MODALITIES,
    Component,
    ComponentInfo,
    Dataset,
    Encoder,
    Explainer,
    Metric,
    Model,
    Suite,
    value_range_problem,
)
from xaibench.errors import RegistrationError, UnknownComponentError, XaibenchError
from xaibench.families import BY_NAME
from xaibench.metric_cost import cost_problem
from xaibench.plugins import catalogue, hookspecs
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

# A component's name: it appears in options (``--explainer NAME``), selectors (``family:NAME``),
# file names and tables, so it is a short plain word.
NAME_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")

# Called with one line for each plugin that failed to load or register (see the module doc).
on_plugin_error: Callable[[str], None] | None = None

# How this process reaches a model or an encoder of a distribution it holds as a stand-in, by kind:
# called with the stand-in instance (its class data and validated parameters), it returns a proxy
# whose calls run in a worker that imports the distribution. The runner installs them
# (xaibench.runner.isolation.component_worker); without one, the stand-in itself is returned and its
# behaviour raises ``StandInError``.
remote_builders: dict[str, Callable[[Any], Any]] = {}


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


def normalise_distribution(name: str) -> str:
    """A distribution name as PEP 503 compares them: ``XB_Grad.cam`` and ``xb-grad-cam`` are one."""
    return re.sub(r"[-_.]+", "-", name).lower()


def select_entry_points(
    found: dict[str, list[catalogue.EntryPoint]], allow: set[str] | None, block: set[str]
) -> tuple[dict[str, list[catalogue.EntryPoint]], list[str]]:
    """The entry points of ``found`` (by distribution) that the allow and block lists let through,
    and one line for each allow-list item that names no distribution of ``found``.

    ``allow`` (``None``: every distribution) and ``block`` name distributions, compared as
    :func:`normalise_distribution` spells them; an entry-point name in ``block`` also blocks that
    entry point, in any distribution. An entry-point name in ``allow`` allows nothing."""
    allowed = None if allow is None else {normalise_distribution(a): a for a in allow}
    blocked = {normalise_distribution(b) for b in block}
    out: dict[str, list[catalogue.EntryPoint]] = {}
    for dist, points in found.items():
        key = normalise_distribution(dist)
        if (allowed is not None and key not in allowed) or key in blocked:
            continue
        kept = [p for p in points if p.name not in block]
        if kept:
            out[dist] = kept
    lines = []
    known = {normalise_distribution(d) for d in found}
    for key, given in sorted((allowed or {}).items()):
        if key in known:
            continue
        owners = sorted({p.distribution for points in found.values() for p in points if p.name == given})
        hint = f" ({_clean(given, 80)!r} is an entry point of {', '.join(owners)})" if owners else ""
        lines.append(
            f"XAIBENCH_LOAD_PLUGINS names distributions, and no installed distribution with xaibench plugins "
            f"is named {_clean(given, 80)!r}{hint}; nothing loaded for it"
        )
    return out, lines


class Registry:
    """A typed facade over the plugin manager: components by kind and name."""

    def __init__(self, load_entry_points: bool = True, *, builtins: bool = True) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.plugins: dict[str, PluginStatus] = {}
        self._entries: dict[str, dict[str, Entry]] = {kind: {} for kind in KIND_BASES}
        self._entry_points: set[str] = set()  # plugins loaded from an entry point, by name
        # distributions held as stand-ins (their entry points), until materialised
        self._stand_ins: dict[str, list[catalogue.EntryPoint]] = {}
        if builtins:
            for module_name in DEFAULT_PLUGINS:
                self._load_module(module_name, module_name, ("xaibench", __version__), "built-in")
        if load_entry_points:
            self._load_entry_points()

    # ------------------------------------------------------------------ loading

    def _load_module(self, name: str, module_name: str, dist: tuple[str, str], source: str) -> None:
        status = PluginStatus(name=name, distribution=dist[0], version=dist[1], source=source)
        self.plugins[name] = status
        try:
            with _user_interrupts() as interrupted:
                module = importlib.import_module(module_name)
        except BaseException as exc:  # SystemExit, and the plugin's own KeyboardInterrupt too
            if isinstance(exc, KeyboardInterrupt) and interrupted():
                raise
            self._failed(status, "import", exc)
            return
        self.add_plugin(module, name=name, distribution=dist, source=source)

    def _load_entry_points(self) -> None:
        """The entry points of the group, known from their distributions' descriptions
        (:mod:`xaibench.plugins.catalogue`): every component becomes a stand-in and no plugin code
        runs in this process (a dataset's samples are loaded in a worker,
        :mod:`xaibench.runner.isolation.dataset_worker`; a model or an encoder is reached through a proxy,
        :data:`remote_builders`)."""
        allow = _env_list("XAIBENCH_LOAD_PLUGINS")
        block = _env_list("XAIBENCH_DISABLE_PLUGINS") or set()
        # the lists name distributions: filtered here, by each entry point's distribution
        selected, unknown = select_entry_points(catalogue.entry_points(None, set()), allow, block)
        for line in unknown:
            if on_plugin_error is not None:
                on_plugin_error(line)
        by_dist = {dist: [p for p in points if p.name not in self.plugins] for dist, points in selected.items()}
        by_dist = {dist: points for dist, points in by_dist.items() if points}
        for dist, description in catalogue.describe(by_dist).items():
            points = by_dist[dist]
            if description.get("failure"):
                for point, line in zip(points, catalogue.failure_lines(description, points), strict=True):
                    status = PluginStatus(point.name, point.distribution, point.version, point.value, ok=False)
                    status.error = _clean(str(description["failure"]))
                    self.plugins[point.name] = status
                    self._entry_points.add(point.name)
                    if on_plugin_error is not None:
                        on_plugin_error(_clean(line))
                continue
            components = [c for c in description.get("components", []) if isinstance(c, dict)]
            self._add_stand_ins(dist, points, description, components)

    def _add_stand_ins(
        self,
        dist: str,
        points: list[catalogue.EntryPoint],
        description: dict[str, Any],
        components: list[dict[str, Any]],
    ) -> None:
        """Register the stand-ins of distribution ``dist`` from its description."""
        version = points[0].version
        by_name = {p.name: p for p in points}
        self._stand_ins[dist] = points
        for plugin in description.get("plugins", []):
            point = by_name.get(str(plugin.get("name")))
            if point is None:
                continue
            status = PluginStatus(point.name, dist, version, point.value, ok=bool(plugin.get("ok")))
            status.error = None if status.ok else _clean(str(plugin.get("error")))
            self.plugins[point.name] = status
            self._entry_points.add(point.name)
            for line in plugin.get("lines", []):
                if on_plugin_error is not None:
                    on_plugin_error(_clean(str(line)))
        for item in components:
            status = self.plugins.get(str(item.get("plugin")))
            if status is None:
                continue
            kind = str(item["kind"])
            try:
                if "error" in item:
                    raise RegistrationError(f"{item.get('name')}: {item['error']}")
                cls = catalogue.stand_in(kind, item["data"], dist, status.name)
                self._registrar(kind, status, (dist, version))(cls)
            except Exception as exc:  # noqa: BLE001 - a description the plugin shaped
                self._failed(status, f"register_{kind}s", exc)

    def load_entry_point(self, ep: metadata.EntryPoint) -> PluginStatus:
        """Import entry point ``ep`` in this process and register its hooks, in isolation (a probe,
        a worker materialising its distribution, or a distribution that runs in the runner)."""
        dist = (ep.dist.name, ep.dist.version) if ep.dist else ("unknown", "unknown")
        status = PluginStatus(name=ep.name, distribution=dist[0], version=dist[1], source=ep.value)
        self.plugins[ep.name] = status
        self._entry_points.add(ep.name)
        try:
            with _user_interrupts() as interrupted:
                obj = ep.load()
        except BaseException as exc:  # SystemExit, and the plugin's own KeyboardInterrupt too
            if isinstance(exc, KeyboardInterrupt) and interrupted():
                raise
            self._failed(status, "import", exc)
            return status
        return self.add_plugin(obj, name=ep.name, distribution=dist, source=ep.value)

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
            with _user_interrupts() as interrupted:
                self.pm.register(plugin, name=name)
                self.pm.check_pending()
        except BaseException as exc:  # isolate plugin and user code failures
            if isinstance(exc, KeyboardInterrupt) and interrupted():
                raise
            with contextlib.suppress(Exception):
                if self.pm.is_registered(plugin):
                    self.pm.unregister(plugin)
            self._failed(status, "registering it", exc)
            return status
        for hook_name, kind in hookspecs.HOOK_KINDS.items():
            caller = getattr(self.pm.hook, hook_name)
            for impl in caller.get_hookimpls():
                if impl.plugin_name != name:
                    continue
                try:
                    with _user_interrupts() as interrupted:
                        impl.function(register=self._registrar(kind, status, dist))
                except BaseException as exc:  # SystemExit in a hook must not end the command
                    if isinstance(exc, KeyboardInterrupt) and interrupted():
                        raise
                    self._failed(status, hook_name, exc)
        return status

    def _failed(self, status: PluginStatus, stage: str, exc: BaseException) -> None:
        """Record on ``status`` that ``stage`` (``import``, a hook's name) raised ``exc``, and pass
        one line naming the plugin to :data:`on_plugin_error`."""
        text = _one_line(exc)
        status.ok = False
        status.error = text if stage in ("import", "registering it") else f"{stage}: {text}"
        where = self._where(status)
        # what skipping means: a failed import or registration loses the whole plugin; a failed
        # hook, what that hook had not registered yet
        outcome = "skipped" if stage in ("import", "registering it") else "the rest of that hook skipped"
        what = f"{stage}: {_clean(str(exc))}" if isinstance(exc, XaibenchError) else f"{stage} raised {_raised(exc)}"
        line = f"{where}: {what}; {outcome}"
        if on_plugin_error is not None:
            on_plugin_error(line)

    def _where(self, status: PluginStatus) -> str:
        """``plugin DIST (entry point NAME)``, or ``plugin NAME`` for one not from an entry point."""
        if status.name in self._entry_points:
            return _clean(f"plugin {status.distribution} (entry point {status.name})")
        return _clean(f"plugin {status.name}")

    def remove_plugin(self, name: str) -> None:
        """Unregister a plugin and every component it registered (test fixtures use this)."""
        plugin = self.pm.get_plugin(name)
        if plugin is not None:
            self.pm.unregister(plugin)
        for entries in self._entries.values():
            for key in [k for k, e in entries.items() if e.info.plugin == name]:
                del entries[key]
        self.plugins.pop(name, None)

    def _registrar(self, kind: str, status: PluginStatus, dist: tuple[str, str]) -> Any:
        base = KIND_BASES[kind]

        def register(cls: type[Component]) -> None:
            if not (isinstance(cls, type) and issubclass(cls, base)):
                raise RegistrationError(f"{status.name}: {cls!r} is not a subclass of xaibench.api.{base.__name__}")
            if not cls.name:
                raise RegistrationError(f"{status.name}: {cls.__name__} has no name")
            if not isinstance(cls.name, str) or not NAME_PATTERN.fullmatch(cls.name):
                raise RegistrationError(
                    f"{status.name}: {kind} {cls.__name__} has the name {_shown(cls.name)}; a name is a string "
                    "of up to 64 letters, digits, '_', '.' and '-' that starts with a letter"
                )
            if not isinstance(cls.version, str):
                raise RegistrationError(f"{status.name}: {kind} {cls.name!r} has the version {_shown(cls.version)}")
            if kind == "metric":
                _check_metric(cls, status.name)  # type: ignore[arg-type]
            _check_modalities(cls, kind, status.name)
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
                modalities=tuple(cls.modalities),
            )
            existing = self._entries[kind].get(cls.name)
            if existing is not None and existing.cls is not cls:  # the first holder keeps it; one line
                held = existing.info
                line = _clean(
                    f"{self._where(status)}: {kind} {cls.name!r} of {dist[0]} {dist[1]} refused: the name is "
                    f"already {held.distribution} {held.distribution_version}'s (plugin {held.plugin}), "
                    "which keeps it",
                    500,
                )
                if on_plugin_error is not None:
                    on_plugin_error(line)
                return
            self._entries[kind][cls.name] = Entry(cls, info)
            status.components.append(f"{kind}:{cls.name}")

        return register

    # ------------------------------------------------------------------ lookup

    def names(self, kind: str) -> list[str]:
        return sorted(self._entries[kind])

    def entries(self, kind: str) -> list[Entry]:
        return [self._entries[kind][n] for n in self.names(kind)]

    def entry(self, kind: str, name: str) -> Entry:
        try:
            return self._entries[kind][name]
        except KeyError:
            close = difflib.get_close_matches(name, self._entries[kind], n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise UnknownComponentError(f"unknown {kind} {name!r}{hint} (see `xaibench list {kind}s`)") from None

    def create(self, kind: str, name: str, *, materialise: bool = False, **params: Any) -> Any:
        """Instantiate a component with parameters (validated by the component). With
        ``materialise`` (workers only), a stand-in's distribution is imported first
        (:meth:`materialise`), so the instance is the plugin's own class. Without it, a stand-in
        model or encoder is returned as the proxy its :data:`remote_builders` entry builds."""
        cls = self.entry(kind, name).cls
        remote = remote_distribution(cls)
        if materialise and remote is not None:
            self.materialise(remote)
            cls = self.entry(kind, name).cls
            remote = remote_distribution(cls)
        try:
            instance = cls(**params)
        except (TypeError, ValueError) as exc:
            prefix = f"{kind} {name!r}: "
            text = _clean(_text(exc, str), 1000)  # the plugin's own words: one line, no control character
            raise XaibenchError(text if text.startswith(prefix) else prefix + text) from exc
        builder = remote_builders.get(kind)
        if remote is not None and builder is not None and not materialise:
            return builder(instance)  # a proxy: the plugin's code runs in a worker
        return instance

    def info(self, kind: str, name: str) -> ComponentInfo:
        return self.entry(kind, name).info

    def materialise(self, distribution: str) -> None:
        """Import ``distribution``'s plugins for real in this process, replacing the stand-ins
        its catalogue description registered (see :func:`remote_distribution`). Only worker
        processes call it, after entering their sandbox; the runner never does. A distribution
        that is not held as stand-ins (built-ins, plugins registered at run time, one already
        materialised) is left as it is."""
        points = self._stand_ins.pop(distribution, None)
        if points is None:
            return
        for point in points:
            self.remove_plugin(point.name)
        for point in points:
            self.load_entry_point(_metadata_entry_point(point))


def remote_distribution(component: type[Component] | Component) -> str | None:
    """The distribution a component class (or instance) is a stand-in for, or ``None`` for a real
    class. A stand-in carries the class attributes its plugin declared (name, family, direction,
    parameters ...) as data, and no code of the plugin: its behaviour (``explain``, ``score``,
    ``samples`` ...) runs only in a worker that called :meth:`Registry.materialise`."""
    cls = component if isinstance(component, type) else type(component)
    value = getattr(cls, "remote_distribution", None)
    return value if isinstance(value, str) else None


def _check_modalities(cls: type[Component], kind: str, plugin: str) -> None:
    """A component's ``modalities``: a non-empty tuple of :data:`~xaibench.api.MODALITIES`, one
    only for a dataset or a model (the modality its samples have, or it takes)."""
    given = getattr(cls, "modalities", None)
    single = kind in ("dataset", "model")
    if (
        not isinstance(given, tuple)
        or not given
        or any(m not in MODALITIES for m in given)
        or len(set(given)) != len(given)
        or (single and len(given) != 1)
    ):
        what = "one of" if single else "a tuple of distinct values from"
        raise RegistrationError(
            f"{plugin}: {kind} {cls.name!r} has modalities {_shown(given)}; use {what} {MODALITIES}"
            + (" (as a one-element tuple)" if single else "")
        )


def _check_metric(cls: type[Metric], plugin: str) -> None:
    if cls.family not in BY_NAME:
        raise RegistrationError(f"{plugin}: metric {cls.name!r} has family {cls.family!r}; use one of {tuple(BY_NAME)}")
    if cls.direction not in ("higher", "lower"):
        raise RegistrationError(f"{plugin}: metric {cls.name!r} must declare direction 'higher' or 'lower'")
    problem = value_range_problem(getattr(cls, "value_range", None))
    params = getattr(cls, "default_params", None)
    problem = problem or cost_problem(getattr(cls, "cost", None), list(params) if isinstance(params, Mapping) else [])
    if problem is not None:
        raise RegistrationError(f"{plugin}: metric {cls.name!r}: {problem}")


def _metadata_entry_point(point: catalogue.EntryPoint) -> metadata.EntryPoint:
    """The importable entry point of ``point`` (the installed one, so its distribution is known)."""
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP, name=point.name):
        if ep.dist is None or ep.dist.name == point.distribution:
            return ep
    return metadata.EntryPoint(point.name, point.value, ENTRY_POINT_GROUP)


def describe_failure(exc: BaseException) -> str:
    """``Type: message (file:line)`` of ``exc``, one line (a probe reports plugin failures so)."""
    return _one_line(exc)


def _one_line(exc: BaseException) -> str:
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" ({last[0].filename}:{last[0].lineno})" if last else ""
    return _clean(f"{type(exc).__name__}: {_text(exc, str)}{where}")


def _raised(exc: BaseException) -> str:
    """``SystemExit(7)``, ``ModuleNotFoundError("No module named 'x'")``: the exception, short."""
    return _clean(_text(exc, repr))


def _text(exc: BaseException, how: Callable[[BaseException], str]) -> str:
    try:  # a hostile exception's __str__ may itself raise
        return how(exc)
    except BaseException:  # noqa: BLE001
        return f"{type(exc).__name__}(<unprintable>)"


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def one_line(text: str, limit: int = 300) -> str:
    """``text`` (a plugin's, say) as one line of at most ``limit`` characters, control characters
    escaped (``\\x1b``): newlines, carriage returns and tabs become spaces."""
    return _clean(text, limit)


def _clean(text: str, limit: int = 300) -> str:
    """One line of at most ``limit`` characters, control characters escaped (plugin text reaches
    the terminal)."""
    text = _CONTROL.sub(lambda m: " " if m.group() in "\n\r\t" else f"\\x{ord(m.group()):02x}", text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _shown(value: Any) -> str:
    """``value`` as ``repr`` shows it, short, whatever its ``__repr__`` does."""
    try:
        return _clean(repr(value), 80)
    except BaseException:  # noqa: BLE001
        return f"<{type(value).__name__}>"


@contextlib.contextmanager
def _user_interrupts() -> Iterator[Callable[[], bool]]:
    """Tell a real Ctrl-C (a ``SIGINT``) from a ``KeyboardInterrupt`` that plugin code raised
    itself: yields a function that says whether a ``SIGINT`` arrived in the block. Outside the main
    thread no handler can be set, and every ``KeyboardInterrupt`` counts as real."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: True
        return
    seen: list[int] = []
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum: int, frame: Any) -> None:
        seen.append(signum)
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGINT, handler)
    except (ValueError, OSError):
        yield lambda: True
        return
    try:
        yield lambda: bool(seen)
    finally:
        with contextlib.suppress(ValueError, OSError):
            signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)


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
