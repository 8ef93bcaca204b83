"""Re-running a ``meta.json`` (DESIGN 9, ``xaibench submission verify --meta``).

:func:`verify_meta` checks that a ``meta.json`` of ``xaibench meta`` is what its submissions give:

1. the sha256 of every submission (and of every records file, when a records folder is given or
   found beside the run) must be the one in its ``provenance``; otherwise it cannot be verified
   as recorded;
2. every figure computed from the submissions alone (rank stability, n for tau 0.9, agreement and
   its means within and across families, the flags, the human ceiling's fractions) is computed
   again with the recorded seed, into a temporary folder, and compared with the stored one:
   numbers within :data:`TOLERANCE` (absolute), strings and verdicts equal;
3. optionally (``rerun``), the validity tests (graded-oracle ladder, planted-cue test) are run
   again by the caller (the runner lives above this package) and their verdicts and figures are
   compared within :data:`RERUN_TOLERANCE`.

The outcome is one line per difference and a verdict line; nothing is written to ``meta.json``.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xaibench.errors import XaibenchError
from xaibench.metaeval.assess import Validity
from xaibench.metaeval.ceiling import Ceiling
from xaibench.metaeval.files import digests
from xaibench.metaeval.submissions import meta_of_submissions
from xaibench.publish.gate import META_SCHEMA
from xaibench.runner import record_files

TOLERANCE = 1e-9  # absolute, figures recomputed from the submissions
RERUN_TOLERANCE = 1e-6  # absolute, figures of validity tests re-run through the runner
# Card blocks that only runs through the runner give (taken as stored without ``rerun``; with it,
# compared wherever the stored and the re-run meta.json both have them).
RERUN_BLOCKS = ("consistency", "protocol")
# The parts of a card computed from the submissions alone (``validity`` is re-run or taken as stored).
FROM_SUBMISSIONS = ("family", "direction", "ranking", "verdict", "flags", "stability", "agreement", "human_ceiling")

# ``rerun(spec)``: the fresh ``meta.json`` (as a dict) of the validity tests re-run from ``spec``
Rerun = Callable[["RunSpec"], Mapping[str, Any]]


@dataclass(frozen=True)
class RunSpec:
    """What the submissions record of the run behind them: what the validity tests are re-run with."""

    explainers: list[str]
    params: dict[str, dict[str, Any]]
    suite: str
    seed: int
    limit: int | None
    tracks: list[str]
    metrics: list[str]


@dataclass
class MetaVerification:
    """The outcome of :func:`verify_meta`: ``status`` 0 (all match), 1 (some differ) or 2 (cannot
    verify); ``differences``: one line each; ``checked``: how many figures were compared."""

    path: Path
    status: int = 0
    differences: list[str] = field(default_factory=list)
    checked: int = 0
    rerun: bool = False
    tested: bool = False  # whether any metric has a validity test (taken as stored without ``rerun``)

    def verdict(self) -> str:
        """The last line printed."""
        what = "figures and verdicts (validity tests re-run)" if self.rerun else "figures and verdicts"
        if self.status == 2:
            return f"FAILED: {self.path} cannot be verified as recorded"
        if self.status == 1:
            return f"FAILED: {len(self.differences)} of {self.checked} {what} of {self.path} differ"
        note = "" if self.rerun or not self.tested else " (validity tests as stored; --rerun-tests re-runs them)"
        return f"PASSED: all {self.checked} {what} of {self.path} match{note}"


def read_meta(path: Path) -> dict[str, Any]:
    """The ``meta.json`` at ``path``; :class:`XaibenchError` (one line) when it is not one."""
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise XaibenchError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise XaibenchError(f"{path}: not JSON ({exc})") from None
    if not (isinstance(data, dict) and data.get("schema") == META_SCHEMA and isinstance(data.get("tracks"), dict)):
        raise XaibenchError(f"{path}: not a meta.json of xaibench meta (schema {META_SCHEMA})")
    return data


def default_submissions(meta_path: Path) -> Path:
    """``<meta.json's folder>/../submissions``, where ``xaibench meta`` puts them beside it."""
    return meta_path.parent.parent / "submissions"


def default_records(meta_path: Path) -> Path:
    """``<meta.json's folder>/../.xaibench/results``: the run's records, where ``xaibench meta`` ran it."""
    return meta_path.parent.parent / ".xaibench" / "results"


