"""One track's sortable table on the overview page: overall rank, family ranks, the ranking
metrics; the other metrics with values; the metrics without any value, with the commonest reason."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from typing import TypedDict

from xaibench.families import POLICIES, family_index
from xaibench.publish.board import Leaderboard, rank_ties, track_title
from xaibench.publish.shapes import BoardRow, Provenance
from xaibench.site.submitted import Submitted
from xaibench.site.views.cells import (
    Cell,
    FamilyNote,
    FlagView,
    MetricColumn,
    VerificationView,
    cell,
    explainer_flags,
    families_on,
    family_notes,
    metric_column,
    not_ranked_text,
    verification_view,
)
from xaibench.site.views.cost import CostView, cost_view
from xaibench.site.views.overview import is_reference_key, track_anchor
from xaibench.site.views.provenance import ExplainedClass, explained_class


class FamilyColumn(TypedDict):
    name: str
    note: str
    """``not ranked: <reason>`` when the family is not ranked on the track, else ""."""


class TrackRow(TypedDict):
    """One explainer's row of a track's table."""

    key: str
    name: str
    slug: str | None
    tuned: bool
    reference: bool
    flags: list[FlagView]
    verification: VerificationView | None
    overall: Cell
    families: list[Cell]
    ranked: list[Cell]
    others: list[Cell]


class NotApplicable(TypedDict):
    """Explainers that apply to none of a track's samples for one reason."""

    reason: str
    explainers: list[tuple[str, str | None]]
    """Their names and page slugs."""


class TrackView(TypedDict):
    name: str
    anchor: str
    href: str
    """Where the track's tables are, from the overview: ``#<anchor>`` on it, or its own page
    (:func:`place_tracks`)."""
    title: str
    provenance: Provenance
    explained_class: list[ExplainedClass]
    """Where the explained classes came from, as the records say."""
    warnings: list[str]
    """Warnings about the track's numbers (a model at chance)."""
    families: list[FamilyColumn]
    not_ranked: list[FamilyNote]
    ranked: list[MetricColumn]
    """The ranking metrics with a value, in family order."""
    others: list[MetricColumn]
    """The other metrics with a value."""
    inapplicable: list[MetricColumn]
    """The metrics without any value on the track."""
    inapplicable_reason: str
    rows: list[TrackRow]
    """The explainers that apply to the track (references last)."""
    not_applicable: list[NotApplicable]
    """The explainers that apply to none of its samples, grouped by reason: said once, not as rows."""
    cost: CostView
    """Each explainer's cost cell (seconds per image, memory) and the quality-against-cost plot
    (:mod:`xaibench.site.views.cost`); shown, never ranked."""


