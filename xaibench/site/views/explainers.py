"""One page per submission: per track its ranks, each metric with its distribution, the example
overlays (on text: highlighted tokens, :mod:`xaibench.site.views.tokens`), and the mean curves
(deletion, insertion, the randomisation cascade) against the others."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypedDict

import numpy as np
from markupsafe import Markup

from xaibench.families import POLICIES, family_index
from xaibench.publish.applicable import not_applicable
from xaibench.publish.board import Leaderboard, rank_ties, track_title
from xaibench.publish.shapes import Curve, Example, Explained, JsonObject, MetricSummary, Provenance
from xaibench.site import charts
from xaibench.site.submitted import Submitted
from xaibench.site.views.cells import (
    Cell,
    FamilyNote,
    cell,
    explainer_flags,
    families_on,
    family_notes,
    metric_column,
    metric_label,
)
from xaibench.site.views.provenance import ExplainedClass, explained_class
from xaibench.site.views.tokens import TokenView, is_text_example, token_views

CURVE_LABELS = {
    "deletion": ("fraction of pixels removed (most salient first)", "p(target class)"),
    "insertion": ("fraction of pixels inserted (most salient first)", "p(target class)"),
    "model_randomisation": (
        "fraction of parameter blocks randomised (output first)",
        "Spearman of |E| with the original",
    ),
}
MAX_OTHER_LINES = 8
"""Up to this many other explainers, each is drawn as a grey line under the page's curve; beyond,
they are summarised as one grey median line with its 10th to 90th percentile band
(:func:`others_envelope`)."""
CURVE_Y_RANGE = {"model_randomisation": (-1.0, 1.0)}  # a correlation; the others are probabilities in [0, 1]


class MetricView(TypedDict):
    id: str
    family: str | None
    direction: str | None
    ranking: bool
    label: str
    family_note: str
    cell: Cell
    of: int
    """How many explainers have a rank on this metric on the track."""
    na_reasons: dict[str, int]
    params: JsonObject
    version: str | None
    histogram: Markup
    histogram_bounds: tuple[float, float] | None
    """The histogram's first and last edge (its shared frame: :func:`chart_frames`); None without one."""


class ShownExample(Example, total=False):
    src: str | None
    """The overlay's site-relative path, None when it is missing or could not be verified."""
    highlight: list[TokenView] | None
    """A text example's tokens as drawn (:func:`xaibench.site.views.tokens.token_views`); None otherwise."""


class CurveView(TypedDict):
    metric: str
    n: int | None
    others: int
    summarised: bool
    """The others drawn as one median line and band (more than :data:`MAX_OTHER_LINES`)."""
    x_label: str
    y_label: str
    svg: Markup


class ExplainerTrack(TypedDict):
    name: str
    title: str
    provenance: Provenance
    explained_class: list[ExplainedClass]
    """Where the explained classes came from, as the records say."""
    warnings: list[str]
    """Warnings about the track's numbers (a model at chance)."""
    explained: Explained
    explain_seconds: float | None
    overall: Cell
    families: list[tuple[str, Cell]]
    not_ranked: list[FamilyNote]
    flags: list[str]
    not_applicable: str | None
    """Why the explainer applies to no sample of the track (:func:`~xaibench.publish.applicable.not_applicable`),
    said once in place of the track's examples, curves and metrics (then left empty); None otherwise."""
    metrics: list[MetricView]
    examples: list[ShownExample]
    text_examples: bool
    """The examples are text ones, drawn as highlighted tokens (:mod:`xaibench.site.views.tokens`)."""
    curves: list[CurveView]


def explainer_tracks(sub: Submitted, board: Leaderboard, by_key: Mapping[str, Submitted]) -> list[ExplainerTrack]:
    """What ``sub``'s page shows of each of its tracks."""
    out: list[ExplainerTrack] = []
    for track_name in sorted(sub.data["tracks"]):
        track = sub.data["tracks"][track_name]
        reason = not_applicable(track)
        track_rows = [r for r in board.rows if r["track"] == track_name]
        metric_rows = [r for r in track_rows if not r["metric"].startswith("rank:")]
        rows = {r["metric"]: r for r in track_rows if r["explainer"] == sub.key}
        n_ranked = {m: sum(1 for r in track_rows if r["metric"] == m and r["rank"] is not None) for m in rows}
        ties = rank_ties(track_rows)
        fam_info = families_on(board, track_name)
        flags = explainer_flags(board, sub.key, track_name)
        metrics: list[MetricView] = []
        shown_metrics = {} if reason else track.get("metrics", {})  # not applicable: nothing of it is drawn
        for metric_id in sorted(shown_metrics, key=lambda m: family_order(track["metrics"][m], m)):
            m = track["metrics"][metric_id]
            hist = m.get("histogram") if isinstance(m.get("histogram"), dict) else None
            known = metric_id in {r["metric"] for r in metric_rows}
            meta = metric_column(board, metric_rows, metric_id, fam_info) if known else None
            label = (meta["label"] if meta else "") or metric_label(board, [], metric_id)
            family_note = meta["family_note"] if meta else ""
            shown = f"{metric_id} ({label})" if label else metric_id
            metrics.append(
                {
                    "id": metric_id,
                    "family": m.get("family"),
                    "direction": m.get("direction"),
                    "ranking": m.get("ranking") is True,
                    "label": label,
                    "family_note": family_note,
                    "cell": cell(rows.get(metric_id), ties, column_status=family_note),
                    "of": n_ranked.get(metric_id, 0),
                    "na_reasons": m["na_reasons"] if isinstance(m.get("na_reasons"), dict) else {},
                    "params": m.get("params", {}),
                    "version": m.get("version"),
                    "histogram": charts.histogram_chart(
                        hist.get("edges", []),
                        hist.get("counts", []),
                        title=f"{shown}: distribution of per-sample values",
                        mean=rows[metric_id]["value"] if metric_id in rows else None,
                        shared_frame=True,
                    )
                    if hist
                    else Markup(""),
                    "histogram_bounds": _bounds(hist),
                }
            )
        examples: list[ShownExample] = []
        for k, ex in enumerate([] if reason else track.get("examples", [])):
            examples.append({**ex, "src": sub.overlays.get((track_name, k)), "highlight": token_views(ex)})
        present = {str(m.get("family")) for m in track.get("metrics", {}).values() if isinstance(m, dict)}
        families = [
            (f, cell(rows.get(f"rank:{f}"), ties, hide_flags=tuple(flags)))
            for f in (p.name for p in POLICIES if p.ranked_within)
            if f"rank:{f}" in rows and (f not in fam_info or fam_info[f]["ranked"])
        ]
        out.append(
            {
                "name": track_name,
                "title": track_title(board, track_name),
                "provenance": track.get("provenance", {}),
                "explained_class": explained_class(track.get("provenance", {})),
                "warnings": list(board.warnings.get(track_name, [])),
                "explained": track.get("explained", {}),
                "explain_seconds": track.get("explain_seconds"),
                "overall": cell(rows.get("rank:overall"), ties, hide_flags=tuple(flags)),
                "families": families,
                "not_ranked": family_notes(fam_info, present),
                "flags": flags,
                "not_applicable": reason,
                "metrics": metrics,
                "examples": examples,
                "text_examples": any(is_text_example(ex) for ex in examples),
                "curves": [] if reason else curves(sub, track_name, by_key),
            }
        )
    return out