def digest_differences(data: Mapping[str, Any], submissions: Path, records: Path | None = None) -> list[str]:
    """One line per submission (and records file, with ``records``) whose sha256 is not the one in
    ``data``'s provenance, or that is missing or extra."""
    provenance = data.get("provenance") or {}
    out = _digest_lines("submission", provenance.get("submissions") or {}, digests(submissions.glob("*.json")))
    if records is not None:
        out += _digest_lines("records file", provenance.get("records") or {}, digests(record_files(records)))
    return out


def _digest_lines(kind: str, recorded: Mapping[str, str], found: Mapping[str, str]) -> list[str]:
    out = []
    for name in sorted(set(recorded) | set(found)):
        if name not in found:
            out.append(f"digest: {kind} {name} is recorded but missing")
        elif name not in recorded:
            out.append(f"digest: {kind} {name} is not recorded in meta.json")
        elif recorded[name] != found[name]:
            out.append(f"digest: {kind} {name} has sha256 {found[name][:12]}, recorded {str(recorded[name])[:12]}")
    return out


def stored_validity(data: Mapping[str, Any]) -> dict[tuple[str, str], Validity]:
    """The validity tests' outcomes as stored in ``data``, by (track, metric)."""
    out: dict[tuple[str, str], Validity] = {}
    for track, card in _cards(data):
        v = card[1].get("validity") or {}
        if v.get("test") is None:
            continue
        verdict = str(card[1].get("verdict", "")).split(",")[0].strip()
        out[(track, card[0])] = Validity(
            verdict=verdict,
            test=v.get("test"),
            figure=v.get("figure"),
            value=_float(v.get("value")),
            ci_low=_float(v.get("ci_low")),
            ci_high=_float(v.get("ci_high")),
            details=dict(v.get("details") or {}),
        )
    return out


def stored_ceilings(data: Mapping[str, Any]) -> dict[tuple[str, str], Ceiling]:
    """The human ceilings as stored in ``data`` (without the fractions, which are recomputed)."""
    out: dict[tuple[str, str], Ceiling] = {}
    for track, (metric, card) in _cards(data):
        c = card.get("human_ceiling")
        if isinstance(c, dict):
            pairs = {str(k): _nan(x) for k, x in (c.get("pairs") or {}).items()}
            out[(track, metric)] = Ceiling(value=_nan(c.get("value")), pairs=pairs, n=int(c.get("n") or 0))
    return out


def _float(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) else None


def _nan(x: Any) -> float:
    """A stored number, NaN for ``null`` (as ``meta.json`` writes NaN)."""
    return float(x) if isinstance(x, (int, float)) else float("nan")


def _cards(data: Mapping[str, Any]) -> Iterator[tuple[str, tuple[str, dict[str, Any]]]]:
    for track, block in sorted((data.get("tracks") or {}).items()):
        for metric, card in sorted(((block or {}).get("metrics") or {}).items()):
            if isinstance(card, dict):
                yield str(track), (str(metric), card)


def recompute(data: Mapping[str, Any], submissions: Path) -> dict[str, Any]:
    """``meta.json`` computed again from ``submissions`` with ``data``'s seed, tracks, validity
    outcomes and human ceilings (written into a temporary folder, returned as a dict)."""
    seed = data.get("seed")
    if not isinstance(seed, int):
        raise XaibenchError("meta.json records no seed; it cannot be recomputed")
    with tempfile.TemporaryDirectory(prefix="xaibench-verify-meta-") as tmp:
        result = meta_of_submissions(
            submissions,
            Path(tmp),
            seed=seed,
            tracks=sorted(data.get("tracks") or {}),
            validity=stored_validity(data),
            ceilings=stored_ceilings(data),
        )
        return json.loads(result.json_path.read_text())


