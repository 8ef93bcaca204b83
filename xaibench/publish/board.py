"""The leaderboard model: every submission ranked, with what the files and the site show.

:func:`build_board` ranks loaded submissions (:mod:`xaibench.publish.leaderboard` holds the
rules) into a :class:`Leaderboard`: the tidy rows, each track's provenance and family verdicts,
the explainers' blocks and flags, the win rates across tracks, the notes on superseded files and
the warnings per track (a model at chance).
The board keeps the submissions it was built from, so the site shows them without reading a file
again. :mod:`xaibench.publish.writers` writes the board (CSV, JSON, Markdown, the terminal);
:mod:`xaibench.site` builds the static site from it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xaibench.publish.gate import Gate, read_gate
from xaibench.publish.leaderboard import (
    NEVER_RANKED,
    RULES,
    Entry,
    entries_from_submissions,
    explainer_labels,
    rank_track,
    resolve_duplicates,
    win_rates,
)
from xaibench.publish.shapes import (
    BoardRow,
    ExplainerInfo,
    FamilyVerdict,
    LeaderboardData,
    Provenance,
    Rules,
    SubmissionData,
    WinRates,
)
from xaibench.publish.submission import read_submissions
from xaibench.publish.submission_files import Submission
from xaibench.runner.chance import chance_warning

LEADERBOARD_SCHEMA = "xaibench.leaderboard/2"


@dataclass
class Leaderboard:
    """Everything the leaderboard files and the site show (shapes in docs/results.md)."""

    rows: list[BoardRow]
    tracks: dict[str, Provenance] = field(default_factory=dict)
    explainers: dict[str, ExplainerInfo] = field(default_factory=dict)
    ranking_metrics: dict[str, set[str]] = field(default_factory=dict)
    metric_labels: dict[str, str] = field(default_factory=dict)
    families: dict[str, dict[str, FamilyVerdict]] = field(default_factory=dict)
    """track -> family -> whether it is ranked there, why not, its checkpoint's label."""
    summary: WinRates = field(default_factory=lambda: {"explainers": {}, "order": []})
    """Mean win rate across tracks (see :func:`xaibench.publish.leaderboard.win_rates`)."""
    rules: Rules = field(default_factory=lambda: RULES.copy())
    notes: list[str] = field(default_factory=list)
    """Board-level notes, e.g. which submission superseded which."""
    warnings: dict[str, list[str]] = field(default_factory=dict)
    """track -> warning lines about its numbers (a model at chance: :func:`track_warnings`)."""
    meta: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    """The ``meta.json`` of ``xaibench meta`` applied to this board (:mod:`xaibench.publish.gate`),
    ``None`` when none matched: the site's metrics page shows it."""
    submissions: tuple[Submission, ...] = field(default=(), repr=False, compare=False)
    """The submissions the board was built from, as read (superseded tracks included)."""

    def track_names(self) -> list[str]:
        return sorted({r["track"] for r in self.rows})


def meta_file(submissions_dir: Path) -> Path:
    """Where ``xaibench meta`` writes by default, beside the submissions: ``<parent>/meta/meta.json``."""
    return submissions_dir.parent / "meta" / "meta.json"


def build_leaderboard(submissions_dir: Path, meta: Path | None = None, *, keep_bytes: bool = True) -> Leaderboard:
    """Rank the submission files of a folder (duplicates: an error, or superseded by date),
    gated by the ``meta.json`` of ``xaibench meta`` (``meta``, default :func:`meta_file`) when
    it matches them (:mod:`xaibench.publish.gate`). ``keep_bytes=False``: the files' bytes are
    not kept (a build without a site; :func:`~xaibench.publish.submission.read_submissions`)."""
    subs = read_submissions(submissions_dir, keep_bytes=keep_bytes)
    return build_board(subs, gate=read_gate(meta or meta_file(submissions_dir), subs))