def family_order(m: object, metric_id: str) -> tuple[int, int, str]:
    """A metric's place on the page: its family, ranking metrics first, then its id."""
    fam = m.get("family") if isinstance(m, dict) else None
    ranking = isinstance(m, dict) and m.get("ranking") is True
    return (family_index(str(fam)), 0 if ranking else 1, metric_id)


def curve_of(sub: Submitted, track: str, metric: str) -> Curve | None:
    """``sub``'s mean curve of ``metric`` on ``track``, None when it has none of at least two points."""
    m: MetricSummary = sub.data["tracks"].get(track, {}).get("metrics", {}).get(metric, {})
    curve = m.get("curve") if isinstance(m, dict) else None
    if not isinstance(curve, dict):
        return None
    x, y = curve.get("fraction"), curve.get("mean")
    if not isinstance(x, list) or not isinstance(y, list) or len(x) != len(y) or len(x) < 2:
        return None
    return curve


def others_envelope(others: Sequence[charts.Series], x: Sequence[float]) -> charts.Series:
    """The other explainers' mean curves as one grey series: at each ``x`` (the page's explainer's
    grid; each curve interpolated onto it), their median, with the 10th to 90th percentile as its
    band. A page's size then grows with the board's explainers once, not once per pair."""
    grid = np.asarray(x, dtype=float)
    ys = np.stack([np.interp(grid, np.asarray(o.x, dtype=float), np.asarray(o.y, dtype=float)) for o in others])
    low, median, high = np.percentile(ys, [10, 50, 90], axis=0)
    return charts.Series(
        f"the {len(others)} other explainers: median",
        list(grid),
        list(median),
        low=list(low),
        high=list(high),
        band_label="10th to 90th percentile",
    )


def curves(sub: Submitted, track: str, by_key: Mapping[str, Submitted]) -> list[CurveView]:
    """Each of ``sub``'s mean curves on ``track``, drawn over the other submissions' curves."""
    out: list[CurveView] = []
    metrics = sorted(sub.data["tracks"][track].get("metrics", {}))
    for metric in metrics:
        mine = curve_of(sub, track, metric)
        if mine is None:
            continue
        others = [
            charts.Series(other.name, c["fraction"], c["mean"])
            for other in by_key.values()
            if other is not sub and (c := curve_of(other, track, metric)) is not None
        ]
        series = [*others] if len(others) <= MAX_OTHER_LINES else [others_envelope(others, mine["fraction"])]
        low, high = mine.get("q25"), mine.get("q75")
        band = isinstance(low, list) and isinstance(high, list) and len(low) == len(high) == len(mine["fraction"])
        series.append(
            charts.Series(
                sub.name,
                mine["fraction"],
                mine["mean"],
                main=True,
                low=low if band else None,
                high=high if band else None,
            )
        )
        x_label, y_label = CURVE_LABELS.get(metric, ("fraction", "value"))
        out.append(
            {
                "metric": metric,
                "n": mine.get("n"),
                "others": len(others),
                "summarised": len(others) > MAX_OTHER_LINES,
                "x_label": x_label,
                "y_label": y_label,
                "svg": charts.curve_chart(
                    series,
                    title=f"{metric} curve on {track}",
                    x_label=x_label,
                    y_label=y_label,
                    y_range=CURVE_Y_RANGE.get(metric, (0.0, 1.0)),
                    shared_frame=True,
                ),
            }
        )
    return out


def _bounds(hist: Mapping[str, object] | None) -> tuple[float, float] | None:
    edges = hist.get("edges") if hist else None
    return (float(edges[0]), float(edges[-1])) if isinstance(edges, list) and len(edges) > 1 else None


def chart_frames(tracks: Sequence[ExplainerTrack]) -> Markup:
    """The frames the page's curves and histograms refer to (:func:`~xaibench.site.charts.shared_frames`), once."""
    return charts.shared_frames(
        (CURVE_Y_RANGE.get(c["metric"], (0.0, 1.0)) for t in tracks for c in t["curves"]),
        {b for t in tracks for m in t["metrics"] if m["histogram"] and (b := m["histogram_bounds"]) is not None},
    )
