"""Whether a run's answer can be read: tracks mostly n/a, models at chance (issue 24, item 5).

Read from a run summary (``summary.json``, :attr:`xaibench.python_api.RunResults.summary`), so
the command line, the Python API and the publishers all say the same thing. The rules
(docs/results.md, "Run health"):

- **error**: on a track, more than :data:`NA_ERROR_SHARE` of all the values of its
  non-reference explainers (every metric, every sample) are n/a. Values of reference-only
  explainers (``oracle``, which is n/a wherever a track has no ground truth) do not count. The
  line names the track, the share and the most common n/a reasons with their counts. A track that
  failed to load (``{"error": ...}`` in the summary) is reported where it failed, not here.
- **warning**: the track's model is at chance (``provenance["model_check"]``, see
  :mod:`xaibench.runner.chance`); one line per track.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from xaibench.runner.chance import chance_warning

__all__ = ["NA_ERROR_SHARE", "health_lines", "na_share"]

NA_ERROR_SHARE = 0.5
"""A track is an error when strictly more than this fraction of its values are n/a."""
TOP_REASONS = 3
"""The n/a reasons named in an error line, most common first."""


def na_share(track: Mapping[str, Any]) -> tuple[int, int, Counter[str]]:
    """``(n_na, total, reasons)`` over the non-reference explainers of one track of a summary:
    n/a values, all values (n/a included) and the n/a reasons with their counts (each metric's
    summary keeps its five most common reasons, so rarer ones may be missing from the counts)."""
    n_na = total = 0
    reasons: Counter[str] = Counter()
    explainers = track.get("explainers")
    for block in (explainers if isinstance(explainers, Mapping) else {}).values():
        if not isinstance(block, Mapping) or _reference_only(block):
            continue
        metrics = block.get("metrics")
        for metric in (metrics if isinstance(metrics, Mapping) else {}).values():
            if not isinstance(metric, Mapping):
                continue
            missing, valued = _count(metric.get("n_na")), _count(metric.get("n"))
            n_na += missing
            total += missing + valued
            given = metric.get("na_reasons")
            for reason, count in (given if isinstance(given, Mapping) else {}).items():
                reasons[str(reason)] += _count(count)
    return n_na, total, reasons


def health_lines(summary: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """``(errors, warnings)``: one line each. An error is a track on which more than half of the
    values of the non-reference explainers are n/a (the line gives the reasons); the run then
    exits non-zero. A warning is a model at chance on a track (one line per track)."""
    errors: list[str] = []
    warnings: list[str] = []
    tracks = summary.get("tracks")
    for name, track in (tracks if isinstance(tracks, Mapping) else {}).items():
        if not isinstance(track, Mapping) or "error" in track:
            continue
        n_na, total, reasons = na_share(track)
        if total and n_na > NA_ERROR_SHARE * total:
            top = ", ".join(f"{reason} ({count})" for reason, count in reasons.most_common(TOP_REASONS))
            errors.append(
                f"track {name}: {n_na} of {total} values ({100 * n_na / total:.0f} %) of its explainers are n/a"
                + (f"; most common reasons: {top}" if top else "")
            )
        provenance = track.get("provenance")
        warning = chance_warning(str(name), provenance) if isinstance(provenance, Mapping) else None
        if warning is not None:
            warnings.append(warning)
    return errors, warnings


def _reference_only(block: Mapping[str, Any]) -> bool:
    explainer = block.get("explainer")
    return isinstance(explainer, Mapping) and explainer.get("reference_only") is True


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
