"""The overview page's table across tracks: each explainer's mean win rate and overall rank per track."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from typing import TypedDict

from xaibench.publish.board import Leaderboard
from xaibench.publish.leaderboard import win_rates
from xaibench.publish.shapes import ExplainerWinRate, WinRates
from xaibench.site.submitted import Submitted
from xaibench.site.views.cells import FlagView, VerificationView, all_flags, verification_view


class TrackRank(TypedDict):
    rank: int | None
    tie: bool


class OverviewRow(TypedDict):
    position: int
    """1-based place in the table's order: the methods by mean win rate, then the references."""
    key: str
    name: str
    slug: str | None
    tuned: bool
    reference: bool
    verification: VerificationView | None
    flags: list[FlagView]
    win_rate: float | None
    """Mean win rate across tracks (higher is better, in [0, 1]); None when never ranked against another."""
    n_tracks: int
    ranks: list[TrackRank]
    """The overall rank on each track, in the order of :attr:`Overview.tracks`."""


class TrackLink(TypedDict):
    name: str
    anchor: str
    href: str
    """Where the track's tables are: ``#<anchor>`` on the overview, or the track's own page."""


class Overview(TypedDict):
    rows: list[OverviewRow]
    tracks: list[TrackLink]


def is_reference_key(by_key: Mapping[str, Submitted], key: str) -> bool:
    """Whether the submission ``key`` is a reference, not a method (its file says ``reference_only``)."""
    sub = by_key.get(key)
    return bool(sub and sub.reference)


def track_anchor(track: str) -> str:
    """The id of a track's section on the overview page."""
    return "track-" + re.sub(r"[^A-Za-z0-9_-]", "_", track)


def summary_of(board: Leaderboard) -> WinRates:
    """The board's ``summary``; computed from its ``rank:overall`` rows when it has none (a board made by hand)."""
    given = getattr(board, "summary", None)
    if isinstance(given, dict) and isinstance(given.get("explainers"), dict) and given.get("order"):
        return given
    return win_rates(board.rows)


def overview(board: Leaderboard, by_key: Mapping[str, Submitted], hrefs: Mapping[str, str] | None = None) -> Overview:
    """The table across tracks: the methods in the summary's order (mean win rate, best first),
    then the references (``oracle``: drawn as reference lines, never ranked, DESIGN 10), each with
    every track's overall rank; ``hrefs``: track -> its own page, for the tracks not on the overview."""
    hrefs = hrefs or {}
    summary = summary_of(board)
    info: dict[str, ExplainerWinRate] = summary["explainers"]
    order = [str(x) for x in summary["order"] if x in info]
    order += sorted(str(x) for x in info if x not in order)
    order = [x for x in order if not is_reference_key(by_key, x)] + [x for x in order if is_reference_key(by_key, x)]
    track_names = board.track_names()
    shared: dict[tuple[str, object], int] = defaultdict(int)
    for x in order:
        for track, rank in (info[x].get("overall_ranks") or {}).items():
            if isinstance(rank, int):
                shared[(track, rank)] += 1
    rows: list[OverviewRow] = []
    for position, x in enumerate(order, start=1):
        sub = by_key.get(x)
        entry = info[x] if isinstance(info[x], dict) else {}
        given = entry.get("overall_ranks")
        ranks: dict[str, int] = given if isinstance(given, dict) else {}
        rate = entry.get("mean_win_rate")
        n_tracks = entry.get("tracks")
        rows.append(
            {
                "position": position,
                "key": x,
                "name": sub.name if sub else x,
                "slug": sub.slug if sub else None,
                "tuned": bool(sub and sub.tuned),
                "reference": is_reference_key(by_key, x),
                "verification": verification_view(board, x, sub),
                "flags": all_flags(board, x),
                "win_rate": rate if isinstance(rate, int | float) and not isinstance(rate, bool) else None,
                "n_tracks": n_tracks if isinstance(n_tracks, int) else len(ranks),
                "ranks": [_track_rank(ranks.get(t), t, shared) for t in track_names],
            }
        )
    return {
        "rows": rows,
        "tracks": [
            {"name": t, "anchor": track_anchor(t), "href": hrefs.get(t, "#" + track_anchor(t))} for t in track_names
        ],
    }


def _track_rank(rank: object, track: str, shared: Mapping[tuple[str, object], int]) -> TrackRank:
    return {"rank": rank if isinstance(rank, int) else None, "tie": shared.get((track, rank), 0) > 1}
