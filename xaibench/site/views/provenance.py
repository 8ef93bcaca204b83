"""What a track's provenance line says of its explained classes: what the records say, per source."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

__all__ = ["SOURCE_WORDS", "ExplainedClass", "explained_class"]

SOURCE_WORDS = {
    "predicted": "the model's prediction",
    "label": "the label",
    "mapped": "the label, mapped onto the model's classes",
    "mapped-candidate": "the most probable model class of the label",
    "unknown": "unknown (no model)",
}
"""The words for each ``target.source`` of the records (see runner/track.py ``resolve_targets``)."""


class ExplainedClass(TypedDict):
    source: str
    """The records' ``target.source`` (``predicted``, ``label``, ``mapped``...); ``""`` when the
    submission recorded only the track's rule."""
    text: str
    samples: int | None
    """Samples whose explained class came from ``source``; ``None`` when not recorded."""


def explained_class(provenance: Mapping[str, Any]) -> list[ExplainedClass]:
    """Where the explained classes of a track came from, most samples first, as the records say
    (``provenance["target_sources"]``, source -> samples). A submission written before that was
    recorded gives one entry naming the track's rule (``provenance["target"]``) as a rule."""
    sources = provenance.get("target_sources")
    if isinstance(sources, Mapping) and sources:
        counted = [(str(s), n) for s, n in sources.items() if isinstance(n, int) and not isinstance(n, bool)]
        counted.sort(key=lambda sn: (-sn[1], sn[0]))
        return [{"source": s, "text": SOURCE_WORDS.get(s, s), "samples": n} for s, n in counted]
    rule = provenance.get("target")
    text = f"the track's rule {rule!s} (per-sample sources not recorded)" if rule else "not recorded"
    return [{"source": "", "text": text, "samples": None}]