def track_view(board: Leaderboard, track: str, by_key: Mapping[str, Submitted]) -> TrackView:
    rows = [r for r in board.rows if r["track"] == track]
    metric_rows = [r for r in rows if not r["metric"].startswith("rank:")]
    fam_info = families_on(board, track)
    info: dict[str, MetricColumn] = {}
    for r in metric_rows:
        if r["metric"] not in info:
            info[r["metric"]] = metric_column(board, metric_rows, r["metric"], fam_info)
    ranking = board.ranking_metrics.get(track, set())

    def order(m: str) -> tuple[int, str]:
        return (family_index(info[m]["family"]), m)

    valued = {r["metric"] for r in metric_rows if r["value"] is not None}
    ranked = [info[m] for m in sorted(info, key=order) if m in ranking and m in valued]
    others = [info[m] for m in sorted(info, key=order) if m not in ranking and m in valued]
    inapplicable = [info[m] for m in sorted(info, key=order) if m not in valued]
    present = {m["family"] for m in ranked}
    families: list[FamilyColumn] = [
        {
            "name": f,
            "note": not_ranked_text(fam_info[f]["reason"]) if f in fam_info and not fam_info[f]["ranked"] else "",
        }
        for f in (p.name for p in POLICIES if p.ranked_within)
        if any(r["metric"] == f"rank:{f}" for r in rows) or (f in present and f in fam_info)
    ]
    cells: dict[str, dict[str, BoardRow]] = defaultdict(dict)
    for r in rows:
        cells[r["explainer"]][r["metric"]] = r
    ties = rank_ties(rows)
    away = {x: reason for x, reason in board.away(track).items() if x in by_key}  # no row: said once
    explainers = sorted(
        (x for x in cells if x not in away),
        key=lambda x: (is_reference_key(by_key, x), _overall_rank(cells[x]) or 10**9, x),
    )
    body: list[TrackRow] = []
    for x in explainers:
        sub = by_key.get(x)
        flags = explainer_flags(board, x, track)
        body.append(
            {
                "key": x,
                "name": sub.name if sub else x,
                "slug": sub.slug if sub else None,
                "tuned": bool(sub and sub.tuned),
                "reference": bool(sub and sub.reference),
                "flags": [{"flag": f, "tracks": [track]} for f in flags],
                "verification": verification_view(board, x, sub),
                "overall": cell(cells[x].get("rank:overall"), ties, hide_flags=tuple(flags)),
                "families": [
                    cell(cells[x].get(f"rank:{f['name']}"), ties, column_status=f["note"], hide_flags=tuple(flags))
                    for f in families
                ],
                "ranked": [cell(cells[x].get(m["id"]), ties, column_status=m["column_status"]) for m in ranked],
                "others": [cell(cells[x].get(m["id"]), ties, column_status=m["column_status"]) for m in others],
            }
        )
    prov = board.tracks.get(track, {})
    return {
        "name": track,
        "anchor": track_anchor(track),
        "href": "#" + track_anchor(track),
        "title": track_title(board, track),
        "provenance": prov if isinstance(prov, dict) else {},
        "explained_class": explained_class(prov if isinstance(prov, dict) else {}),
        "warnings": list(board.warnings.get(track, [])),
        "families": families,
        "not_ranked": family_notes(fam_info, {m["family"] for m in info.values()}),
        "ranked": ranked,
        "others": others,
        "inapplicable": inapplicable,
        "inapplicable_reason": top_reason(by_key, track, [m["id"] for m in inapplicable]),
        "rows": body,
        "not_applicable": [
            {
                "reason": reason,
                "explainers": [
                    (by_key[x].name, by_key[x].slug)
                    for x in sorted(away, key=lambda k: by_key[k].name)
                    if away[x] == reason
                ],
            }
            for reason in sorted(set(away.values()))
        ],
        "cost": cost_view(board, track, by_key),
    }


INLINE_CELLS = 3000
"""The most table cells (rows x columns over every track) the overview shows itself; a larger
board gets one page per track (about 300 bytes a cell: 3,000 cells keep the overview near 1 MB)."""


def track_cells(view: TrackView) -> int:
    """The cells of a track's tables: each row's name, overall rank, families and metrics."""
    return len(view["rows"]) * (2 + len(view["families"]) + len(view["ranked"]) + len(view["others"]))


def track_page(index: int, track: str) -> str:
    """The site-relative file of a track's own page: its position and a slug of its name
    (generated, never the submitted string itself)."""
    slug = re.sub(r"[^a-z0-9]+", "-", track.lower()).strip("-")[:40] or "track"
    return f"tracks/{index + 1:03d}-{slug}.html"


def place_tracks(views: list[TrackView], inline_cells: int = INLINE_CELLS) -> dict[str, str]:
    """Put each track on the overview (small boards) or on its own page (when the tables hold
    more than ``inline_cells`` cells in all); sets each view's ``href`` and returns track name
    -> its page's site-relative file (empty when the overview holds them all)."""
    if sum(track_cells(v) for v in views) <= inline_cells:
        return {}
    pages = {v["name"]: track_page(k, v["name"]) for k, v in enumerate(views)}
    for v in views:
        v["href"] = pages[v["name"]]
    return pages


def _overall_rank(cells: Mapping[str, BoardRow]) -> int | None:
    overall = cells.get("rank:overall")
    return overall.get("rank") if overall is not None else None


def top_reason(by_key: Mapping[str, Submitted], track: str, metrics: list[str]) -> str:
    """The most common n/a reason of ``metrics`` on ``track`` over all submissions."""
    counts: dict[str, int] = defaultdict(int)
    for sub in by_key.values():
        for metric in metrics:
            m = sub.data["tracks"].get(track, {}).get("metrics", {}).get(metric, {})
            reasons = m.get("na_reasons") if isinstance(m, dict) else None
            for reason, n in (reasons if isinstance(reasons, dict) else {}).items():
                counts[str(reason)] += n if isinstance(n, int) else 0
    return max(sorted(counts), key=lambda r: counts[r]) if counts else "none recorded"