def build_board(
    submissions: Iterable[Submission | tuple[Path, SubmissionData]], gate: Gate | None = None
) -> Leaderboard:
    """Rank loaded submissions (or ``(path, data)`` pairs; the explainer key is the file's stem);
    ``gate``: meta-evaluation's invalid metrics, shown but not ranked."""
    loaded = tuple(Submission.of(s) for s in submissions)
    subs, superseded = resolve_duplicates(loaded)
    board = Leaderboard(rows=[], submissions=loaded)
    gate = gate or Gate()
    if gate.note is not None:
        board.notes.append(gate.note)
    board.meta = gate.data
    by_track: dict[str, list[Entry]] = defaultdict(list)
    for e in entries_from_submissions(subs):
        by_track[e.track].append(e)
        if e.ranking and e.metric not in NEVER_RANKED:
            board.ranking_metrics.setdefault(e.track, set()).add(e.metric)
        label = e.params.get("label")
        if isinstance(label, str):  # e.g. "PASTA (proxy, technique-level labels)"
            board.metric_labels[e.metric] = label
    references = {sub.key for sub in subs if is_reference(sub.data)}
    for sub in subs:  # each track's provenance, as its first file gives it (the diagnosis reads it)
        for name, track_data in sub.data["tracks"].items():
            prov = track_data.get("provenance", {}) if isinstance(track_data, dict) else {}
            board.tracks.setdefault(str(name), prov if isinstance(prov, dict) else {})
    flags: dict[str, dict[str, list[str]]] = defaultdict(dict)
    for track in sorted(by_track):
        ranking = rank_track(
            track,
            by_track[track],
            board.rules,
            invalid=gate.for_track(track),
            references=references,
            diagnosis=track_diagnosis(board.tracks.get(track, {})),
        )
        board.rows += ranking.rows
        board.families[track] = ranking.families
        for x, mine in ranking.flags.items():
            flags[x][track] = mine
    for sub in subs:
        data = sub.data
        verification = data.get("verification")
        board.explainers[sub.key] = {
            "file": sub.path.name,
            "explainer": data["explainer"],
            "disclosure": data.get("disclosure", {}),
            "environment": data.get("environment", {}),
            "plugins": data.get("plugins", []),
            "seed": data.get("seed"),
            "created": data.get("created"),
            "verification": verification if isinstance(verification, dict) else None,
            "flags": {t: flags[sub.key].get(t, []) for t in sorted(data["tracks"])},
        }
    for s in superseded:
        earlier, later = Path(s["file"]).stem, Path(s["by"]).stem
        if earlier in board.explainers:
            board.explainers[earlier].setdefault("superseded", []).append({"track": s["track"], "by": s["by"]})
        board.explainers[later].setdefault("supersedes", []).append({"track": s["track"], "file": s["file"]})
        board.notes.append(f"{s['file']} on track {s['track']} is superseded by the later {s['by']}")
    for key, label in explainer_labels({k: v["explainer"] for k, v in board.explainers.items()}).items():
        board.explainers[key]["label"] = label
    board.summary = win_rates(board.rows)
    board.warnings = track_warnings(board.tracks)
    return board


def is_reference(data: Mapping[str, Any]) -> bool:
    """Whether a submission is a reference, not a method: its explainer or its disclosure says
    ``reference_only`` (``oracle``, ``planted``, ``ladder``); never ranked (DESIGN 10)."""
    explainer, disclosure = data.get("explainer"), data.get("disclosure")
    return any(isinstance(block, Mapping) and block.get("reference_only") is True for block in (explainer, disclosure))


def track_diagnosis(provenance: Mapping[str, Any]) -> dict[str, str]:
    """family -> why it is a diagnosis on a track, from the track's provenance: where the run
    measured that the model relies on a planted cue more than on the object
    (``provenance["cue_reliance"]``, :func:`xaibench.runner.track.cue_reliance`), alignment to
    the object mask is no evidence of a faithful map (the faithful map shows the cue), so the
    alignment family is a diagnosis there, out of the overall rank (DESIGN 10)."""
    figures = provenance.get("cue_reliance")
    if not isinstance(figures, Mapping) or figures.get("relies_on") != "cue":
        return {}
    without_cue, without_object = figures.get("accuracy_without_cue"), figures.get("accuracy_without_object")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (without_cue, without_object)):
        return {}
    return {
        "alignment": (
            f"diagnosis: the model relies on the planted cue (accuracy {without_cue:.2f} with the cue painted "
            f"over, {without_object:.2f} with the object painted over), so alignment to the object is no "
            "evidence of a faithful map; out of the overall rank"
        )
    }


def track_warnings(tracks: Mapping[str, Provenance]) -> dict[str, list[str]]:
    """track -> its warning lines, read from its provenance; tracks without one are left out.
    Today one rule: the model is at chance (``provenance["model_check"]``, the sentence of
    :func:`xaibench.runner.chance.chance_warning`, as the run's health prints it)."""
    out: dict[str, list[str]] = {}
    for track in sorted(tracks):
        prov = tracks[track]
        line = chance_warning(track, prov) if isinstance(prov, Mapping) else None
        if line is not None:
            out[track] = [line]
    return out


def board_json(board: Leaderboard) -> LeaderboardData:
    """The content of leaderboard.json (schema ``xaibench.leaderboard/2``)."""
    return {
        "schema": LEADERBOARD_SCHEMA,
        "rules": board.rules,
        "rows": board.rows,
        "tracks": board.tracks,
        "families": board.families,
        "explainers": board.explainers,
        "summary": board.summary,
        "notes": board.notes,
        "warnings": board.warnings,
    }


# ----------------------------------------------------------------------------- what a view asks of the board


def label_of(board: Leaderboard, key: str) -> str:
    """How an explainer key is shown: its name, a parameter variant with its short parameters
    (``zennit-lrp (epsilon=0.25)``, see :func:`~xaibench.publish.leaderboard.explainer_labels`)."""
    info = board.explainers.get(key)
    label = info.get("label") if info is not None else None
    return label if isinstance(label, str) and label else key


def track_title(board: Leaderboard, track: str) -> str:
    """``<track>: <dataset> x <model> (<n> samples[ · synthetic])``."""
    prov = board.tracks.get(track, {})
    model = prov.get("model", {}).get("name", "?")
    dataset = prov.get("dataset", {}).get("name", "?")
    synthetic = " · synthetic" if prov.get("synthetic") else ""
    return f"{track}: {dataset} x {model} ({prov.get('n_samples', '?')} samples{synthetic})"


def rank_ties(rows: Sequence[BoardRow]) -> dict[tuple[str, int], int]:
    """How many rows share each ``(metric, rank)``: more than one is a tie (``#k=``)."""
    ties: dict[tuple[str, int], int] = defaultdict(int)
    for r in rows:
        if r["rank"] is not None:
            ties[(r["metric"], r["rank"])] += 1
    return ties
