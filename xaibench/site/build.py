"""Build the static leaderboard site from submission files (data only; nothing submitted is executed).

Layout of the output folder (default ``<leaderboard dir>/site``)::

    index.html               overview: the cross-track summary (mean win rate), one sortable table per
                             track (overall rank first), disclosure filters
    explainers/<slug>.html   one page per submission: overlays, curves, distributions, provenance
    methodology.html         metrics from the registry: family, direction, version, description
    correlations.html        Spearman rho metric x metric across explainers; each metric vs pasta_q1;
                             the PASTA paper's human ratings against the classic metrics (site/human_ratings.py)
    assets/site.css|site.js  the site's own CSS and vanilla JS (no CDN, no fonts, no requests)
    assets/overlays/*.png    example overlays, copied after their sha256 was checked
    data/                    leaderboard.csv/.json and the submission files, for download

Safety: every submitted string is escaped by Jinja2's autoescape (HTML) or ``tojson`` (the one
``<script type="application/json">`` block, which escapes ``<``, ``>``, ``&`` and ``'``); file
names on the site are generated (slugs, digests), never taken from submissions; each page sets
a Content-Security-Policy allowing only the site's own script, style and images. Links are
relative, so the site works from ``file://`` and any static host. The output is deterministic
(no build timestamp): the same submissions give the same bytes.

The verdicts come from the :class:`~xaibench.publish.writers.Leaderboard`: row ``status``
("too few samples (n = k)", "not ranked: <reason>"), ``label`` (the proxy label of perceptual
values) and ``flags`` ("n/a 40 %"); ``families`` (which family is ranked on a track, and why
not); ``summary`` (mean win rate, overall ranks); ``rules`` (the thresholds); the explainers'
``flags`` ("insensitive to the model") and ``verification``. Every one is read with a default,
so a board without them (an older leaderboard) still builds.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from xaibench.api import FAMILIES as ALL_FAMILIES
from xaibench.api import RANKED_FAMILIES as FAMILIES
from xaibench.errors import XaibenchError
from xaibench.files import make_staging_dir
from xaibench.plugins.manager import Registry
from xaibench.publish.leaderboard import RULES, family_index, win_rates
from xaibench.publish.submission import load_submissions
from xaibench.publish.validation import PNG_SIGNATURE, require_valid
from xaibench.publish.writers import (
    DIRECTION_WORDS,
    LEADERBOARD_SCHEMA,
    Leaderboard,
    board_json,
    build_leaderboard,
    rank_ties,
    to_csv,
    track_title,
)
from xaibench.site import charts
from xaibench.site.correlations import PERCEPTUAL_REFERENCE, correlation_matrix, oriented, pair_rho
from xaibench.site.human_ratings import human_ratings_section
from xaibench.version import __version__

HERE = Path(__file__).resolve().parent
MARKER = ".xaibench-site"
ARROWS = {"higher": "↑", "lower": "↓"}
CURVE_LABELS = {
    "deletion": ("fraction of pixels removed (most salient first)", "p(target class)"),
    "insertion": ("fraction of pixels inserted (most salient first)", "p(target class)"),
    "model_randomisation": (
        "fraction of parameter blocks randomised (output first)",
        "Spearman of |E| with the original",
    ),
}
CURVE_Y_RANGE = {"model_randomisation": (-1.0, 1.0)}  # a correlation; the others are probabilities in [0, 1]


@dataclass
class Submitted:
    """One submission file as the site sees it."""

    key: str  # the leaderboard's explainer id (the file stem)
    slug: str  # safe page name
    path: Path
    data: dict[str, Any]
    sha256: str
    overlays: dict[tuple[str, int], str] = field(default_factory=dict)  # (track, k) -> site-relative path
    label: str = ""
    """The board's display label (a parameter variant with its short parameters), "" when it has none."""

    @property
    def name(self) -> str:
        """What the site shows: the board's label (``zennit-lrp (epsilon=0.25)``), else the explainer's name."""
        return self.label or str(self.data["explainer"].get("name", self.key))

    @property
    def disclosure(self) -> dict[str, Any]:
        d = self.data.get("disclosure", {})
        return d if isinstance(d, dict) else {}

    @property
    def tuned(self) -> bool:
        return self.disclosure.get("tuned_on_benchmark") is True

    @property
    def reference(self) -> bool:
        return self.disclosure.get("reference_only") is True or self.data["explainer"].get("reference_only") is True


