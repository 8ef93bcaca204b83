"""Leaderboard files: tidy CSV, JSON with provenance, and a Markdown/rich view per track."""

from __future__ import annotations

import csv
import html
import io
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from xaibench.api import RANKED_FAMILIES as FAMILIES
from xaibench.files import write_json_atomic, write_text_atomic
from xaibench.publish.leaderboard import ROW_COLUMNS, entries_from_submissions, leaderboard_rows
from xaibench.publish.submission import load_submissions

LEADERBOARD_SCHEMA = "xaibench.leaderboard/1"
DIRECTION_WORDS = {"higher": "higher is better", "lower": "lower is better"}


@dataclass
class Leaderboard:
    rows: list[dict[str, Any]]
    tracks: dict[str, dict[str, Any]] = field(default_factory=dict)
    explainers: dict[str, dict[str, Any]] = field(default_factory=dict)
    ranking_metrics: dict[str, set[str]] = field(default_factory=dict)
    metric_labels: dict[str, str] = field(default_factory=dict)

    def track_names(self) -> list[str]:
        return sorted({r["track"] for r in self.rows})


def build_leaderboard(submissions_dir: Path) -> Leaderboard:
    subs = load_submissions(submissions_dir)
    entries = entries_from_submissions(subs)
    board = Leaderboard(rows=leaderboard_rows(entries))
    for e in entries:
        if e.ranking:
            board.ranking_metrics.setdefault(e.track, set()).add(e.metric)
    for path, sub in subs:
        board.explainers[path.stem] = {
            "file": path.name,
            "explainer": sub["explainer"],
            "disclosure": sub.get("disclosure", {}),
            "environment": sub.get("environment", {}),
            "plugins": sub.get("plugins", []),
            "seed": sub.get("seed"),
            "created": sub.get("created"),
        }
        for name, track in sub["tracks"].items():
            board.tracks.setdefault(name, track.get("provenance", {}))
            for metric_id, m in track.get("metrics", {}).items():
                label = (m.get("params") or {}).get("label")
                if isinstance(label, str):  # e.g. "PASTA (proxy, technique-level labels)"
                    board.metric_labels[metric_id] = label
    return board


def write_leaderboard(board: Leaderboard, out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "leaderboard.csv", out_dir / "leaderboard.json", out_dir / "leaderboard.md"]
    write_text_atomic(paths[0], to_csv(board.rows))
    write_json_atomic(
        paths[1],
        {"schema": LEADERBOARD_SCHEMA, "rows": board.rows, "tracks": board.tracks, "explainers": board.explainers},
    )
    write_text_atomic(paths[2], to_markdown(board))
    return paths


def to_csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(ROW_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if row.get(k) is None else row[k] for k in ROW_COLUMNS})
    return buf.getvalue()


def _fmt(value: float | None, low: float | None = None, high: float | None = None) -> str:
    if value is None:
        return "n/a"
    text = f"{value:.3f}"
    if low is not None and high is not None:
        text += f" [{low:.3f}, {high:.3f}]"
    return text


def track_table(board: Leaderboard, track: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows of a track's view: ranks, then the ranking metrics with intervals."""
    rows = [r for r in board.rows if r["track"] == track]
    by_explainer: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for r in rows:
        by_explainer[r["explainer"]][r["metric"]] = r
    ranking_metrics = sorted(
        board.ranking_metrics.get(track, set()),
        key=lambda m: (FAMILIES.index(_family(rows, m)) if _family(rows, m) in FAMILIES else 9, m),
    )
    families = [f for f in FAMILIES if any(r["metric"] == f"rank:{f}" for r in rows)]
    header = ["rank", "explainer", *[f"{f} rank" for f in families]]
    for m in ranking_metrics:
        direction = next(r["direction"] for r in rows if r["metric"] == m)
        label = f" [{board.metric_labels[m]}]" if m in board.metric_labels else ""
        header.append(f"{m}{label} ({DIRECTION_WORDS.get(direction, direction)})")
    body = []
    order = sorted(by_explainer, key=lambda x: (by_explainer[x].get("rank:overall", {}).get("rank") or 10**6, x))
    for x in order:
        cells = by_explainer[x]
        overall = cells.get("rank:overall", {}).get("rank")
        flags = board.explainers.get(x, {}).get("disclosure", {})
        name = x + (" (reference, not a method)" if flags.get("reference_only") else "")
        name += " (tuned on benchmark)" if flags.get("tuned_on_benchmark") else ""
        line = ["" if overall is None else str(overall), name]
        for f in families:
            c = cells.get(f"rank:{f}")
            line.append("" if not c else f"{c['rank']} ({c['value']:.2f})")
        for m in ranking_metrics:
            c = cells.get(m)
            if not c:
                line.append("")
                continue
            text = _fmt(c["value"], c["ci_low"], c["ci_high"])
            if c.get("n_na"):
                text += f" n/a:{c['n_na']}"
            tie = sum(1 for y in by_explainer.values() if y.get(m, {}).get("rank") == c["rank"] and c["rank"])
            line.append(f"#{c['rank']}{'=' if tie > 1 else ''} {text}" if c["rank"] else text)
        body.append(line)
    return header, body


def _family(rows: list[dict[str, Any]], metric: str) -> str:
    return next(r["family"] for r in rows if r["metric"] == metric)


def track_title(board: Leaderboard, track: str) -> str:
    prov = board.tracks.get(track, {})
    model = prov.get("model", {}).get("name", "?")
    dataset = prov.get("dataset", {}).get("name", "?")
    synthetic = " · synthetic" if prov.get("synthetic") else ""
    return f"{track}: {dataset} x {model} ({prov.get('n_samples', '?')} samples{synthetic})"


def to_markdown(board: Leaderboard) -> str:
    lines = [
        "# xaibench leaderboard",
        "",
        "Ranks are per track and direction-aware; an explainer whose mean lies inside the 95 % bootstrap",
        "interval of the explainer ranked above it shares its rank (shown as `#k=`). Family rank = mean rank",
        "over the family's ranking metrics; overall = mean over families. Cells: mean [95 % interval].",
        "",
    ]
    for track in board.track_names():
        header, body = track_table(board, track)
        lines += [f"## {track_title(board, track)}", ""]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in body]
        lines.append("")
    return "\n".join(lines)


def _md_cell(text: str) -> str:
    """Submitted strings are data: HTML-escaped and pipe-escaped in Markdown."""
    return html.escape(text).replace("|", "\\|")


def print_leaderboard(board: Leaderboard, console: Console | None = None) -> None:
    console = console or Console()
    for track in board.track_names():
        header, body = track_table(board, track)
        table = Table(title=escape(track_title(board, track)), show_lines=False, title_justify="left")
        for h in header:
            table.add_column(escape(h), overflow="fold")
        for row in body:
            table.add_row(*(escape(c) for c in row))
        console.print(table)
