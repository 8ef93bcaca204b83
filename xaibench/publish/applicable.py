"""Whether an explainer applies to a track at all, from its submission: one that applies to none of
a track's samples (an image-only explainer on a text track, a concept explainer on a model without
concepts) gets no row there; the board files, the terminal and the site say it once per track,
with the reason."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from xaibench.publish.shapes import BoardRow
from xaibench.publish.submission_files import Submission

__all__ = ["away_from", "not_applicable", "said_once"]


def not_applicable(track: Mapping[str, Any]) -> str | None:
    """Why an explainer applies to none of a track's samples, or None when it applies to some.

    It applies to none when no explanation was computed or cached and no metric has a value; the
    reason is the metrics' n/a reasons (one, as a rule: the explainer's own error, or the track's
    modality), the most frequent first, each said once. A track with no n/a reason at all (no
    samples) is not called inapplicable.
    """
    explained = track.get("explained")
    metrics = [m for m in (track.get("metrics") or {}).values() if isinstance(m, dict)]
    if not isinstance(explained, dict) or not metrics:
        return None
    if explained.get("computed", 0) or explained.get("cached", 0):
        return None
    if any(m.get("n") for m in metrics):
        return None
    counts: dict[str, int] = {}
    for m in metrics:
        reasons = m.get("na_reasons")
        for reason, count in reasons.items() if isinstance(reasons, dict) else ():
            counts[str(reason)] = max(counts.get(str(reason), 0), int(count))
    return None if not counts else "; ".join(sorted(counts, key=lambda r: (-counts[r], r)))


def away_from(track: str, submissions: Iterable[Submission], rows: Iterable[BoardRow]) -> dict[str, str]:
    """The explainers (board keys) that apply to none of ``track``'s samples, each with its reason
    (:func:`not_applicable` on its submission), among those with rows on the track and no value
    in any of them (a row with a value is never hidden; a superseded file has no rows)."""
    on_track = [r for r in rows if r["track"] == track]
    empty = {r["explainer"] for r in on_track} - {r["explainer"] for r in on_track if r["value"] is not None}
    out: dict[str, str] = {}
    for sub in submissions:
        tracks = sub.data.get("tracks") or {}
        if sub.key not in empty or track not in tracks:
            continue
        reason = not_applicable(tracks[track])
        if reason is not None:
            out[sub.key] = reason
    return out


def said_once(away: Mapping[str, str], label: Any = str) -> list[str]:
    """One line per reason: ``n/a here: gradcam, hirescam (<reason>)``, ``label`` naming each key."""
    lines = []
    for reason in sorted(set(away.values())):
        names = sorted(label(k) for k, r in away.items() if r == reason)
        lines.append(f"n/a here: {', '.join(names)} ({reason})")
    return lines
