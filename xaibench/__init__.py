"""xaibench: an open benchmark harness for explainable-AI methods on image classifiers.

The facade for plugin authors (``from xaibench import hookimpl``) and notebook users
(``xaibench.run(...)``, ``xaibench.meta(...)``, ``xaibench.results.records(workdir)``,
``xaibench.results.leaderboard(path)``, ``xaibench.results.meta(path)``;
see docs/python-api.md). ``run`` and ``results`` are imported on first use, so ``import xaibench``
stays light (no torch, no pandas). Internal modules import from the module that defines a name,
never from this facade (see docs/architecture.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from xaibench.plugins.hookspecs import hookimpl
from xaibench.version import __version__

if TYPE_CHECKING:
    from xaibench import results
    from xaibench.python_api import meta, run

__all__ = ["__version__", "hookimpl", "meta", "results", "run"]

_LAZY = ("meta", "results", "run")


def __getattr__(name: str) -> Any:
    """``xaibench.run``, ``xaibench.meta`` and ``xaibench.results``, imported when first used."""
    if name == "run":
        from xaibench.python_api import run

        return run
    if name == "meta":
        from xaibench.python_api import meta

        return meta
    if name == "results":
        import xaibench.results  # `from xaibench import results` would call this function again

        return xaibench.results
    raise AttributeError(f"module 'xaibench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
