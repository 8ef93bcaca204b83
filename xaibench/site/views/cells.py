"""The board's verdicts as the pages show them, and the table cells they share.

The verdicts come from the :class:`~xaibench.publish.board.Leaderboard`: row ``status``
("too few samples (n = k)", "not ranked: <reason>"), ``label`` (the proxy label of perceptual
values) and ``flags`` ("n/a 40 %"); ``families`` (which family is ranked on a track, and why
not); ``summary`` (mean win rate, overall ranks); ``rules`` (the thresholds); the explainers'
``flags`` ("insensitive to the model"), ``verification`` (the board builder's own result) and
``verification_claim`` (what a file's own block claims, never shown as verified). Every one is read with a default,
so a board without them (an older leaderboard, one made by hand) still builds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TypedDict

from xaibench.families import family_index, policy_of
from xaibench.publish.board import Leaderboard
from xaibench.publish.leaderboard import REFERENCE_STATUS, RULES
from xaibench.publish.shapes import BoardRow
from xaibench.site.submitted import Submitted


class FamilyState(TypedDict):
    """A family's verdict on a track, as text (``""`` for none)."""

    ranked: bool
    reason: str
    label: str


class FamilyNote(TypedDict):
    """A family shown but not ranked on a track, with why."""

    family: str
    text: str
    label: str


class FlagView(TypedDict):
    """One of an explainer's flags and the tracks it is raised on."""

    flag: str
    tracks: list[str]


class VerificationView(TypedDict):
    """``xaibench submission verify``'s outcome as text: a badge, its title, the page's line.

    ``passed``: the board builder's own result passed (never true for a file's own claim);
    ``claimed``: this is only what the file says of itself (the board's ``verification_claim``)."""

    passed: bool
    claimed: bool
    date: str
    text: str
    short: str
    detail: str


class Cell(TypedDict, total=False):
    """One table cell; a missing one has only ``missing`` and ``sort``."""

    missing: bool
    sort: str
    """What the table sorts by: the value to 7 significant digits (what float32 holds; the cell shows
    3), ``""`` for none."""
    value: float | None
    ci: tuple[float, float] | None
    rank: int | None
    tie: bool
    n: int | None
    n_na: int | None
    status: str
    status_short: str
    """The status, or just "not ranked" when the column's header already says why."""
    flags: list[str]
    label: str


class MetricColumn(TypedDict):
    """A metric's column on a track: its header and the status every explainer shares there."""

    id: str
    family: str
    direction: str
    label: str
    family_note: str
    status: str
    column_status: str


def board_rules(board: Leaderboard) -> dict[str, float]:
    """The board's ranking rules over the defaults of :data:`xaibench.publish.leaderboard.RULES` (numbers only)."""
    rules: dict[str, float] = dict(RULES)
    given = getattr(board, "rules", None)
    for key, value in (given if isinstance(given, dict) else {}).items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            rules[str(key)] = value
    return rules


def families_on(board: Leaderboard, track: str) -> dict[str, FamilyState]:
    """Each family's verdict on ``track`` (empty when the board has no ``families``)."""
    given = getattr(board, "families", None)
    per_track = given.get(track) if isinstance(given, dict) else None
    out: dict[str, FamilyState] = {}
    for family, info in (per_track if isinstance(per_track, dict) else {}).items():
        if isinstance(info, dict):
            reason, label = info.get("reason"), info.get("label")
            out[str(family)] = {
                "ranked": info.get("ranked") is not False,
                "reason": str(reason) if reason else "",
                "label": str(label) if label else "",
            }
    return out


def not_ranked_text(reason: str) -> str:
    """``not ranked: <reason>`` (the reason alone when it already says so)."""
    reason = reason.strip()
    if reason.startswith("not ranked"):
        return reason
    return f"not ranked: {reason}" if reason else "not ranked"


def family_notes(fam_info: Mapping[str, FamilyState], present: set[str]) -> list[FamilyNote]:
    """The families on a track that are shown but not ranked, with their reason."""
    return [
        {"family": f, "text": not_ranked_text(fam_info[f]["reason"]), "label": fam_info[f]["label"]}
        for f in sorted(fam_info, key=family_index)
        if not fam_info[f]["ranked"] and f in present and policy_of(f).note_unranked
    ]


def metric_label(board: Leaderboard, rows: Sequence[BoardRow], metric: str) -> str:
    """The proxy label of a metric's values: the rows' ``label``, else the board's ``metric_labels``."""
    for r in rows:
        label = r.get("label")
        if r["metric"] == metric and isinstance(label, str) and label:
            return label
    labels = getattr(board, "metric_labels", None)
    label = labels.get(metric) if isinstance(labels, dict) else None
    return label if isinstance(label, str) else ""


def flag_list(text: object) -> list[str]:
    """A row's ``flags`` ("; "-joined) as a list."""
    if isinstance(text, list):
        return [str(f) for f in text if str(f).strip()]
    return [f.strip() for f in str(text).split(";") if f.strip()] if isinstance(text, str) else []


def explainer_flags(board: Leaderboard, key: str, track: str) -> list[str]:
    """Flags of an explainer on a track, e.g. "insensitive to the model"."""
    info = board.explainers.get(key)
    flags = info.get("flags") if isinstance(info, dict) else None
    return flag_list((flags if isinstance(flags, dict) else {}).get(track))


