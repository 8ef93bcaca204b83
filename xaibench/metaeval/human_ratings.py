"""Human ratings against metrics: the correlations page's section on the PASTA paper's tables.

Three views, all from the shared ``pasta-paper/`` tables (:mod:`xaibench.pasta.paper_tables`):

1. **Each classic metric against each human rating, across techniques.** One point per
   (technique, backbone) row that has both the ratings and the metrics (the paper's saliency
   rows); Spearman's rho (average ranks for ties, equal to ``scipy.stats.spearmanr``) and, for
   fidelity, Pearson's r next to the paper's own figure (Table 1, as the folder's README records
   it). Values are **raw**, not oriented: MaxSensitivity is higher-is-worse and robustness
   (Q5, Q6) lower-is-better, so agreement shows there as a negative rho.
2. The same against fidelity (Q1) **within each backbone**.
3. **Our metrics on our tracks for the same techniques.** A table technique maps to an xaibench
   explainer (:data:`xaibench.pasta.training.data.SALIENCY_TECHNIQUES` and
   ``CONCEPT_TECHNIQUES``, plus :data:`TECHNIQUE_ALIASES`); each mapped explainer submitted on a
   track is one point, at its technique's human Q1 averaged over the paper's backbones. Per
   metric on the track: rho of our means with that Q1 over the mapped techniques (several
   submissions of one technique are averaged first), next to the rho the paper's own metric gives
   on the same techniques (its values averaged over backbones).

Fewer than :data:`~xaibench.metaeval.correlations.MIN_EXPLAINERS` points, or a constant side, is n/a.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypedDict

import numpy as np

from xaibench.errors import XaibenchError
from xaibench.metaeval.correlations import MIN_EXPLAINERS, PERCEPTUAL_REFERENCE, spearman
from xaibench.pasta.paper_tables import (
    DATA_DIR_ENV,
    HUMAN_COLUMNS,
    PAPER_DIR_ENV,
    PAPER_FOLDER,
    PAPER_METRICS,
    PaperTables,
    TechniqueRow,
    find_paper_dir,
    load_paper_tables,
)
from xaibench.pasta.training.data import CONCEPT_TECHNIQUES, SALIENCY_TECHNIQUES
from xaibench.publish.shapes import BoardRow

FIDELITY = "fidelity_q1"
TECHNIQUE_ALIASES: dict[str, str] = {
    "RISE": "rise",
    "IntegratedGradients": "integrated-gradients",
    "Integrated Gradients": "integrated-gradients",
    "GradCAM++": "gradcampp",
}
"""Technique spellings the table may use that the training maps do not list."""


class HumanColumn(TypedDict):
    column: str
    label: str
    direction: str


class AgainstHumans(TypedDict):
    """One paper metric against every human rating, across the paper's techniques."""

    label: str
    metric: str
    direction: str
    rho: dict[str, float | None]
    """Human column -> Spearman rho (raw values, not oriented)."""
    pearson_q1: float | None
    n: int
    paper: dict[str, float]
    """The paper's own figures (Table 1) for ROAD faithfulness, else empty."""


class BackboneMetric(TypedDict):
    label: str
    metric: str
    rho: list[float | None]
    """Rho with fidelity (Q1) in each backbone of :attr:`ByBackbone.names`."""


class ByBackbone(TypedDict):
    names: list[tuple[str, int]]
    """The backbones with at least three rows, with their row counts."""
    left_out: list[tuple[str, int]]
    metrics: list[BackboneMetric]


class FigureRow(TypedDict):
    technique: str
    backbone: str
    type: str
    human: list[float | None]
    metrics: list[tuple[float, float] | None]
    explainer: str
    note: str


class TrackEntry(TypedDict):
    technique: str
    explainer: str
    q1: float
    cells: list[float | None]


class VersusQ1(TypedDict):
    """One of our metrics on a track against human Q1, beside the paper's metric on the same techniques."""

    metric: str
    family: str
    direction: str
    rho: float | None
    n: int
    paper_rho: float | None
    paper_n: int


class TrackVersusHumans(TypedDict):
    name: str
    shown: list[str]
    entries: list[TrackEntry]
    versus: list[VersusQ1]