def compare(stored: Any, fresh: Any, where: str, tolerance: float) -> Iterator[tuple[str | None, int]]:
    """``(difference line or None, 1)`` for every leaf figure of ``stored`` against ``fresh``:
    numbers within ``tolerance`` (absolute; ``None`` stands for "not a number"), anything else equal."""
    if isinstance(stored, dict) and isinstance(fresh, dict):
        for key in sorted(set(stored) | set(fresh), key=str):
            if key not in fresh:
                yield f"{where}.{key}: stored but not recomputed", 1
            elif key not in stored:
                yield f"{where}.{key}: recomputed ({_show(fresh[key])}) but not stored", 1
            else:
                yield from compare(stored[key], fresh[key], f"{where}.{key}", tolerance)
        return
    if isinstance(stored, list) and isinstance(fresh, list) and len(stored) == len(fresh):
        if all(not isinstance(x, (dict, list)) for x in stored + fresh) and not any(_is_number(x) for x in stored):
            same = stored == fresh
            yield (None if same else f"{where}: stored {_show(stored)}, recomputed {_show(fresh)}"), 1
            return
        for i, (a, b) in enumerate(zip(stored, fresh, strict=True)):
            yield from compare(a, b, f"{where}[{i}]", tolerance)
        return
    if _is_number(stored) and _is_number(fresh):
        a, b = float(stored), float(fresh)
        same = (math.isnan(a) and math.isnan(b)) or abs(a - b) <= tolerance
    else:
        same = stored == fresh and type(stored) is type(fresh)
    yield (None if same else f"{where}: stored {_show(stored)}, recomputed {_show(fresh)}"), 1


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _show(x: Any) -> str:
    return repr(x) if _is_number(x) else json.dumps(x)


def compare_meta(
    stored: Mapping[str, Any], fresh: Mapping[str, Any], parts: tuple[str, ...], tolerance: float, *, means: bool
) -> tuple[list[str], int]:
    """The difference lines and the number of figures compared between two ``meta.json`` dicts:
    the card ``parts`` of every (track, metric), and the tracks' agreement means when ``means``.
    Lines read ``<track>/<metric>: <part>.<figure>: stored <x>, recomputed <y>``."""
    lines: list[str] = []
    checked = 0
    old, new = stored.get("tracks") or {}, fresh.get("tracks") or {}
    for track in sorted(set(old) | set(new)):
        if track not in new:
            lines.append(f"{track}: stored but not recomputed from the submissions")
            continue
        if track not in old:
            lines.append(f"{track}: recomputed from the submissions but not stored")
            continue
        if means:
            pairs = compare(old[track].get("agreement_means"), new[track].get("agreement_means"), "", tolerance)
            for line, n in pairs:
                checked += n
                if line is not None:
                    lines.append(f"{track}: agreement_means{line}")
        cards_old, cards_new = old[track].get("metrics") or {}, new[track].get("metrics") or {}
        for metric in sorted(set(cards_old) | set(cards_new)):
            if metric not in cards_old or metric not in cards_new:
                side = "stored but not recomputed" if metric in cards_old else "recomputed but not stored"
                lines.append(f"{track}/{metric}: {side}")
                continue
            a = {p: cards_old[metric][p] for p in parts if p in cards_old[metric]}
            b = {p: cards_new[metric][p] for p in parts if p in cards_new[metric]}
            for line, n in compare(a, b, "", tolerance):
                checked += n
                if line is not None:
                    lines.append(f"{track}/{metric}: {line.lstrip('.')}")
    return lines, checked


def run_spec(submissions: Path) -> RunSpec:
    """The run the submissions in ``submissions`` record (explainers and parameters, suite, seed,
    limit, tracks, metrics); :class:`XaibenchError` when they do not record one run."""
    from xaibench.publish.submission import read_submissions

    loaded = read_submissions(submissions)
    if not loaded:
        raise XaibenchError(f"{submissions}: no submissions to re-run the validity tests from")
    runs = {(s.data.get("suite"), s.data.get("seed"), (s.data.get("run") or {}).get("limit")) for s in loaded}
    if len(runs) != 1:
        raise XaibenchError(f"{submissions}: the submissions record {len(runs)} different (suite, seed, limit)")
    suite, seed, limit = runs.pop()
    if not isinstance(suite, str) or not isinstance(seed, int):
        raise XaibenchError(f"{submissions}: the submissions record no suite name or seed to re-run")
    names = [str(s.data["explainer"]["name"]) for s in loaded]
    params = {str(s.data["explainer"]["name"]): dict(s.data["explainer"].get("params") or {}) for s in loaded}
    tracks = sorted({t for s in loaded for t in s.data.get("tracks", {})})
    metrics = sorted({m for s in loaded for t in s.data.get("tracks", {}).values() for m in t.get("metrics", {})})
    return RunSpec(sorted(set(names)), params, suite, seed, limit if isinstance(limit, int) else None, tracks, metrics)


