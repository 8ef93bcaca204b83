"""The correlations page, per track: Spearman rho between metrics across explainers (ranking
metrics, then all), and each metric against the perceptual reference (``pasta_q1``)."""

from __future__ import annotations

from collections import defaultdict
from typing import TypedDict

from markupsafe import Markup

from xaibench.families import family_index
from xaibench.metaeval.correlations import PERCEPTUAL_REFERENCE, correlation_matrix, oriented, pair_rho
from xaibench.publish.board import Leaderboard, track_title
from xaibench.site import charts
from xaibench.site.views.cells import FamilyNote, families_on, family_notes, metric_label


class VersusReference(TypedDict):
    metric: str
    family: str
    direction: str
    rho: float | None
    """Spearman rho of the metric's oriented means with the reference's, over the explainers with both."""
    n: int
    label: str


class CorrelationView(TypedDict):
    name: str
    anchor: str
    """The id of the track's section (``corr-<k>``, k from 1 in track order)."""
    href: str
    """Where the section is, from the correlations page: ``#<anchor>`` on it, or the track's own
    correlations page on large boards (``correlations/<k>-<slug>.html``)."""
    title: str
    n_explainers: int
    ranked_svg: Markup | None
    all_svg: Markup | None
    n_usable: int
    """Metrics with values for at least three explainers."""
    has_reference: bool
    reference_label: str
    not_ranked: list[FamilyNote]
    versus: list[VersusReference]


def correlation_view(board: Leaderboard, track: str, index: int = 0, page: str | None = None) -> CorrelationView:
    """The correlations of ``track``, from the board's rows (the means of the explainers there);
    ``index``: the track's position (from 0); ``page``: its own page, on large boards."""
    values: dict[str, dict[str, float]] = defaultdict(dict)
    directions: dict[str, str] = {}
    families: dict[str, str] = {}
    for r in board.rows:
        if r["track"] != track or r["metric"].startswith("rank:") or r["value"] is None:
            continue
        values[r["metric"]][r["explainer"]] = float(r["value"])
        directions[r["metric"]] = r["direction"]
        families[r["metric"]] = r["family"]
    oriented_values = {m: oriented(v, directions[m]) for m, v in values.items()}
    usable = [m for m in oriented_values if len(oriented_values[m]) >= 3]
    usable.sort(key=lambda m: (family_index(families[m]), m))
    ranking = board.ranking_metrics.get(track, set())
    ranked = [m for m in usable if m in ranking]
    n_explainers = len({r["explainer"] for r in board.rows if r["track"] == track})
    reference = oriented_values.get(PERCEPTUAL_REFERENCE)
    track_rows = [r for r in board.rows if r["track"] == track]
    labels = {m: label for m in values if (label := metric_label(board, track_rows, m))}
    fam_info = families_on(board, track)
    versus: list[VersusReference] = []
    for m in usable:
        if m == PERCEPTUAL_REFERENCE:
            continue
        rho, n = pair_rho(oriented_values[m], reference) if reference else (None, 0)
        versus.append(
            {
                "metric": m,
                "family": families[m],
                "direction": directions[m],
                "rho": rho,
                "n": n,
                "label": labels.get(m, ""),
            }
        )

    def title(what: str, metrics: list[str]) -> str:
        shown = sorted({labels[m] for m in metrics if m in labels})
        return f"Spearman rho between {what}, {track}" + (f" (perceptual values: {'; '.join(shown)})" if shown else "")

    anchor = f"corr-{index + 1}"
    return {
        "name": track,
        "anchor": anchor,
        "href": page or "#" + anchor,
        "title": track_title(board, track),
        "n_explainers": n_explainers,
        "ranked_svg": charts.heatmap(
            ranked, correlation_matrix(ranked, oriented_values), title=title("ranking metrics", ranked)
        )
        if len(ranked) >= 2
        else None,
        "all_svg": charts.heatmap(
            usable, correlation_matrix(usable, oriented_values), title=title("all metrics", usable)
        )
        if len(usable) >= 2
        else None,
        "n_usable": len(usable),
        "has_reference": reference is not None,
        "reference_label": labels.get(PERCEPTUAL_REFERENCE, ""),
        "not_ranked": family_notes(fam_info, set(families.values())),
        "versus": versus,
    }
