"""The static leaderboard site (``xaibench leaderboard build``): HTML from submission files only.

See :mod:`xaibench.site.build` for the layout and the safety rules. ``build_site`` is imported on
first use: the site's views import the PASTA renderer and torch, which writing the leaderboard
files without a site (:mod:`xaibench.site.board_folder`) does not need.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xaibench.site.build import build_site

__all__ = ["build_site"]


def __getattr__(name: str) -> Any:
    if name == "build_site":
        from xaibench.site.build import build_site

        return build_site
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
