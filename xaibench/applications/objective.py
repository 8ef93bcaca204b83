"""Whether the objective of ``xaibench tune``/``select`` is ranked on its track (issue 26, DESIGN 5 and 9).

An objective the leaderboard would not rank on the track must not pick a "best" setting silently:
its label and status are shown above the table and written to the CSV and JSON, and ``tune
--submit`` refuses it unless told otherwise. Not ranked means one of:

- the metric is not a ranking metric (reported only);
- a perceptual metric whose checkpoint is not validated: not labelled ``PASTA`` and a held-out
  technique-level Q1 Spearman below the leaderboard's threshold (the rule of
  :func:`xaibench.publish.leaderboard.perceptual_validity`);
- a metric with the verdict ``invalid`` on the track in a ``meta.json`` of ``xaibench meta``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xaibench.errors import XaibenchError
from xaibench.families import DEFAULT_FAMILY, policy_of
from xaibench.publish.gate import META_SCHEMA, invalid_status
from xaibench.publish.leaderboard import Entry, perceptual_validity


@dataclass(frozen=True)
class ObjectiveStatus:
    """The objective's label (a PASTA checkpoint's, e.g. ``PASTA (proxy, technique-level labels)``;
    ``None`` without one) and its status on the track: ``""`` when ranked, else ``not ranked: ...``."""

    label: str | None = None
    status: str = ""

    @property
    def ranked(self) -> bool:
        return not self.status

    def line(self, objective: str) -> str | None:
        """One line for the terminal, ``None`` for a ranked objective without a label."""
        if self.ranked and self.label is None:
            return None
        parts = [f"objective {objective}"]
        if self.label is not None:
            parts.append(f"label: {self.label}")
        parts.append(self.status or "ranked on this track")
        return "; ".join(parts)


def read_meta(path: Path | None) -> dict[str, Any] | None:
    """A ``meta.json`` (``xaibench meta``) as data; ``None`` without a path. One line for a file
    that cannot be read or is not one."""
    if path is None:
        return None
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise XaibenchError(f"--meta {path}: cannot be read as JSON ({exc})") from None
    if not (isinstance(data, dict) and data.get("schema") == META_SCHEMA):
        raise XaibenchError(f"--meta {path}: not a meta.json of xaibench meta (schema {META_SCHEMA})")
    return data


def objective_status(
    objective: str, track: str, block: Mapping[str, Any], meta: Mapping[str, Any] | None = None
) -> ObjectiveStatus:
    """The status of ``objective`` on ``track`` from its summary block (``family``, ``ranking``,
    ``params``: what the run recorded) and an optional ``meta.json`` (see the module doc)."""
    params = block.get("params") if isinstance(block.get("params"), dict) else {}
    label = params.get("label") if isinstance(params.get("label"), str) else None
    family = str(block.get("family", DEFAULT_FAMILY))
    if not block.get("ranking"):
        return ObjectiveStatus(label, f"not ranked: {objective} is reported, never ranked")
    if policy_of(family).needs_validity:
        entry = Entry(track, "", objective, family, str(block.get("direction", "higher")), True, None, None, None, 0, 0)
        entry.params = dict(params)
        ranked, reason, _ = perceptual_validity([entry])
        if not ranked:
            return ObjectiveStatus(label, f"not ranked: {reason}")
    card = ((meta or {}).get("tracks", {}).get(track, {}).get("metrics", {})).get(objective)
    if isinstance(card, dict) and card.get("verdict") == "invalid":
        return ObjectiveStatus(label, invalid_status(card))  # the leaderboard's own words
    return ObjectiveStatus(label, "")
