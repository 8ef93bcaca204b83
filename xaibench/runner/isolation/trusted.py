"""What counts as xaibench's own, trusted code where workers are forked (the zygote of
:mod:`xaibench.runner.isolation.workers`).

The zygote builds models before it forks explainer workers, so that a fresh worker inherits them;
it runs outside any sandbox, and whatever it imports or patches reaches every worker it forks
afterwards, for every explainer and track. So it builds only :func:`builtin_model` models (the
classes xaibench registers itself) and under :func:`trusted_imports_only`: an import of a module
that is not xaibench's own, the standard library's or of a distribution xaibench requires
(:func:`trusted_distributions`) fails there as if it were not installed, and a build that left
such a module behind anyway (:func:`untrusted_modules`) ends the zygote. Every other model (a
stand-in for a plugin distribution, a plugin registered at run time) is built by the worker that
needs it, in its sandbox; and since what a model's import or constructor leaves in a worker stays
there, a worker that built one serves only tracks of that model's distribution
(:func:`model_origin`, the scheduler's groups).

Standard library only (besides the registry passed in).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import re
import sys
from collections.abc import Iterable, Iterator
from importlib import metadata
from typing import Any

TRUSTED_TOP_LEVEL = "xaibench"
BUILTIN_SOURCE = "built-in"  # the source of the plugins xaibench registers itself (manager.DEFAULT_PLUGINS)


def builtin_model(registry: Any, name: str) -> bool:
    """Whether model ``name`` of ``registry`` is one of xaibench's own: a real class (not a
    stand-in for a distribution) defined in the ``xaibench`` package and registered by one of
    xaibench's built-in plugin modules. ``False`` for anything else, an unknown name included."""
    if registry is None:
        return False
    try:
        from xaibench.plugins.manager import DEFAULT_PLUGINS, remote_distribution

        entry = registry.entry("model", name)
        status = registry.plugins.get(entry.info.plugin)
        module = str(getattr(entry.cls, "__module__", "") or "")
        return bool(
            entry.info.plugin in DEFAULT_PLUGINS
            and status is not None
            and status.source == BUILTIN_SOURCE
            and entry.info.distribution == TRUSTED_TOP_LEVEL
            and remote_distribution(entry.cls) is None
            and (module == TRUSTED_TOP_LEVEL or module.startswith(TRUSTED_TOP_LEVEL + "."))
        )
    except Exception:  # noqa: BLE001 - not known: not built-in
        return False


def model_origin(registry: Any, name: str | None) -> str | None:
    """``None`` for a built-in model (:func:`builtin_model`) or no model; else what a worker that
    builds model ``name`` takes in: its distribution (``distribution xb-tiny``), or ``model NAME``
    when the registry does not say."""
    if name is None or builtin_model(registry, name):
        return None
    try:
        info = registry.info("model", name)
        return f"distribution {info.distribution} (plugin {info.plugin})"
    except Exception:  # noqa: BLE001 - no registry, or a name only the workers know
        return f"model {name}"


def _normal(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.cache
def trusted_distributions() -> frozenset[str]:
    """``xaibench`` and the distributions it requires, transitively (extras left out), normalised
    (:func:`_normal`). Only ``xaibench`` when its metadata cannot be read."""
    seen: set[str] = set()
    todo = [TRUSTED_TOP_LEVEL]
    while todo:
        name = _normal(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except Exception:  # noqa: BLE001 - not installed (an optional dependency): nothing more
            continue
        for line in requires:
            requirement, _, marker = line.partition(";")
            if "extra" in marker:
                continue
            match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
            if match:
                todo.append(match.group(1))
    return frozenset(seen)


@functools.cache
def _distributions_of() -> dict[str, frozenset[str]]:
    """Top-level module name -> the (normalised) distributions that install it."""
    try:
        found = metadata.packages_distributions()
    except Exception:  # noqa: BLE001 - unreadable metadata: nothing is known to be trusted
        return {}
    return {top: frozenset(_normal(d) for d in dists) for top, dists in found.items()}


def trusted_module(name: str) -> bool:
    """Whether module ``name`` is trusted code: xaibench's own, the standard library's, or of a
    distribution xaibench requires (:func:`trusted_distributions`), judged by its top-level name."""
    top = name.partition(".")[0]
    if top == TRUSTED_TOP_LEVEL or top in sys.stdlib_module_names or top in sys.builtin_module_names:
        return True
    dists = _distributions_of().get(top)
    return bool(dists) and dists <= trusted_distributions()


def untrusted_modules(names: Iterable[str]) -> list[str]:
    """Those of the modules ``names`` that are loaded (in ``sys.modules``) and not trusted
    (:func:`trusted_module`), sorted."""
    return sorted(n for n in names if isinstance(n, str) and sys.modules.get(n) is not None and not trusted_module(n))


class UntrustedImport(ModuleNotFoundError):
    """An import that :func:`trusted_imports_only` refused (it looks like a missing module)."""


class _TrustedOnly(importlib.abc.MetaPathFinder):
    """First on ``sys.meta_path`` while :func:`trusted_imports_only` holds: refuses modules that are
    not trusted before any of their code is read."""

    def __init__(self) -> None:
        self.refused: list[str] = []

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if not trusted_module(fullname):
            self.refused.append(fullname)
            raise UntrustedImport(f"{fullname!r} is not imported here (not xaibench's own code)", name=fullname)
        return None  # the usual finders find it


@contextlib.contextmanager
def trusted_imports_only() -> Iterator[list[str]]:
    """In the block, an import of a module that is not trusted (:func:`trusted_module`) raises
    :class:`UntrustedImport` (a ``ModuleNotFoundError``) before its code runs; yields the list of
    the modules refused so far."""
    trusted_distributions()  # read the metadata now, not while an import is half-way
    _distributions_of()
    finder = _TrustedOnly()
    sys.meta_path.insert(0, finder)
    try:
        yield finder.refused
    finally:
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(finder)
