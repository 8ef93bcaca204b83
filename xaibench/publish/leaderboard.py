"""Direction-aware ranking of explainers within a track (DESIGN 7).

Per metric, explainers are ordered best first. Ties: an explainer whose mean lies
inside the 95 % interval of the group leader above it shares the leader's rank
(competition ranking: 1, 1, 3). A family score is the mean rank over that family's
ranking metrics; the overall score is the mean of the family scores. Raw values of
different metrics are never added together.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xaibench.api import RANKED_FAMILIES

ROW_COLUMNS = ("track", "explainer", "metric", "family", "direction", "value", "ci_low", "ci_high", "n", "n_na", "rank")


@dataclass
class Entry:
    track: str
    explainer: str
    metric: str
    family: str
    direction: str
    ranking: bool
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    n_na: int


def rank_values(entries: list[Entry]) -> dict[str, int]:
    """Competition ranks with interval ties; entries without a value get no rank."""
    scored = [e for e in entries if e.value is not None]
    sign = -1.0 if scored and scored[0].direction == "higher" else 1.0
    scored.sort(key=lambda e: (sign * e.value, e.explainer))  # type: ignore[operator]
    ranks: dict[str, int] = {}
    leader: Entry | None = None
    for position, entry in enumerate(scored, start=1):
        if leader is not None and _within(entry.value, leader):
            ranks[entry.explainer] = ranks[leader.explainer]
        else:
            leader = entry
            ranks[entry.explainer] = position
    return ranks


def _within(value: float | None, leader: Entry) -> bool:
    if value is None or leader.value is None:
        return False
    if value == leader.value:
        return True
    if leader.ci_low is None or leader.ci_high is None:
        return False
    return leader.ci_low <= value <= leader.ci_high


def rank_by_mean(scores: dict[str, float]) -> dict[str, int]:
    """Competition ranks of mean ranks (lower is better); equal scores tie."""
    ordered = sorted(scores.items(), key=lambda kv: (kv[1], kv[0]))
    ranks: dict[str, int] = {}
    for position, (name, score) in enumerate(ordered, start=1):
        previous = ordered[position - 2] if position > 1 else None
        ranks[name] = ranks[previous[0]] if previous and abs(previous[1] - score) < 1e-12 else position
    return ranks


def entries_from_submissions(submissions: list[tuple[Path, dict[str, Any]]]) -> list[Entry]:
    entries: list[Entry] = []
    for path, sub in submissions:
        label = path.stem
        for track_name, track in sub["tracks"].items():
            for metric_id, m in track.get("metrics", {}).items():
                entries.append(
                    Entry(
                        track=str(track_name),
                        explainer=label,
                        metric=str(metric_id),
                        family=str(m.get("family", "other")),
                        direction=str(m.get("direction", "higher")),
                        ranking=bool(m.get("ranking", False)),
                        value=_num(m.get("mean")),
                        ci_low=_num(m.get("ci_low")),
                        ci_high=_num(m.get("ci_high")),
                        n=int(m.get("n", 0)),
                        n_na=int(m.get("n_na", 0)),
                    )
                )
    return entries


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def leaderboard_rows(entries: list[Entry]) -> list[dict[str, Any]]:
    """Tidy rows (DESIGN 8): one per (track, explainer, metric) plus rank:<family> and rank:overall."""
    rows: list[dict[str, Any]] = []
    by_track: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        by_track[e.track].append(e)
    for track in sorted(by_track):
        by_metric: dict[str, list[Entry]] = defaultdict(list)
        for e in by_track[track]:
            by_metric[e.metric].append(e)
        family_ranks: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
        for metric in sorted(by_metric):
            group = by_metric[metric]
            ranks = rank_values(group)
            for e in sorted(group, key=lambda e: e.explainer):
                rank = ranks.get(e.explainer)
                rows.append({**_row(e), "rank": rank})
                if e.ranking and rank is not None and e.family in RANKED_FAMILIES:
                    family_ranks[e.family][e.explainer].append(rank)
        explainers = sorted({e.explainer for e in by_track[track]})
        family_scores: dict[str, dict[str, float]] = {}
        for family in RANKED_FAMILIES:
            scores = {x: sum(r) / len(r) for x, r in family_ranks[family].items() if r}
            if not scores:
                continue
            family_scores[family] = scores
            ranks = rank_by_mean(scores)
            for x in sorted(scores):
                rows.append(_summary_row(track, x, f"rank:{family}", family, scores[x], ranks[x]))
        overall = {
            x: sum(s[x] for s in family_scores.values() if x in s) / sum(1 for s in family_scores.values() if x in s)
            for x in explainers
            if any(x in s for s in family_scores.values())
        }
        overall_ranks = rank_by_mean(overall)
        for x in sorted(overall):
            rows.append(_summary_row(track, x, "rank:overall", "overall", overall[x], overall_ranks[x]))
    return rows


def _row(e: Entry) -> dict[str, Any]:
    return {
        "track": e.track,
        "explainer": e.explainer,
        "metric": e.metric,
        "family": e.family,
        "direction": e.direction,
        "value": e.value,
        "ci_low": e.ci_low,
        "ci_high": e.ci_high,
        "n": e.n,
        "n_na": e.n_na,
    }


def _summary_row(track: str, explainer: str, metric: str, family: str, value: float, rank: int) -> dict[str, Any]:
    return {
        "track": track,
        "explainer": explainer,
        "metric": metric,
        "family": family,
        "direction": "lower",
        "value": value,
        "ci_low": None,
        "ci_high": None,
        "n": None,
        "n_na": None,
        "rank": rank,
    }