def all_flags(board: Leaderboard, key: str) -> list[FlagView]:
    """Each distinct flag of an explainer with the tracks it is raised on."""
    tracks: dict[str, list[str]] = {}
    for track in board.track_names():
        for flag in explainer_flags(board, key, track):
            tracks.setdefault(flag, []).append(track)
    return [{"flag": f, "tracks": t} for f, t in tracks.items()]


def verification_view(board: Leaderboard, key: str, sub: Submitted | None) -> VerificationView | None:
    """The explainer's verification on the board as text for the page and the tables.

    Only the board's ``verification`` (the board builder's own result for this exact content,
    :func:`xaibench.publish.board.build_board`'s ``verified``) shows as verified. A file's own
    ``verification`` block is what the file says of itself: it shows as the board's
    ``verification_claim`` ("claims verified (not checked here)"), never as verified
    (``passed`` is ``False`` and ``claimed`` ``True``). ``sub`` is not read: the file's block is
    never trusted."""
    del sub  # the file's own block is shown only through the board's claim
    info = board.explainers.get(key)
    if not isinstance(info, dict):
        return None
    given = info.get("verification")
    if isinstance(given, dict) and isinstance(given.get("passed"), bool):
        date, counts, detail = _verification_parts(given)
        passed = given["passed"]
        return {
            "passed": passed,
            "claimed": False,
            "date": date,
            "text": f"verified {date} ({counts})" if passed else f"verification failed {date} ({counts})",
            "short": "verified" if passed else "verification failed",
            "detail": "re-run by xaibench submission verify " + detail,
        }
    claim = info.get("verification_claim")
    if not isinstance(claim, str) or not claim:
        return None
    own = info.get("claimed_verification")
    date, counts, detail = _verification_parts(own if isinstance(own, dict) else {})
    return {
        "passed": False,
        "claimed": True,
        "date": date,
        "text": f"{claim}: the file says {date} ({counts})",
        "short": claim,
        "detail": "the file's own verification block, not re-run by whoever built this board: " + detail,
    }


def _verification_parts(given: Mapping[str, object]) -> tuple[str, str, str]:
    """A verification record's date, record counts and details (time, tolerance, version) as text."""
    at = str(given.get("verified_at") or "")
    date = at[:10] if re.fullmatch(r"\d{4}-\d{2}-\d{2}", at[:10]) else (at or "date unknown")
    checked, matched = given.get("checked"), given.get("matched")
    counts = (
        f"{matched} of {checked} re-run records matched"
        if isinstance(checked, int) and isinstance(matched, int)
        else "record counts unknown"
    )
    tolerance = given.get("tolerance")
    detail = [f"at {at}" if at else "time unknown"]
    if isinstance(tolerance, int | float) and not isinstance(tolerance, bool):
        detail.append(f"tolerance {tolerance:g}")
    if given.get("xaibench"):
        detail.append(f"xaibench {given['xaibench']}")
    return date, counts, ", ".join(detail)


def cell(
    row: BoardRow | None,
    ties: Mapping[tuple[str, int], int],
    *,
    column_status: str = "",
    hide_flags: tuple[str, ...] = (),
) -> Cell:
    """One table cell; ``column_status``: the status already shown in the column's header (given short here)."""
    if row is None:
        return {"missing": True, "sort": ""}
    value, rank = row["value"], row["rank"]
    tie = rank is not None and ties.get((row["metric"], rank), 0) > 1
    status = str(row.get("status") or "")
    short = status
    if status and status == column_status and status.startswith("not ranked"):
        short = "not ranked"
    elif status == REFERENCE_STATUS:  # the row's name already says "reference, not a method"
        short = "never ranked"
    return {
        "missing": False,
        "value": value,
        "ci": (row["ci_low"], row["ci_high"]) if row["ci_low"] is not None and row["ci_high"] is not None else None,
        "rank": rank,
        "tie": tie,
        "n": row["n"],
        "n_na": row["n_na"],
        "sort": "" if value is None else f"{float(value):.7g}",
        "status": status,
        "status_short": short,
        "flags": [f for f in flag_list(row.get("flags")) if f not in hide_flags],
        "label": str(row.get("label") or ""),
    }


def column_status(rows: Sequence[BoardRow], metric: str) -> str:
    """The status every method shares on a metric (shown once, in the header), else ""; references
    (never ranked, their cells say so) do not count."""
    statuses = {str(r.get("status") or "") for r in rows if r["metric"] == metric} - {REFERENCE_STATUS}
    return statuses.pop() if len(statuses) == 1 else ""


def metric_column(
    board: Leaderboard, rows: Sequence[BoardRow], metric: str, fam_info: Mapping[str, FamilyState]
) -> MetricColumn:
    """The header of ``metric``'s column from its rows on a track (``rows``: the metric rows there)."""
    first = next(r for r in rows if r["metric"] == metric)
    family = first["family"]
    fam = fam_info.get(family)
    noted = policy_of(family).note_unranked
    family_note = not_ranked_text(fam["reason"]) if fam and not fam["ranked"] and noted else ""
    status = column_status(rows, metric)
    return {
        "id": metric,
        "family": family,
        "direction": first["direction"],
        "label": metric_label(board, rows, metric) or (fam["label"] if fam else ""),
        "family_note": family_note,
        "status": "" if status == family_note else status,
        "column_status": status,
    }