class HumanRatings(TypedDict, total=False):
    """The section: ``available`` and ``line`` when the tables are missing, else everything else."""

    available: bool
    line: str
    digests: list[tuple[str, str]]
    table1: dict[str, float]
    humans: list[HumanColumn]
    against: list[AgainstHumans]
    backbones: ByBackbone
    rows: list[FigureRow]
    tracks: list[TrackVersusHumans]


MISSING_LINE = (
    f"n/a: the PASTA paper tables ({PAPER_FOLDER}/) were not found; set {DATA_DIR_ENV} to the folder that holds "
    f"{PAPER_FOLDER}/ (e.g. xaibench run --data-dir ../shared/data) or {PAPER_DIR_ENV} to the folder itself, "
    "then rebuild the site."
)


def technique_explainers() -> dict[str, str]:
    """Table technique -> xaibench explainer name."""
    return {**SALIENCY_TECHNIQUES, **CONCEPT_TECHNIQUES, **TECHNIQUE_ALIASES}


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson's r; ``None`` when undefined (fewer than three points or a constant side)."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.shape != b.shape or a.size < MIN_EXPLAINERS:
        return None
    a, b = a - a.mean(), b - b.mean()
    denom = float(np.sqrt((a * a).sum() * (b * b).sum()))
    return None if denom == 0.0 else float(np.clip((a * b).sum() / denom, -1.0, 1.0))


def human_ratings_section(
    board_rows: Sequence[BoardRow],
    explainer_names: Mapping[str, tuple[str, str]],
    paper_dir: Path | None = None,
) -> HumanRatings:
    """The section's view; ``{"available": False, "line": ...}`` when the tables are not found.

    ``board_rows``: the leaderboard's tidy rows; ``explainer_names``: board explainer key ->
    (the explainer's registered name, the name the site shows). ``paper_dir``: the ``pasta-paper``
    folder (an error when it does not hold the tables); ``None`` finds it from the environment,
    where a folder that cannot be read gives the one line naming the problem instead of an error.
    """
    if paper_dir is not None:
        tables = load_paper_tables(paper_dir)
    else:
        try:
            found = find_paper_dir()
            if found is None:
                return {"available": False, "line": MISSING_LINE}
            tables = load_paper_tables(found)
        except XaibenchError as exc:
            return {"available": False, "line": f"n/a: the PASTA paper tables could not be read: {exc}"}
    mapping = technique_explainers()
    means = technique_means(tables)
    return {
        "available": True,
        "digests": sorted(tables.digests.items()),
        "table1": tables.table1,
        "humans": [{"column": c, "label": label, "direction": d} for c, (label, d) in HUMAN_COLUMNS.items()],
        "against": against_humans(tables),
        "backbones": by_backbone(tables),
        "rows": [_figure_row(r, mapping.get(r.technique, "")) for r in tables.rows],
        "tracks": [
            track_view(board_rows, track, explainer_names, means, mapping)
            for track in sorted({str(r["track"]) for r in board_rows})
        ],
    }


def against_humans(tables: PaperTables) -> list[AgainstHumans]:
    """Per paper metric: rho with every human column across the joined rows, n, and r with fidelity."""
    rows = tables.joined()
    out: list[AgainstHumans] = []
    for m in PAPER_METRICS:
        x = [r.metrics[m.column][0] for r in rows]
        out.append(
            {
                "label": m.label,
                "metric": m.metric,
                "direction": m.direction,
                "rho": {c: spearman(x, [r.human[c] for r in rows]) for c in HUMAN_COLUMNS},
                "pearson_q1": pearson(x, [r.human[FIDELITY] for r in rows]),
                "n": len(rows),
                "paper": tables.table1 if m.metric == "road_faithfulness" else {},
            }
        )
    return out


