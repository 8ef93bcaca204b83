"""Leaderboard files: tidy CSV, JSON with provenance and rules, and a Markdown/rich view per track.

Every string that comes from a submission (names, tracks, datasets, models, metric ids, labels,
reasons, notes, flags) is escaped in the Markdown (:func:`md_escape`: HTML-escaped, Markdown
punctuation backslash-escaped, control characters made visible) and in the terminal
(:func:`term_text`: a plain ``rich`` ``Text``, so no markup or emoji code is read, with control
characters made visible), so no link, image, raw HTML, heading or terminal escape can form.
The command line prints every plugin's string through :func:`term_line`, :func:`term_text` or
:func:`term_markup` too (error and warning lines, ``xaibench list`` tables).
"""

from __future__ import annotations

import unicodedata
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from xaibench.families import POLICIES, family_index, policy_of
from xaibench.files import csv_text, dumps_readable, write_text_atomic
from xaibench.publish.applicable import said_once
from xaibench.publish.board import (
    CLAIMED_FAILED,
    CLAIMED_VERIFIED,
    Leaderboard,
    board_json,
    label_of,
    rank_ties,
    track_title,
)
from xaibench.publish.leaderboard import CSV_COLUMNS, SANITY_METRIC
from xaibench.publish.shapes import BoardRow

DIRECTION_WORDS = {"higher": "higher is better", "lower": "lower is better"}
LEGEND = (
    "Ranks are per track and direction-aware, from paired comparisons: two explainers are compared on the "
    "samples where both have a value (at least {min_shared} shared samples; below that a cell shows "
    '"too few samples (n = k)"), and they tie (`#k=`) when the 95 % paired bootstrap interval of the '
    "mean difference contains 0. Rank = 1 + the number of explainers that beat it. Family rank = "
    "mean rank over the family's ranking metrics; overall = mean over the ranked families only "
    "(alignment, faithfulness, perceptual; the robustness family is ranked within itself, outside it). "
    "The perceptual family is ranked only with a valid checkpoint (labelled PASTA, or held-out Q1 "
    'Spearman >= {min_rho}); otherwise it is shown, labelled and marked "not ranked". The sanity '
    'family is never ranked: a model_randomisation mean above {sanity} flags "insensitive to the '
    'model". Cells: mean [95 % interval]; more than {na_pct} % n/a is flagged.'
)


LEADERBOARD_FILES = ("leaderboard.csv", "leaderboard.json", "leaderboard.md")
"""The leaderboard files, in the order they are written."""


def leaderboard_texts(board: Leaderboard) -> dict[str, str]:
    """File name -> text of each of :data:`LEADERBOARD_FILES`."""
    texts = [to_csv(board.rows), to_json(board), to_markdown(board)]
    return dict(zip(LEADERBOARD_FILES, texts, strict=True))