def rerun_differences(stored: Mapping[str, Any], again: Mapping[str, Any]) -> tuple[list[str], int]:
    """The difference lines and the number of figures compared between the validity tests of
    ``stored`` and those of ``again`` (a ``meta.json`` of the tests re-run): each card's validity
    verdict (without the flags) and figures, within :data:`RERUN_TOLERANCE`. A stored card the
    re-run does not have differs when it has a validity test. Noise resilience and adversarial
    reactivity (``consistency``) and protocol sensitivity (``protocol``) are compared too, where
    both have them."""
    lines: list[str] = []
    checked = 0
    fresh_tracks = again.get("tracks") or {}
    for track, (metric, card) in _cards(stored):
        fresh = ((fresh_tracks.get(track) or {}).get("metrics") or {}).get(metric)
        if not isinstance(fresh, dict):
            if (card.get("validity") or {}).get("test") is not None:
                lines.append(f"{track}/{metric}: validity: stored but not re-run")
            continue
        for line, n in compare(card.get("validity"), fresh.get("validity"), "validity", RERUN_TOLERANCE):
            checked += n
            if line is not None:
                lines.append(f"{track}/{metric}: {line}")
        for block in RERUN_BLOCKS:  # measured by perturbed or re-scored runs: compared where both have them
            if isinstance(card.get(block), dict) and isinstance(fresh.get(block), dict):
                for line, n in compare(card[block], fresh[block], block, RERUN_TOLERANCE):
                    checked += n
                    if line is not None:
                        lines.append(f"{track}/{metric}: {line}")
        was, now = (str(c.get("verdict", "")).split(",")[0].strip() for c in (card, fresh))
        checked += 1
        if was != now:
            lines.append(f"{track}/{metric}: validity verdict: stored {was!r}, re-run {now!r}")
    return lines, checked


def verify_meta(
    path: Path,
    submissions: Path | None = None,
    *,
    records: Path | None = None,
    rerun: Rerun | None = None,
) -> MetaVerification:
    """Verify the ``meta.json`` at ``path`` against ``submissions`` (default
    :func:`default_submissions`), see the module doc. ``records``: a folder of records files to
    check too (default :func:`default_records` where it exists). ``rerun``: re-runs the validity tests."""
    data = read_meta(path)
    folder = submissions if submissions is not None else default_submissions(path)
    if not folder.is_dir():
        raise XaibenchError(f"{folder}: no submissions folder (give SUBMISSIONS_DIR)")
    if records is None and default_records(path).is_dir():
        records = default_records(path)
    if records is not None and not records.is_dir():
        raise XaibenchError(f"{records}: no records folder")
    out = MetaVerification(path, rerun=rerun is not None)
    out.differences = digest_differences(data, folder, records)
    if out.differences:
        out.status = 2
        return out
    out.tested = bool(stored_validity(data))
    fresh = recompute(data, folder)
    lines, checked = compare_meta(data, fresh, FROM_SUBMISSIONS, TOLERANCE, means=True)
    if rerun is not None:
        more, n = rerun_differences(data, rerun(run_spec(folder)))
        lines, checked = lines + more, checked + n
    out.differences, out.checked = lines, checked
    out.status = 1 if lines else 0
    return out


def rerun_through(meta: Callable[..., Any], data_dir: str | Path | None = None) -> Rerun:
    """A :data:`Rerun` that re-runs a meta.json's validity tests with ``meta``
    (:func:`xaibench.meta`, injected: the front door lives above this package) in a temporary
    folder, removed after, and returns the fresh meta.json."""

    def rerun(spec: RunSpec) -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="xaibench-verify-meta-") as tmp:
            result = meta(
                spec.explainers,
                suite=spec.suite,
                tracks=spec.tracks,
                metrics=spec.metrics,
                params=spec.params,
                limit=spec.limit,
                seed=spec.seed,
                output_path=tmp,
                data_dir=data_dir,
                progress=False,
            )
            return dict(json.loads(result.json_path.read_text()))

    return rerun