def by_backbone(tables: PaperTables) -> ByBackbone:
    """Rho of each paper metric with fidelity (Q1) within each backbone with at least three rows with both."""
    groups: dict[str, list[TechniqueRow]] = defaultdict(list)
    for r in tables.joined():
        groups[r.backbone].append(r)
    names = [b for b in groups if len(groups[b]) >= MIN_EXPLAINERS]
    return {
        "names": [(b, len(groups[b])) for b in names],
        "left_out": [(b, len(groups[b])) for b in groups if b not in names],
        "metrics": [
            {
                "label": m.label,
                "metric": m.metric,
                "rho": [
                    spearman([r.metrics[m.column][0] for r in groups[b]], [r.human[FIDELITY] for r in groups[b]])
                    for b in names
                ],
            }
            for m in PAPER_METRICS
        ],
    }


def technique_means(tables: PaperTables) -> dict[str, dict[str, float]]:
    """technique -> {human column or paper metric id -> mean over the backbones that have it}."""
    acc: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in tables.rows:
        for c, v in r.human.items():
            acc[r.technique][c].append(v)
        for m in PAPER_METRICS:
            if m.column in r.metrics:
                acc[r.technique][m.metric].append(r.metrics[m.column][0])
    return {t: {k: float(np.mean(v)) for k, v in cols.items()} for t, cols in acc.items()}


def track_view(
    board_rows: Sequence[BoardRow],
    track: str,
    explainer_names: Mapping[str, tuple[str, str]],
    means: Mapping[str, Mapping[str, float]],
    mapping: Mapping[str, str],
) -> TrackVersusHumans:
    """Our means on ``track`` for the explainers that map to a table technique, and their rho with human Q1
    (``means``: :func:`technique_means` of the paper tables)."""
    technique_of = {e: t for t, e in mapping.items() if t in means and FIDELITY in means[t]}
    values: dict[str, dict[str, float]] = defaultdict(dict)  # key -> metric -> mean
    meta: dict[str, tuple[str, str]] = {}  # metric -> (family, direction)
    for r in board_rows:
        if r["track"] != track or str(r["metric"]).startswith("rank:") or r["value"] is None:
            continue
        key = str(r["explainer"])
        if explainer_names.get(key, ("", ""))[0] in technique_of:
            values[key][str(r["metric"])] = float(r["value"])
            meta[str(r["metric"])] = (str(r["family"]), str(r["direction"]))
    keys = sorted(values, key=lambda k: (technique_of[explainer_names[k][0]], explainer_names[k][1], k))
    paper_ids = [m.metric for m in PAPER_METRICS]
    shown = [m for m in (*paper_ids, PERCEPTUAL_REFERENCE) if m in meta]
    entries: list[TrackEntry] = [
        {
            "technique": technique_of[explainer_names[k][0]],
            "explainer": explainer_names[k][1],
            "q1": means[technique_of[explainer_names[k][0]]][FIDELITY],
            "cells": [values[k].get(m) for m in shown],
        }
        for k in keys
    ]
    per_technique: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for k in keys:
        for metric, v in values[k].items():
            per_technique[metric][technique_of[explainer_names[k][0]]].append(v)
    order = sorted(meta, key=lambda m: (paper_ids.index(m) if m in paper_ids else len(paper_ids), meta[m][0], m))
    versus: list[VersusQ1] = []
    for metric in order:
        techniques = sorted(per_technique[metric])
        ours = [float(np.mean(per_technique[metric][t])) for t in techniques]
        q1 = [means[t][FIDELITY] for t in techniques]
        row: VersusQ1 = {
            "metric": metric,
            "family": meta[metric][0],
            "direction": meta[metric][1],
            "rho": spearman(ours, q1),
            "n": len(techniques),
            "paper_rho": None,
            "paper_n": 0,
        }
        if metric in paper_ids:
            with_paper = [t for t in techniques if metric in means[t]]
            row["paper_rho"] = spearman(
                [means[t][metric] for t in with_paper], [means[t][FIDELITY] for t in with_paper]
            )
            row["paper_n"] = len(with_paper)
        versus.append(row)
    return {"name": track, "shown": shown, "entries": entries, "versus": versus}


def _figure_row(r: TechniqueRow, explainer: str) -> FigureRow:
    return {
        "technique": r.technique,
        "backbone": r.backbone,
        "type": r.explanation_type,
        "human": [r.human.get(c) for c in HUMAN_COLUMNS],
        "metrics": [r.metrics.get(m.column) for m in PAPER_METRICS],
        "explainer": explainer,
        "note": r.note,
    }