def write_leaderboard(board: Leaderboard, out_dir: Path) -> list[Path]:
    """Write leaderboard.csv, leaderboard.json and leaderboard.md into ``out_dir`` (each
    atomically, one after the other; :func:`xaibench.site.board_folder.publish_board_folder`
    writes them and the site as one folder)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, text in leaderboard_texts(board).items():
        write_text_atomic(out_dir / name, text)
    return [out_dir / name for name in LEADERBOARD_FILES]


def to_json(board: Leaderboard) -> str:
    """``leaderboard.json``'s text: indented by 2, each row (and each other object of scalars) on
    one line (:func:`xaibench.files.dumps_readable` with ``flat_objects``), a final newline."""
    return dumps_readable(board_json(board), flat_objects=True) + "\n"


def to_csv(rows: Sequence[BoardRow]) -> str:
    """Tidy CSV: the 11 DESIGN columns, then status, label, flags."""
    return csv_text(CSV_COLUMNS, rows)


# ----------------------------------------------------------------------------- escaping


def visible(text: str) -> str:
    """Control and format characters (ESC, newlines, bidi overrides...) as visible escapes."""
    out = []
    for ch in text:
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(ch)
    return "".join(out)


_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}
_MARKDOWN = frozenset("\\`*_[]!|#~")
"""Backslash-escaped in Markdown. Parentheses are left as they are: with ``[``, ``]`` and ``!``
escaped no link or image can form, and labels such as "PASTA (proxy, ...)" stay readable."""


def md_escape(text: str) -> str:
    """Text for Markdown (a table cell or a heading): control characters made visible, HTML
    escaped (entities, so no tag or autolink forms), Markdown punctuation backslash-escaped (no
    link, image, emphasis, code or heading), and a leading ``-``/``+`` escaped (no list)."""
    out = []
    for i, ch in enumerate(visible(str(text))):
        if ch in _HTML:
            out.append(_HTML[ch])
        elif ch in _MARKDOWN or (i == 0 and ch in "-+"):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def term_text(text: str, style: str = "") -> Text:
    """A rich ``Text`` shown as is (no markup, no emoji codes), control characters made visible."""
    return Text(visible(str(text)), style=style)


def term_line(text: object) -> str:
    """``text`` for a terminal where nothing reads markup (``click.echo``, ``console.print(...,
    markup=False)``): control and format characters made visible (:func:`visible`), so an escape
    sequence, carriage return or newline in a plugin's words cannot rewrite or forge a line. The
    one escaping of plugin text on its way to the terminal, with :func:`term_text` (a rich cell)
    and :func:`term_markup`."""
    return visible(str(text))


def term_markup(text: object) -> str:
    """``text`` for a place where rich reads markup: :func:`term_line`, then ``[`` escaped
    (``rich.markup.escape``), so ``[red]`` or ``[link=...]`` shows as typed."""
    return escape(term_line(text))


# ----------------------------------------------------------------------------- tables


def _fmt(value: float | None, low: float | None = None, high: float | None = None) -> str:
    if value is None:
        return "n/a"
    text = f"{value:.3f}"
    if low is not None and high is not None:
        text += f" [{low:.3f}, {high:.3f}]"
    return text


def _uniform_status(rows: Sequence[BoardRow]) -> str:
    """The status every row shares when it is a "not ranked" one (shown once, in the header)."""
    statuses = {r.get("status", "") for r in rows}
    only = next(iter(statuses)) if len(statuses) == 1 else ""
    return only if only.startswith("not ranked") else ""


def track_table(board: Leaderboard, track: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows of a track's view (plain text, not yet escaped): the overall rank, the
    explainer with its flags, family ranks, the ranking metrics, then the sanity metrics."""
    rows = [r for r in board.rows if r["track"] == track]
    by_explainer: dict[str, dict[str, BoardRow]] = defaultdict(dict)
    by_metric: dict[str, list[BoardRow]] = defaultdict(list)
    for r in rows:
        by_explainer[r["explainer"]][r["metric"]] = r
        by_metric[r["metric"]].append(r)

    def family_of(m: str) -> str:
        return str(by_metric[m][0]["family"])

    def order(m: str) -> tuple[int, str]:
        return (family_index(family_of(m)), m)

    shown = [m for m in board.ranking_metrics.get(track, set()) if m in by_metric]
    shown += [
        m
        for m in by_metric
        if m == SANITY_METRIC or (not m.startswith("rank:") and policy_of(family_of(m)).flags_explainers)
    ]
    metrics = sorted(set(shown), key=order)
    states = board.families.get(track, {})
    families = [p.name for p in POLICIES if p.ranked_within and f"rank:{p.name}" in by_metric]
    header = ["overall rank", "explainer"]
    family_notes: dict[str, str] = {}
    for f in families:
        state = states.get(f, {})
        label = f" [{state['label']}]" if state.get("label") else ""
        if state.get("ranked", True):
            header.append(f"{f} rank{label}")
        else:
            reason = state.get("reason") or "not ranked"
            family_notes[f] = reason if reason.startswith("not ranked") else f"not ranked: {reason}"
            header.append(f"{f} ({family_notes[f]}){label}")
    metric_notes: dict[str, str] = {}
    for m in metrics:
        first = by_metric[m][0]
        label = f" [{board.metric_labels[m]}]" if m in board.metric_labels else ""
        words = DIRECTION_WORDS.get(first["direction"], first["direction"])
        metric_notes[m] = _uniform_status(by_metric[m])
        note = f"; {metric_notes[m]}" if metric_notes[m] else ""
        header.append(f"{m}{label} ({words}{note})")

    ties = rank_ties(rows)
    body = []
    away = board.away(track)
    order_x = sorted(
        (x for x in by_explainer if x not in away),
        key=lambda x: (by_explainer[x].get("rank:overall", {}).get("rank") or 10**6, x),
    )
    for x in order_x:
        cells = by_explainer[x]
        info = board.explainers.get(x, {})
        disclosure = info.get("disclosure", {}) if isinstance(info.get("disclosure"), dict) else {}
        name = label_of(board, x) + (" (reference, not a method)" if disclosure.get("reference_only") else "")
        name += " (tuned on benchmark)" if disclosure.get("tuned_on_benchmark") else ""
        verification = info.get("verification")
        if isinstance(verification, dict) and verification.get("passed") is True:
            name += " (verified)"
        elif (claim := _claim(info)) is not None:
            name += f" [{claim}]"
        for flag in (info.get("flags") or {}).get(track, []):
            name += f" (flag: {flag})"
        overall = cells.get("rank:overall", {})
        line = ["—" if overall.get("rank") is None else str(overall["rank"]), name]
        for f in families:
            c = cells.get(f"rank:{f}")
            if not c:
                line.append("")
            elif c["rank"] is not None:
                line.append(f"{c['rank']} ({c['value']:.2f})")
            else:
                line.append("—" if f in family_notes or not c.get("status") else c["status"])
        for m in metrics:
            c = cells.get(m)
            line.append(_metric_cell(c, ties, metric_notes[m]) if c else "")
        body.append(line)
    return header, body


def away_lines(board: Leaderboard, track: str) -> list[str]:
    """The lines under a track's table naming, once per reason, the explainers with no row there
    because they apply to none of its samples (e.g. an image-only explainer on a text track)."""
    return said_once(board.away(track), lambda key: label_of(board, key))


def _metric_cell(c: BoardRow, ties: dict[tuple[str, int], int], header_note: str) -> str:
    text = _fmt(c["value"], c["ci_low"], c["ci_high"])
    if c["rank"] is not None:
        text = f"#{c['rank']}{'=' if ties[(c['metric'], c['rank'])] > 1 else ''} {text}"
    extras = []
    if c.get("status") and c["status"] != header_note:
        extras.append(c["status"])
    if c.get("n_na"):
        extras.append(f"n/a {c['n_na']} of {c['n_na'] + (c['n'] or 0)}")
    if c.get("flags"):
        extras.append(f"flag: {c['flags']}")
    return text + (f" ({'; '.join(extras)})" if extras else "")


def summary_table(board: Leaderboard) -> tuple[list[str], list[list[str]]]:
    """Across tracks: mean win rate (HELM style; higher is better), tracks counted, overall ranks."""
    tracks = board.track_names()
    header = ["explainer", "mean win rate", "tracks", *[f"{t} rank" for t in tracks]]
    body = []
    aways = [board.away(t) for t in tracks]
    for x in board.summary.get("order", []):
        if tracks and all(x in a for a in aways):  # named under each track's table instead
            continue
        s = board.summary["explainers"][x]
        rate = "—" if s["mean_win_rate"] is None else f"{s['mean_win_rate']:.3f}"
        ranks = [str(s["overall_ranks"].get(t, "—")) for t in tracks]
        body.append([label_of(board, x), rate, str(s["tracks"]), *ranks])
    return header, body


def legend(board: Leaderboard) -> str:
    rules = board.rules
    return LEGEND.format(
        min_shared=rules["min_shared_samples"],
        min_rho=rules["perceptual_min_spearman"],
        sanity=rules["sanity_flag_above"],
        na_pct=round(100 * float(rules["na_flag_fraction"])),
    )


def _md_table(header: list[str], body: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(md_escape(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(md_escape(c) for c in row) + " |" for row in body]
    return lines


def to_markdown(board: Leaderboard) -> str:
    """leaderboard.md: legend, the cross-track summary, one table per track (under its heading,
    a ``**Warning:**`` line for each of its warnings, e.g. a model at chance), notes."""
    lines = ["# xaibench leaderboard", "", legend(board), ""]
    if board.summary.get("order"):
        lines += ["## Across tracks", "", "Mean win rate (HELM style, higher is better) over the tracks ranked.", ""]
        lines += [*_md_table(*summary_table(board)), ""]
    for track in board.track_names():
        lines += [f"## {md_escape(track_title(board, track))}", ""]
        for warning in board.warnings.get(track, []):
            lines += [f"**Warning:** {md_escape(warning)}", ""]
        lines += [*_md_table(*track_table(board, track)), ""]
        lines += [line for said in away_lines(board, track) for line in (md_escape(said), "")]
    if board.notes:
        lines += ["## Notes", ""] + [f"- {md_escape(n)}" for n in board.notes] + [""]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- compact terminal view

ARROWS = {"higher": "↑", "lower": "↓"}
COMPACT_KEY = (
    "Ranks are per track, lower is better; ↑/↓ the better direction of a metric; #k= a tie. "
    "* more in the wide view (--wide) or leaderboard.md: the 95 % interval, why a cell has no rank, its n/a share. "
    "! a flag, named under the table."
)
"""The key printed under the compact tables (the wide view prints the full legend)."""
EXPLAINER_MAX_WIDTH = 40
"""Widest the compact explainer column gets; a longer name wraps at its spaces."""


def _claim(info: object) -> str | None:
    """An explainer's ``verification_claim`` (what its file's own block claims, not checked by the
    board's builder) when it is one of the board's two texts; else ``None``."""
    claim = info.get("verification_claim") if isinstance(info, dict) else None
    return claim if claim in (CLAIMED_VERIFIED, CLAIMED_FAILED) else None


def _longest_word(text: str) -> int:
    return max((Text(w).cell_len for w in text.split()), default=0)


def _name_cell(board: Leaderboard, key: str, track: str) -> tuple[str, list[str]]:
    """The compact name of an explainer on a track (label, short disclosure marks, ``!`` when
    flagged) and its flags."""
    info = board.explainers.get(key, {})
    disclosure = info.get("disclosure", {}) if isinstance(info.get("disclosure"), dict) else {}
    name = label_of(board, key)
    name += " (reference)" if disclosure.get("reference_only") else ""
    name += " (tuned)" if disclosure.get("tuned_on_benchmark") else ""
    verification = info.get("verification")
    if isinstance(verification, dict) and verification.get("passed") is True:
        name += " (verified)"
    elif _claim(info) is not None:
        name += " (unchecked claim)"
    flags = [str(f) for f in (info.get("flags") or {}).get(track, [])]
    return name + (" !" if flags else ""), flags


def _compact_metric_cell(c: BoardRow | None, ties: dict[tuple[str, int], int], header_note: str) -> str:
    if not c:
        return ""
    text = "n/a" if c["value"] is None else f"{c['value']:.3f}"
    if c["rank"] is not None:
        text = f"#{c['rank']}{'=' if ties[(c['metric'], c['rank'])] > 1 else ''} {text}"
    more = (c.get("status") and c["status"] != header_note) or c.get("n_na") or c.get("flags")
    return text + ("*" if more else "")


def _interleave(groups: list[list[str]]) -> list[str]:
    """First of each group, then second of each... (so every family gets a column early)."""
    out: list[str] = []
    for i in range(max((len(g) for g in groups), default=0)):
        out += [g[i] for g in groups if i < len(g)]
    return out


def _column_width(header: str, cells: list[str]) -> int:
    """Width that holds every cell on one line and every header word whole."""
    return max([_longest_word(header), *(Text(c).cell_len for c in cells)])


def _table_width(widths: list[int]) -> int:
    """Cells plus one space of padding each side and a border between and around columns."""
    return sum(widths) + 3 * len(widths) + 1


def _widen_headers(headers: list[str], widths: list[int], width: int) -> list[int]:
    """Widen columns, left to right, so their header fits on one line, while the table fits ``width``."""
    out = list(widths)
    for i, h in enumerate(headers):
        extra = max(0, Text(h).cell_len - out[i])
        if extra and _table_width(out) + extra <= width:
            out[i] += extra
    return out


def compact_table(board: Leaderboard, track: str, width: int = 120) -> Table:
    """A track's short table that fits in ``width`` columns with no word broken: overall rank,
    explainer, the ranked families' ranks, then as many ranking metrics (``#rank mean``) as fit,
    taken in turn from each family. Notes under the table say what is not ranked and why, the
    flags, and which metrics are left out (:func:`track_table` has them all)."""
    rows = [r for r in board.rows if r["track"] == track]
    cells: dict[str, dict[str, BoardRow]] = defaultdict(dict)
    by_metric: dict[str, list[BoardRow]] = defaultdict(list)
    for r in rows:
        cells[r["explainer"]][r["metric"]] = r
        by_metric[r["metric"]].append(r)
    ties = rank_ties(rows)
    states = board.families.get(track, {})
    present = [p.name for p in POLICIES if p.ranked_within and f"rank:{p.name}" in by_metric]
    families = [f for f in present if states.get(f, {}).get("ranked", True)]
    notes: list[str] = []
    for f in present:
        if f not in families:
            state = states.get(f, {})
            reason = str(state.get("reason") or "")
            label = f" [{state['label']}]" if state.get("label") else ""
            notes.append(f"{f}: not ranked{': ' + reason if reason else ''}{label}")

    away = board.away(track)
    order_x = sorted(
        (x for x in cells if x not in away), key=lambda x: (cells[x].get("rank:overall", {}).get("rank") or 10**6, x)
    )
    names = {x: _name_cell(board, x, track) for x in order_x}
    columns: list[tuple[str, list[str]]] = [
        ("overall", [str(cells[x].get("rank:overall", {}).get("rank") or "—") for x in order_x]),
        ("explainer", [names[x][0] for x in order_x]),
    ]
    for f in families:
        column = []
        for x in order_x:
            c = cells[x].get(f"rank:{f}")
            column.append("" if not c else str(c["rank"]) if c["rank"] is not None else "—*")
        columns.append((f, column))

    def family_of(m: str) -> str:
        return str(by_metric[m][0]["family"])

    def order(m: str) -> tuple[int, str]:
        return (family_index(family_of(m)), m)

    ranking = sorted((m for m in board.ranking_metrics.get(track, set()) if m in by_metric), key=order)
    ranked = [m for m in ranking if family_of(m) in families]
    grouped = [sorted(m for m in ranked if family_of(m) == f) for f in dict.fromkeys(map(family_of, ranked))]
    unranked = sorted((m for m in ranking if m not in ranked), key=order)
    candidates = _interleave(grouped) + unranked
    header_notes = {m: _uniform_status(by_metric[m]) for m in candidates}
    metric_columns: dict[str, tuple[str, list[str]]] = {}
    for m in candidates:
        arrow = ARROWS.get(str(by_metric[m][0]["direction"]), "")
        metric_columns[m] = (
            f"{m} {arrow}".strip(),
            [_compact_metric_cell(cells[x].get(m), ties, header_notes[m]) for x in order_x],
        )

    widths = [_column_width(h, c) for h, c in columns]
    widths[1] = min(widths[1], EXPLAINER_MAX_WIDTH)  # a longer name wraps at its spaces
    chosen: list[str] = []
    for m in candidates:
        w = _column_width(*metric_columns[m])
        if _table_width([*widths, *(_column_width(*metric_columns[c]) for c in chosen), w]) <= width:
            chosen.append(m)
    chosen.sort(key=order)
    for m in chosen:
        if family_of(m) in families and (m in board.metric_labels or header_notes[m]):
            label = board.metric_labels.get(m, "")
            notes.append(f"{m}: " + "; ".join(t for t in (label, header_notes[m]) if t))
        columns.append(metric_columns[m])
        widths.append(_column_width(*metric_columns[m]))
    flagged: dict[str, list[str]] = defaultdict(list)
    for x in order_x:
        for flag in names[x][1]:
            flagged[flag].append(label_of(board, x))
    notes += [f"! {flag}: {', '.join(who)}" for flag, who in flagged.items()]
    left_out = [m for m in by_metric if not m.startswith("rank:") and m not in chosen]
    left_out = [m for m in left_out if m in ranking or m == SANITY_METRIC or policy_of(family_of(m)).flags_explainers]
    if left_out:
        notes.append(f"not shown: {', '.join(sorted(left_out, key=order))} (--wide)")
    notes += away_lines(board, track)

    table = Table(
        title=term_text(track_title(board, track)),
        title_justify="left",
        caption=Text("\n").join(term_text(n) for n in notes) if notes else None,
        caption_justify="left",
    )
    widths = _widen_headers([h for h, _ in columns], widths, width)
    for (header, _), w in zip(columns, widths, strict=True):
        table.add_column(term_text(header), width=w, overflow="ellipsis")
    for i in range(len(order_x)):
        table.add_row(*(term_text(column[i]) for _, column in columns))
    return table


def _fitted_table(title: str, header: list[str], body: list[list[str]], width: int) -> Table:
    """A table whose cells stay on one line and whose headers wrap only between words (the
    cross-track summary); it is as wide as its content needs, at most ``width``."""
    table = Table(title=term_text(title), title_justify="left")
    widths = _widen_headers(header, [_column_width(h, [row[i] for row in body]) for i, h in enumerate(header)], width)
    for h, w in zip(header, widths, strict=True):
        table.add_column(term_text(h), width=w, overflow="ellipsis")
    for row in body:
        table.add_row(*(term_text(c) for c in row))
    return table


def _rich_table(title: str, header: list[str], body: list[list[str]]) -> Table:
    """The wide view's table: every column, long words folded to fit."""
    table = Table(title=term_text(title), show_lines=False, title_justify="left")
    for h in header:
        table.add_column(term_text(h), overflow="fold")
    for row in body:
        table.add_row(*(term_text(c) for c in row))
    return table


def print_leaderboard(board: Leaderboard, console: Console | None = None, *, wide: bool = False) -> None:
    """The leaderboard in the terminal: one table per track, the cross-track summary, notes.

    By default each track gets a compact table that fits the console's width with no word broken
    (:func:`compact_table`); ``wide=True`` prints every metric with its interval and the legend.
    """
    console = console or Console()
    for track in board.track_names():
        if wide:
            console.print(_rich_table(track_title(board, track), *track_table(board, track)))
            for line in away_lines(board, track):
                console.print(term_text(line))
        else:
            console.print(compact_table(board, track, console.width))
    if len(board.track_names()) > 1 and board.summary.get("order"):
        title = "across tracks (mean win rate, higher is better)"
        header, body = summary_table(board)
        console.print(_rich_table(title, header, body) if wide else _fitted_table(title, header, body, console.width))
    for note in board.notes:
        console.print(term_text(f"note: {note}"))
    if wide:
        console.print(term_text(legend(board).replace("`", ""), style="dim"))
    else:
        console.print(term_text(COMPACT_KEY, style="dim"))
