"""The leaderboard model: every submission ranked, with what the files and the site show.

:func:`build_board` ranks loaded submissions (:mod:`xaibench.publish.leaderboard` holds the
rules) into a :class:`Leaderboard`: the tidy rows, each track's provenance and family verdicts,
the explainers' blocks and flags, the win rates across tracks, the notes on superseded files and
the warnings per track (a model at chance), and what explaining each track cost each explainer
(:func:`track_costs`: seconds per image, peak memory, the device; shown, never ranked).
The board keeps the submissions it was built from, so the site shows them without reading a file
again. :mod:`xaibench.publish.writers` writes the board (CSV, JSON, Markdown, the terminal);
:mod:`xaibench.site` builds the static site from it.

Verification. A submission's own ``verification`` block is what the file says of itself: anyone
can write ``"passed": true`` into it. The board never shows it as verified. An explainer's
``verification`` on the board is the board builder's own result for that exact content: the
``verified`` mapping passed to :func:`build_board` (from the builder's or CI's own run of
``xaibench submission verify``, kept outside the submissions), keyed by :func:`content_digest`,
the sha256 of the file's content without its ``verification`` block. Without such a result it is
``None``. A file with a block of its own also gets ``claimed_verification`` (the block, as
written) and ``verification_claim``, how to show it: :data:`CLAIMED_VERIFIED` ("claims verified
(not checked here)") or :data:`CLAIMED_FAILED`, ``None`` where the builder's own result is shown.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xaibench.families import POLICIES
from xaibench.publish.applicable import away_from
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
    ExplainerCost,
    ExplainerInfo,
    FamilyVerdict,
    LeaderboardData,
    Provenance,
    Rules,
    SubmissionData,
    Verification,
    WinRates,
)
from xaibench.publish.submission import read_submissions
from xaibench.publish.submission_files import Submission
from xaibench.runner import chance_warning

LEADERBOARD_SCHEMA = "xaibench.leaderboard/2"
CLAIMED_VERIFIED = "claims verified (not checked here)"
"""How a file's own ``verification`` block that says it passed is shown: a claim, not a check."""
CLAIMED_FAILED = "claims verification failed (not checked here)"
"""How a file's own ``verification`` block that says it failed is shown."""


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
    cost: dict[str, dict[str, ExplainerCost]] = field(default_factory=dict)
    """track -> explainer key -> what explaining the track cost (:func:`explainer_cost`): shown
    beside the ranks, never part of one."""
    meta: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    """The ``meta.json`` of ``xaibench meta`` applied to this board (:mod:`xaibench.publish.gate`),
    ``None`` when none matched: the site's metrics page shows it."""
    submissions: tuple[Submission, ...] = field(default=(), repr=False, compare=False)
    """The submissions the board was built from, as read (superseded tracks included)."""

    def track_names(self) -> list[str]:
        return sorted({r["track"] for r in self.rows})

    def away(self, track: str) -> dict[str, str]:
        """The explainers that apply to none of ``track``'s samples, and why: they get no row in
        the track's tables, only one line per reason (:mod:`xaibench.publish.applicable`)."""
        return away_from(track, self.submissions, self.rows)


def meta_file(submissions_dir: Path) -> Path:
    """Where ``xaibench meta`` writes by default, beside the submissions: ``<parent>/meta/meta.json``."""
    return submissions_dir.parent / "meta" / "meta.json"


def build_leaderboard(
    submissions_dir: Path,
    meta: Path | None = None,
    *,
    keep_bytes: bool = True,
    verified: Mapping[str, Verification] | None = None,
) -> Leaderboard:
    """Rank the submission files of a folder (two files for one explainer and parameters, or
    explainer names that look alike: an error naming both), gated by the ``meta.json`` of
    ``xaibench meta`` (``meta``, default :func:`meta_file`) when it matches them
    (:mod:`xaibench.publish.gate`). ``keep_bytes=False``: the files' bytes are not kept (a build
    without a site; :func:`~xaibench.publish.submission.read_submissions`). ``verified``: the
    builder's own verification results (see the module doc)."""
    subs = read_submissions(submissions_dir, keep_bytes=keep_bytes)
    return build_board(subs, gate=read_gate(meta or meta_file(submissions_dir), subs), verified=verified)


