"""The meta-evaluation gate (DESIGN 9): verdicts of ``xaibench meta`` applied to a leaderboard.

``meta.json`` (written by ``xaibench meta``, read here as data) holds each (track, metric)'s
verdict and the sha256 of every submission it assessed. :func:`read_gate` applies it only when
those digests are exactly the submissions being built (the same files, byte for byte): then a
metric whose verdict on a track is ``invalid`` is shown but "not ranked: invalid on this track
(<test>: <figure> = <value>)" and leaves the family and overall ranks. A ``meta.json`` that does
not match is ignored, with one line that says why; without one nothing changes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xaibench.publish.submission_files import Submission

META_SCHEMA = "xaibench.meta/1"


@dataclass(frozen=True)
class Gate:
    """What a ``meta.json`` says about the board being built: the status of every invalid
    (track, metric), and ``note``: one line on what was applied or why nothing was."""

    statuses: dict[tuple[str, str], str] = field(default_factory=dict)
    note: str | None = None
    data: dict[str, Any] | None = None  # the meta.json applied (the site's metrics page shows it)

    def for_track(self, track: str) -> dict[str, str]:
        """Metric -> "not ranked: invalid ..." status on ``track``."""
        return {metric: status for (t, metric), status in self.statuses.items() if t == track}


def invalid_status(card: dict[str, Any]) -> str:
    """The status an invalid metric's cells show, from its card in ``meta.json``."""
    v = card.get("validity") if isinstance(card.get("validity"), dict) else {}
    value = v.get("value")
    figure = f"{v.get('figure')} = {value:.3g}" if isinstance(value, (int, float)) else str(v.get("figure"))
    return f"not ranked: invalid on this track ({v.get('test')}: {figure})"


def _digest(sub: Submission) -> str:
    return sub.bytes_sha256()


def read_gate(path: Path | None, submissions: Sequence[Submission]) -> Gate:
    """The gate of ``meta.json`` at ``path`` for ``submissions`` (see the module doc); an empty
    gate without a file."""
    if path is None or not path.is_file():
        return Gate()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return Gate(note=f"{path}: ignored, not readable as JSON ({exc})")
    if not (isinstance(data, dict) and data.get("schema") == META_SCHEMA):
        return Gate(note=f"{path}: ignored, not a meta.json of xaibench meta (schema {META_SCHEMA})")
    recorded = (data.get("provenance") or {}).get("submissions")
    mine = {s.path.name: _digest(s) for s in submissions}
    if recorded != mine:
        why = "its submission digests do not match these submissions (rerun xaibench meta)"
        return Gate(note=f"{path}: ignored, {why}")
    statuses: dict[tuple[str, str], str] = {}
    for track, block in (data.get("tracks") or {}).items():
        for metric, card in ((block or {}).get("metrics") or {}).items():
            if isinstance(card, dict) and card.get("verdict") == "invalid":
                statuses[(str(track), str(metric))] = invalid_status(card)
    shown = f"{len(statuses)} metric(s) not ranked as invalid" if statuses else "no metric found invalid"
    return Gate(statuses, note=f"meta-evaluation {_named(path, submissions)} applied: {shown}", data=data)


def _named(path: Path, submissions: Sequence[Submission]) -> str:
    """``path`` as the board names it: relative to the folder holding the submissions' folder
    (``meta/meta.json`` beside ``submissions/``) where it lies there, so a board's files do not
    change with where it was built; else as given."""
    if submissions:
        try:
            return path.absolute().relative_to(submissions[0].path.absolute().parent.parent).as_posix()
        except ValueError:
            pass
    return str(path)