def build_site(
    submissions_dir: Path,
    site_dir: Path,
    *,
    board: Leaderboard | None = None,
    registry: Registry | None = None,
    validate: bool = True,
    paper_dir: Path | None = None,
) -> list[Path]:
    """Validate the submissions, then write the whole site to ``site_dir``; returns the HTML pages.

    ``site_dir`` is replaced as a whole; it must be absent, empty, or a site built before
    (it holds the marker file ``.xaibench-site``), so no other folder is ever deleted.
    ``paper_dir``: the shared ``pasta-paper`` folder for the correlations page's human ratings
    section; ``None`` finds it from the environment (``XAIBENCH_DATA_DIR``, as ``--data-dir`` sets
    it, or ``XAIBENCH_DATA_PASTA_PAPER``), and the section says in one line when it is absent.
    """
    if not submissions_dir.is_dir():
        raise XaibenchError(f"{submissions_dir}: no such submissions folder")
    files = sorted(submissions_dir.glob("*.json"))
    if validate:
        require_valid(files)
    if site_dir.exists() and any(site_dir.iterdir()) and not (site_dir / MARKER).exists():
        raise XaibenchError(f"{site_dir}: exists and is not an xaibench site (no {MARKER}); choose another --site")
    board = board or build_leaderboard(submissions_dir)
    if registry is None:
        from xaibench.plugins.manager import get_registry

        registry = get_registry()
    subs = _submitted(submissions_dir, load_submissions(submissions_dir))
    for sub in subs:
        info = board.explainers.get(sub.key)
        label = info.get("label") if isinstance(info, dict) else None
        sub.label = label if isinstance(label, str) else ""
    site_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = make_staging_dir(site_dir)
    try:
        pages = _write_site(tmp, submissions_dir, subs, board, registry, paper_dir)
        if site_dir.exists():
            shutil.rmtree(site_dir)
        tmp.rename(site_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    site_dir.chmod(0o755)
    return [site_dir / p for p in pages]


def _submitted(folder: Path, loaded: list[tuple[Path, dict[str, Any]]]) -> list[Submitted]:
    out: list[Submitted] = []
    used: set[str] = set()
    for path, data in loaded:
        base = re.sub(r"[^A-Za-z0-9_-]", "_", path.stem)[:60] or "explainer"
        slug, k = base, 2
        while slug.lower() in used:
            slug, k = f"{base}-{k}", k + 1
        used.add(slug.lower())
        out.append(Submitted(path.stem, slug, path, data, hashlib.sha256(path.read_bytes()).hexdigest()))
    return out


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["num"] = _num_text
    env.filters["pretty_json"] = lambda v: json.dumps(v, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    env.globals.update(version=__version__, direction_words=DIRECTION_WORDS, arrows=ARROWS)
    return env


def _num_text(value: Any, digits: int = 3) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "n/a"
    return f"{value:.{digits}f}"


def _write_site(
    out: Path,
    submissions_dir: Path,
    subs: list[Submitted],
    board: Leaderboard,
    registry: Registry,
    paper_dir: Path | None = None,
) -> list[str]:
    env = _environment()
    (out / "assets" / "overlays").mkdir(parents=True)
    (out / "explainers").mkdir()
    (out / "data" / "submissions").mkdir(parents=True)
    for name in ("site.css", "site.js"):
        shutil.copyfile(HERE / "static" / name, out / "assets" / name)
    for sub in subs:
        _copy_overlays(sub, submissions_dir, out)
        shutil.copyfile(sub.path, out / "data" / "submissions" / f"{sub.slug}.json")
    (out / "data" / "leaderboard.csv").write_text(to_csv(board.rows), encoding="utf-8")
    (out / "data" / "leaderboard.json").write_text(json.dumps(board_json(board), indent=2) + "\n", encoding="utf-8")
    by_key = {s.key: s for s in subs}
    rules = board_rules(board)
    tracks = [_track_view(board, t, by_key) for t in board.track_names()]
    common = {"subs": subs, "n_subs": len(subs), "files": [(s.slug, s.path.name, s.sha256) for s in subs]}
    pages: dict[str, str] = {
        "index.html": env.get_template("index.html.j2").render(
            root="",
            page="overview",
            tracks=tracks,
            overview=_overview(board, by_key),
            rules=rules,
            page_data={
                "schema": LEADERBOARD_SCHEMA,
                "explainers": {s.key: {"name": s.name, "tuned": s.tuned, "reference": s.reference} for s in subs},
            },
            **common,
        ),
        "methodology.html": env.get_template("methodology.html.j2").render(
            root="", page="methodology", families=_methodology(registry, subs), rules=rules, **common
        ),
        "correlations.html": env.get_template("correlations.html.j2").render(
            root="",
            page="correlations",
            tracks=[_correlation_view(board, t, by_key) for t in board.track_names()],
            reference=PERCEPTUAL_REFERENCE,
            human=human_ratings_section(
                board.rows, {s.key: (str(s.data["explainer"].get("name", s.key)), s.name) for s in subs}, paper_dir
            ),
            **common,
        ),
    }
    for sub in subs:
        pages[f"explainers/{sub.slug}.html"] = env.get_template("explainer.html.j2").render(
            root="../",
            page="explainer",
            sub=sub,
            tracks=_explainer_tracks(sub, board, by_key),
            verification=_verification(board, sub.key, sub),
            flags=_all_flags(board, sub.key),
            **common,
        )
    for rel, html in pages.items():
        (out / rel).write_text(html, encoding="utf-8")
    (out / MARKER).write_text(f"built by xaibench {__version__}\n", encoding="utf-8")
    for p in out.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return sorted(pages)


# ----------------------------------------------------------------------------- verdicts (read with defaults)


def board_rules(board: Leaderboard) -> dict[str, float]:
    """The board's ranking rules over the defaults of :data:`xaibench.publish.leaderboard.RULES` (numbers only)."""
    rules: dict[str, float] = dict(RULES)
    given = getattr(board, "rules", None)
    for key, value in (given if isinstance(given, dict) else {}).items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            rules[str(key)] = value
    return rules


def _families(board: Leaderboard, track: str) -> dict[str, dict[str, Any]]:
    """``family -> {"ranked", "reason", "label"}`` on ``track`` (empty when the board has no ``families``)."""
    given = getattr(board, "families", None)
    per_track = given.get(track) if isinstance(given, dict) else None
    out: dict[str, dict[str, Any]] = {}
    for family, info in (per_track if isinstance(per_track, dict) else {}).items():
        if isinstance(info, dict):
            reason, label = info.get("reason"), info.get("label")
            out[str(family)] = {
                "ranked": info.get("ranked") is not False,
                "reason": str(reason) if reason else "",
                "label": str(label) if label else "",
            }
    return out


def not_ranked_text(reason: str) -> str:
    """``not ranked: <reason>`` (the reason alone when it already says so)."""
    reason = reason.strip()
    if reason.startswith("not ranked"):
        return reason
    return f"not ranked: {reason}" if reason else "not ranked"


def _family_notes(fam_info: dict[str, dict[str, Any]], present: set[str]) -> list[dict[str, str]]:
    """The families on a track that are shown but not ranked, with their reason."""
    return [
        {"family": f, "text": not_ranked_text(fam_info[f]["reason"]), "label": fam_info[f]["label"]}
        for f in sorted(fam_info, key=family_index)
        if not fam_info[f]["ranked"] and f in present and f != "other"  # "other" is never meant to rank
    ]


def _label(board: Leaderboard, rows: list[dict[str, Any]], metric: str) -> str:
    """The proxy label of a metric's values: the rows' ``label``, else the board's ``metric_labels``."""
    for r in rows:
        label = r.get("label")
        if r["metric"] == metric and isinstance(label, str) and label:
            return label
    labels = getattr(board, "metric_labels", None)
    label = labels.get(metric) if isinstance(labels, dict) else None
    return label if isinstance(label, str) else ""


def _flags(text: Any) -> list[str]:
    """A row's ``flags`` ("; "-joined) as a list."""
    if isinstance(text, list):
        return [str(f) for f in text if str(f).strip()]
    return [f.strip() for f in str(text).split(";") if f.strip()] if isinstance(text, str) else []


def _explainer_flags(board: Leaderboard, key: str, track: str) -> list[str]:
    """Flags of an explainer on a track, e.g. "insensitive to the model"."""
    info = board.explainers.get(key)
    flags = info.get("flags") if isinstance(info, dict) else None
    return _flags((flags if isinstance(flags, dict) else {}).get(track))


def _all_flags(board: Leaderboard, key: str) -> list[dict[str, Any]]:
    """Each distinct flag of an explainer with the tracks it is raised on."""
    tracks: dict[str, list[str]] = {}
    for track in board.track_names():
        for flag in _explainer_flags(board, key, track):
            tracks.setdefault(flag, []).append(track)
    return [{"flag": f, "tracks": t} for f, t in tracks.items()]


def _verification(board: Leaderboard, key: str, sub: Submitted | None) -> dict[str, Any] | None:
    """The submission's ``verification`` (from the board, else the file) as text for the page and the tables."""
    info = board.explainers.get(key)
    given = info.get("verification") if isinstance(info, dict) and "verification" in info else None
    if given is None and sub is not None:
        given = sub.data.get("verification")
    if not isinstance(given, dict) or not isinstance(given.get("passed"), bool):
        return None
    at = str(given.get("verified_at") or "")
    date = at[:10] if re.fullmatch(r"\d{4}-\d{2}-\d{2}", at[:10]) else (at or "date unknown")
    checked, matched = given.get("checked"), given.get("matched")
    counts = (
        f"{matched} of {checked} re-run records matched"
        if isinstance(checked, int) and isinstance(matched, int)
        else "record counts unknown"
    )
    tolerance = given.get("tolerance")
    detail = [f"at {at}" if at else "time unknown"]
    if isinstance(tolerance, int | float) and not isinstance(tolerance, bool):
        detail.append(f"tolerance {tolerance:g}")
    if given.get("xaibench"):
        detail.append(f"xaibench {given['xaibench']}")
    passed = given["passed"]
    return {
        "passed": passed,
        "date": date,
        "text": f"verified {date} ({counts})" if passed else f"verification failed {date} ({counts})",
        "short": "verified" if passed else "verification failed",
        "detail": "re-run by xaibench submission verify " + ", ".join(detail),
    }


# ----------------------------------------------------------------------------- cross-track overview


def _summary(board: Leaderboard) -> dict[str, Any]:
    """The board's ``summary``; computed from its ``rank:overall`` rows when it has none (a board made by hand)."""
    given = getattr(board, "summary", None)
    if isinstance(given, dict) and isinstance(given.get("explainers"), dict) and given.get("order"):
        return given
    return win_rates(board.rows)


def _overview(board: Leaderboard, by_key: dict[str, Submitted]) -> dict[str, Any]:
    """The table across tracks: explainers in the summary's order, mean win rate, each track's overall rank."""
    summary = _summary(board)
    info: dict[str, Any] = summary["explainers"]
    order = [str(x) for x in summary["order"] if x in info]
    order += sorted(str(x) for x in info if x not in order)
    track_names = board.track_names()
    shared: dict[tuple[str, int], int] = defaultdict(int)
    for x in order:
        for track, rank in (info[x].get("overall_ranks") or {}).items():
            if isinstance(rank, int):
                shared[(track, rank)] += 1
    rows = []
    for position, x in enumerate(order, start=1):
        sub = by_key.get(x)
        entry = info[x] if isinstance(info[x], dict) else {}
        ranks = entry.get("overall_ranks") if isinstance(entry.get("overall_ranks"), dict) else {}
        rate = entry.get("mean_win_rate")
        rows.append(
            {
                "position": position,
                "key": x,
                "name": sub.name if sub else x,
                "slug": sub.slug if sub else None,
                "tuned": bool(sub and sub.tuned),
                "reference": bool(sub and sub.reference),
                "verification": _verification(board, x, sub),
                "flags": _all_flags(board, x),
                "win_rate": rate if isinstance(rate, int | float) and not isinstance(rate, bool) else None,
                "n_tracks": entry.get("tracks") if isinstance(entry.get("tracks"), int) else len(ranks),
                "ranks": [
                    {
                        "rank": ranks.get(t) if isinstance(ranks.get(t), int) else None,
                        "tie": shared.get((t, ranks.get(t)), 0) > 1,  # type: ignore[arg-type]
                    }
                    for t in track_names
                ],
            }
        )
    anchors = {t: "track-" + re.sub(r"[^A-Za-z0-9_-]", "_", t) for t in track_names}
    return {"rows": rows, "tracks": [{"name": t, "anchor": anchors[t]} for t in track_names]}


def _copy_overlays(sub: Submitted, submissions_dir: Path, out: Path) -> None:
    """Copy each example PNG whose path stays under ``assets/`` and whose sha256 matches."""
    root = submissions_dir.resolve()
    for track_name, track in sub.data["tracks"].items():
        for k, example in enumerate(track.get("examples", []) if isinstance(track, dict) else []):
            rel, digest = example.get("png"), example.get("sha256")
            if not isinstance(rel, str) or not isinstance(digest, str):
                continue
            path = (root / rel).resolve()
            if not path.is_relative_to(root / "assets") or not path.is_file():
                continue
            data = path.read_bytes()
            if not data.startswith(PNG_SIGNATURE) or hashlib.sha256(data).hexdigest() != digest:
                continue
            name = f"assets/overlays/{digest[:24]}.png"
            (out / name).write_bytes(data)
            sub.overlays[(track_name, k)] = name


# ----------------------------------------------------------------------------- overview


def _cell(
    row: dict[str, Any] | None,
    ties: dict[tuple[str, int], int],
    *,
    column_status: str = "",
    hide_flags: tuple[str, ...] = (),
) -> dict[str, Any]:
    """One table cell; ``column_status``: the status already shown in the column's header (given short here)."""
    if row is None:
        return {"missing": True, "sort": ""}
    value, rank = row["value"], row["rank"]
    tie = rank is not None and ties.get((row["metric"], rank), 0) > 1
    status = str(row.get("status") or "")
    short = status
    if status and status == column_status and status.startswith("not ranked"):
        short = "not ranked"
    return {
        "missing": False,
        "value": value,
        "ci": (row["ci_low"], row["ci_high"]) if row["ci_low"] is not None and row["ci_high"] is not None else None,
        "rank": rank,
        "tie": tie,
        "n": row["n"],
        "n_na": row["n_na"],
        "sort": "" if value is None else repr(float(value)),
        "status": status,
        "status_short": short,
        "flags": [f for f in _flags(row.get("flags")) if f not in hide_flags],
        "label": str(row.get("label") or ""),
    }


def _column_status(rows: list[dict[str, Any]], metric: str) -> str:
    """The status every explainer shares on a metric (shown once, in the header), else ""."""
    statuses = {str(r.get("status") or "") for r in rows if r["metric"] == metric}
    return statuses.pop() if len(statuses) == 1 else ""


def _metric_info(
    board: Leaderboard, rows: list[dict[str, Any]], metric: str, fam_info: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    first = next(r for r in rows if r["metric"] == metric)
    family = first["family"]
    fam = fam_info.get(family, {})
    family_note = not_ranked_text(fam["reason"]) if fam and not fam["ranked"] and family != "other" else ""
    status = _column_status(rows, metric)
    return {
        "id": metric,
        "family": family,
        "direction": first["direction"],
        "label": _label(board, rows, metric) or fam.get("label", ""),
        "family_note": family_note,
        "status": "" if status == family_note else status,
        "column_status": status,
    }


def _track_view(board: Leaderboard, track: str, by_key: dict[str, Submitted]) -> dict[str, Any]:
    rows = [r for r in board.rows if r["track"] == track]
    metric_rows = [r for r in rows if not r["metric"].startswith("rank:")]
    fam_info = _families(board, track)
    info: dict[str, dict[str, Any]] = {}
    for r in metric_rows:
        if r["metric"] not in info:
            info[r["metric"]] = _metric_info(board, metric_rows, r["metric"], fam_info)
    ranking = board.ranking_metrics.get(track, set())

    def order(m: str) -> tuple[int, str]:
        return (family_index(info[m]["family"]), m)

    valued = {r["metric"] for r in metric_rows if r["value"] is not None}
    ranked = [info[m] for m in sorted(info, key=order) if m in ranking and m in valued]
    others = [info[m] for m in sorted(info, key=order) if m not in ranking and m in valued]
    inapplicable = [info[m] for m in sorted(info, key=order) if m not in valued]
    present = {m["family"] for m in ranked}
    families = [
        {
            "name": f,
            "note": not_ranked_text(fam_info[f]["reason"]) if f in fam_info and not fam_info[f]["ranked"] else "",
        }
        for f in FAMILIES
        if any(r["metric"] == f"rank:{f}" for r in rows) or (f in present and f in fam_info)
    ]
    cells: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for r in rows:
        cells[r["explainer"]][r["metric"]] = r
    ties = rank_ties(rows)
    explainers = sorted(cells, key=lambda x: (cells[x].get("rank:overall", {}).get("rank") or 10**9, x))
    body = []
    for x in explainers:
        sub = by_key.get(x)
        flags = _explainer_flags(board, x, track)
        body.append(
            {
                "key": x,
                "name": sub.name if sub else x,
                "slug": sub.slug if sub else None,
                "tuned": bool(sub and sub.tuned),
                "reference": bool(sub and sub.reference),
                "flags": [{"flag": f, "tracks": [track]} for f in flags],
                "verification": _verification(board, x, sub),
                "overall": _cell(cells[x].get("rank:overall"), ties, hide_flags=tuple(flags)),
                "families": [
                    _cell(cells[x].get(f"rank:{f['name']}"), ties, column_status=f["note"], hide_flags=tuple(flags))
                    for f in families
                ],
                "ranked": [_cell(cells[x].get(m["id"]), ties, column_status=m["column_status"]) for m in ranked],
                "others": [_cell(cells[x].get(m["id"]), ties, column_status=m["column_status"]) for m in others],
            }
        )
    prov = board.tracks.get(track, {})
    return {
        "name": track,
        "anchor": "track-" + re.sub(r"[^A-Za-z0-9_-]", "_", track),
        "title": track_title(board, track),
        "provenance": prov if isinstance(prov, dict) else {},
        "families": families,
        "not_ranked": _family_notes(fam_info, {m["family"] for m in info.values()}),
        "ranked": ranked,
        "others": others,
        "inapplicable": inapplicable,
        "inapplicable_reason": _top_reason(by_key, track, [m["id"] for m in inapplicable]),
        "rows": body,
    }


def _top_reason(by_key: dict[str, Submitted], track: str, metrics: list[str]) -> str:
    """The most common n/a reason of ``metrics`` on ``track`` over all submissions."""
    counts: dict[str, int] = defaultdict(int)
    for sub in by_key.values():
        for metric in metrics:
            m = sub.data["tracks"].get(track, {}).get("metrics", {}).get(metric, {})
            reasons = m.get("na_reasons") if isinstance(m, dict) else None
            for reason, n in (reasons if isinstance(reasons, dict) else {}).items():
                counts[str(reason)] += n if isinstance(n, int) else 0
    return max(sorted(counts), key=lambda r: counts[r]) if counts else "none recorded"


# ----------------------------------------------------------------------------- explainer pages


def _explainer_tracks(sub: Submitted, board: Leaderboard, by_key: dict[str, Submitted]) -> list[dict[str, Any]]:
    out = []
    for track_name in sorted(sub.data["tracks"]):
        track = sub.data["tracks"][track_name]
        track_rows = [r for r in board.rows if r["track"] == track_name]
        metric_rows = [r for r in track_rows if not r["metric"].startswith("rank:")]
        rows = {r["metric"]: r for r in track_rows if r["explainer"] == sub.key}
        n_ranked = {m: sum(1 for r in track_rows if r["metric"] == m and r["rank"] is not None) for m in rows}
        ties = rank_ties(track_rows)
        fam_info = _families(board, track_name)
        flags = _explainer_flags(board, sub.key, track_name)
        metrics = []
        for metric_id in sorted(track.get("metrics", {}), key=lambda m: _family_order(track["metrics"][m], m)):
            m = track["metrics"][metric_id]
            hist = m.get("histogram") if isinstance(m.get("histogram"), dict) else None
            known = metric_id in {r["metric"] for r in metric_rows}
            meta = _metric_info(board, metric_rows, metric_id, fam_info) if known else {}
            label = meta.get("label") or _label(board, [], metric_id)
            shown = f"{metric_id} ({label})" if label else metric_id
            metrics.append(
                {
                    "id": metric_id,
                    "family": m.get("family"),
                    "direction": m.get("direction"),
                    "ranking": m.get("ranking") is True,
                    "label": label,
                    "family_note": meta.get("family_note", ""),
                    "cell": _cell(rows.get(metric_id), ties, column_status=meta.get("family_note", "")),
                    "of": n_ranked.get(metric_id, 0),
                    "na_reasons": m.get("na_reasons") if isinstance(m.get("na_reasons"), dict) else {},
                    "params": m.get("params", {}),
                    "version": m.get("version"),
                    "histogram": charts.histogram_chart(
                        hist.get("edges", []),
                        hist.get("counts", []),
                        title=f"{shown}: distribution of per-sample values",
                        mean=rows[metric_id]["value"] if metric_id in rows else None,
                    )
                    if hist
                    else Markup(""),
                }
            )
        examples = []
        for k, ex in enumerate(track.get("examples", [])):
            examples.append({**ex, "src": sub.overlays.get((track_name, k))})
        present = {str(m.get("family")) for m in track.get("metrics", {}).values() if isinstance(m, dict)}
        families = [
            (f, _cell(rows.get(f"rank:{f}"), ties, hide_flags=tuple(flags)))
            for f in FAMILIES
            if f"rank:{f}" in rows and (f not in fam_info or fam_info[f]["ranked"])
        ]
        out.append(
            {
                "name": track_name,
                "title": track_title(board, track_name),
                "provenance": track.get("provenance", {}),
                "explained": track.get("explained", {}),
                "explain_seconds": track.get("explain_seconds"),
                "overall": _cell(rows.get("rank:overall"), ties, hide_flags=tuple(flags)),
                "families": families,
                "not_ranked": _family_notes(fam_info, present),
                "flags": flags,
                "metrics": metrics,
                "examples": examples,
                "curves": _curves(sub, track_name, by_key),
            }
        )
    return out


def _family_order(m: Any, metric_id: str) -> tuple[int, int, str]:
    fam = m.get("family") if isinstance(m, dict) else None
    ranking = isinstance(m, dict) and m.get("ranking") is True
    return (family_index(str(fam)), 0 if ranking else 1, metric_id)


def _curve_of(sub: Submitted, track: str, metric: str) -> dict[str, Any] | None:
    m = sub.data["tracks"].get(track, {}).get("metrics", {}).get(metric, {})
    curve = m.get("curve") if isinstance(m, dict) else None
    if not isinstance(curve, dict):
        return None
    x, y = curve.get("fraction"), curve.get("mean")
    if not isinstance(x, list) or not isinstance(y, list) or len(x) != len(y) or len(x) < 2:
        return None
    return curve


def _curves(sub: Submitted, track: str, by_key: dict[str, Submitted]) -> list[dict[str, Any]]:
    out = []
    metrics = sorted(sub.data["tracks"][track].get("metrics", {}))
    for metric in metrics:
        mine = _curve_of(sub, track, metric)
        if mine is None:
            continue
        series = []
        for other in by_key.values():
            c = _curve_of(other, track, metric)
            if c is not None and other is not sub:
                series.append(charts.Series(other.name, c["fraction"], c["mean"]))
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
                "others": len(series) - 1,
                "x_label": x_label,
                "y_label": y_label,
                "svg": charts.curve_chart(
                    series,
                    title=f"{metric} curve on {track}",
                    x_label=x_label,
                    y_label=y_label,
                    y_range=CURVE_Y_RANGE.get(metric, (0.0, 1.0)),
                ),
            }
        )
    return out


# ----------------------------------------------------------------------------- methodology


def _methodology(registry: Registry, subs: list[Submitted]) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    submitted: dict[str, dict[str, Any]] = {}
    for sub in subs:
        for track in sub.data["tracks"].values():
            for metric_id, m in (track.get("metrics", {}) if isinstance(track, dict) else {}).items():
                if not isinstance(m, dict):
                    continue
                seen[metric_id]["params"].add(json.dumps(m.get("params", {}), sort_keys=True))
                seen[metric_id]["versions"].add(str(m.get("version", "?")))
                submitted.setdefault(metric_id, m)
    metrics: dict[str, dict[str, Any]] = {}
    for entry in registry.entries("metric"):
        cls, info = entry.cls, entry.info
        metrics[info.name] = {
            "id": info.name,
            "family": cls.family,
            "direction": cls.direction,
            "ranking": cls.ranking,
            "version": info.version,
            "unit": getattr(cls, "unit", ""),
            "description": info.description,
            "source": f"{info.distribution} {info.distribution_version}",
            "installed": True,
        }
    for metric_id, m in submitted.items():
        metrics.setdefault(
            metric_id,
            {
                "id": metric_id,
                "family": m.get("family", "other"),
                "direction": m.get("direction", "?"),
                "ranking": m.get("ranking") is True,
                "version": m.get("version", "?"),
                "unit": "",
                "description": "not installed where this site was built; as declared by the submissions",
                "source": "submissions",
                "installed": False,
            },
        )
    for metric_id, m in metrics.items():
        used = seen.get(metric_id, {})
        m["params_seen"] = sorted(used.get("params", set()))
        m["versions_seen"] = sorted(used.get("versions", set()))
        m["in_submissions"] = bool(used)
    families = []
    for fam in ALL_FAMILIES:
        items = sorted((m for m in metrics.values() if m["family"] == fam), key=lambda m: (not m["ranking"], m["id"]))
        if items:
            families.append({"name": fam, "metrics": items})
    rest = sorted((m for m in metrics.values() if m["family"] not in ALL_FAMILIES), key=lambda m: m["id"])
    if rest:
        families.append({"name": "unknown family", "metrics": rest})
    return families


# ----------------------------------------------------------------------------- correlations


def _correlation_view(board: Leaderboard, track: str, by_key: dict[str, Submitted]) -> dict[str, Any]:
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
    labels = {m: label for m in values if (label := _label(board, track_rows, m))}
    fam_info = _families(board, track)
    versus = []
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

    return {
        "name": track,
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
        "not_ranked": _family_notes(fam_info, set(families.values())),
        "versus": versus,
    }