def content_digest(data: Mapping[str, Any]) -> str:
    """The sha256 (hex) of a submission's content without its ``verification`` block (canonical
    JSON: sorted keys, no spaces): what a verification result is bound to, so a result holds for
    that content only and a block written into the file later does not change it."""
    content = {k: v for k, v in data.items() if k != "verification"}
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _verification(data: Mapping[str, Any], verified: Mapping[str, Verification]) -> dict[str, Any]:
    """An explainer's verification fields on the board (see the module doc)."""
    own = data.get("verification")
    claimed = own if isinstance(own, dict) else None
    trusted = verified.get(content_digest(data)) if verified else None
    if not (isinstance(trusted, Mapping) and isinstance(trusted.get("passed"), bool)):
        trusted = None
    out: dict[str, Any] = {"verification": dict(trusted) if trusted is not None else None}
    if claimed is not None:  # only then: a board of files without a block keeps its shape
        passed = claimed.get("passed")
        out["claimed_verification"] = claimed
        out["verification_claim"] = (
            None
            if trusted is not None or not isinstance(passed, bool)
            else CLAIMED_VERIFIED
            if passed
            else CLAIMED_FAILED
        )
    return out


def build_board(
    submissions: Iterable[Submission | tuple[Path, SubmissionData]],
    gate: Gate | None = None,
    *,
    verified: Mapping[str, Verification] | None = None,
) -> Leaderboard:
    """Rank loaded submissions (or ``(path, data)`` pairs; the explainer key is the file's stem);
    ``gate``: meta-evaluation's invalid metrics, shown but not ranked; ``verified``: the board
    builder's own verification results by :func:`content_digest` (a file's own ``verification``
    block is only a claim: see the module doc)."""
    loaded = tuple(Submission.of(s) for s in submissions)
    subs = resolve_duplicates(loaded)
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
        board.explainers[sub.key] = {  # type: ignore[typeddict-unknown-key]
            "file": sub.path.name,
            "explainer": data["explainer"],
            "disclosure": data.get("disclosure", {}),
            "environment": data.get("environment", {}),
            "plugins": data.get("plugins", []),
            "seed": data.get("seed"),
            "created": data.get("created"),
            **_verification(data, verified or {}),
            "flags": {t: flags[sub.key].get(t, []) for t in sorted(data["tracks"])},
        }
    for key, label in explainer_labels({k: v["explainer"] for k, v in board.explainers.items()}).items():
        board.explainers[key]["label"] = label
    board.summary = win_rates(board.rows)
    board.warnings = track_warnings(board.tracks)
    board.cost = track_costs(subs)
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
    the object mask is no evidence of a faithful map (the faithful map shows the cue), so each
    family with a ``cue_diagnosis`` (:mod:`xaibench.families`: alignment) is a diagnosis there,
    out of the overall rank (DESIGN 10)."""
    figures = provenance.get("cue_reliance")
    if not isinstance(figures, Mapping) or figures.get("relies_on") != "cue":
        return {}
    without_cue, without_object = figures.get("accuracy_without_cue"), figures.get("accuracy_without_object")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (without_cue, without_object)):
        return {}
    return {
        p.name: p.cue_diagnosis.format(without_cue=without_cue, without_object=without_object)
        for p in POLICIES
        if p.cue_diagnosis
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


def track_costs(subs: Sequence[Submission]) -> dict[str, dict[str, ExplainerCost]]:
    """track -> explainer key -> :func:`explainer_cost`, for every track of every submission
    (tracks and keys sorted); a track without a ``cost`` block gets ``None`` figures."""
    out: dict[str, dict[str, ExplainerCost]] = defaultdict(dict)
    for sub in subs:
        env = sub.data.get("environment")
        for name, track_data in sub.data["tracks"].items():
            cost = track_data.get("cost") if isinstance(track_data, Mapping) else None
            out[str(name)][sub.key] = explainer_cost(cost, env)
    return {t: dict(sorted(out[t].items())) for t in sorted(out)}


def explainer_cost(cost: Any, environment: Any) -> ExplainerCost:
    """What explaining a track cost, from a submission's ``tracks.<track>.cost`` block
    (:func:`xaibench.runner.cost.summarise_costs`) and its ``environment``: seconds per image and
    in all, peak RSS above the worker's baseline and peak device memory (MB), the measured and
    total images, the device. Data from a file: a figure that is not a finite non-negative
    number (a count: a non-negative integer) is ``None``, as is everything a file without the
    block lacks."""
    c = cost if isinstance(cost, Mapping) else {}
    env = environment if isinstance(environment, Mapping) else {}
    device = next((v for v in (env.get("device_name"), env.get("device")) if isinstance(v, str) and v), None)
    return {
        "per_sample_seconds": _figure(c.get("per_sample_seconds")),
        "seconds": _figure(c.get("seconds")),
        "peak_rss_mb": _figure(c.get("peak_rss_mb")),
        "peak_device_mb": _figure(c.get("peak_device_mb")),
        "measured": _count(c.get("measured")),
        "n_samples": _count(c.get("n_samples")),
        "device": device,
        "torch_threads": _count(env.get("torch_threads")),
    }


def _figure(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    return float(value) if ok else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


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
        "cost": board.cost,
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
