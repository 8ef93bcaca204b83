"""Whether an explainer applies to a track at all, from its submission (the site's pages say it once)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["not_applicable"]


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
