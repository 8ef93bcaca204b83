"""The record's validity tests (DESIGN 9 and 10), run once per suite version and kept as data.

The meta gate of the record needs two tests that run reference explainers, not the submissions:
the graded-oracle ladder (:mod:`xaibench.metaeval.ladder`) of every alignment metric on every track
with ground truth, and the planted-cue test (:mod:`xaibench.metaeval.planted`) of every
faithfulness metric on the tracks whose model is measured to rely on a planted cue. Their outcome
does not depend on which explainers the record holds, so :func:`compute_validity` runs them once
(the references ``ladder`` and ``planted`` through the runner, into the record's ignored workdir)
and :func:`write_validity` keeps the verdicts in ``record/<suite>/meta/validity.json``
(:data:`VALIDITY_SCHEMA`). The board is then rebuilt from committed files alone
(:func:`read_validity`), byte for byte, with no model run.

Which metrics each test covers is read from the record's submissions (every (track, metric) with
its family); the planted test's reliance figures are each track's ``provenance["cue_reliance"]``
as the submissions recorded it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from xaibench.errors import XaibenchError
from xaibench.files import write_json_atomic
from xaibench.metaeval.assess import Validity
from xaibench.publish.submission import read_submissions

__all__ = [
    "VALIDITY_NAME",
    "VALIDITY_SCHEMA",
    "compute_validity",
    "read_validity",
    "record_metrics",
    "validity_json",
    "write_validity",
]

VALIDITY_SCHEMA = "xaibench.record-validity/1"
VALIDITY_NAME = "validity.json"

Key = tuple[str, str]
"""(track, metric)."""


def record_metrics(submissions: Path) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, float]]]:
    """From the record's submissions: each track's metrics with their family, and each track's
    measured cue reliance (``provenance["cue_reliance"]`` without ``relies_on``, where recorded)."""
    families: dict[str, dict[str, str]] = {}
    reliance: dict[str, dict[str, float]] = {}
    for sub in read_submissions(submissions, keep_bytes=False):
        for track, block in sub.data.get("tracks", {}).items():
            for metric, m in block.get("metrics", {}).items():
                families.setdefault(track, {})[metric] = str(m.get("family", ""))
            figures = dict(block.get("provenance", {}).get("cue_reliance") or {})
            figures.pop("relies_on", None)
            if figures and track not in reliance:
                reliance[track] = {k: float(v) for k, v in figures.items()}
    return families, reliance


def compute_validity(
    submissions: Path,
    suite: str,
    workdir: Path,
    *,
    seed: int = 0,
    data_dir: Path | None = None,
    run_options: Mapping[str, Any] | None = None,
    say: Callable[[str], None] = print,
) -> dict[Key, Validity]:
    """Run the ladder on every track's alignment metrics and the planted-cue test on the
    faithfulness metrics of the tracks with a measured cue reliance, into ``workdir`` (cached:
    a second call reuses the runs), and return each (track, metric)'s verdict
    (:func:`xaibench.metaeval.validity_runs.reference_validity`, its runs made by :func:`xaibench.run`)."""
    from xaibench.metaeval.validity_runs import reference_validity
    from xaibench.python_api import run

    families, reliance = record_metrics(submissions)
    if not families:
        raise XaibenchError(f"{submissions}: no submissions to take the record's tracks and metrics from")
    return reference_validity(
        families, reliance, suite, workdir, run=run, seed=seed, data_dir=data_dir, run_options=run_options, say=say
    )


def validity_json(validity: Mapping[Key, Validity], *, suite: str, seed: int) -> dict[str, Any]:
    """``validity.json``: ``{"schema", "suite", "seed", "tracks": {track: {metric: verdict}}}``,
    each verdict as ``meta.json`` writes it (verdict, test, figure, value, interval, details)."""
    tracks: dict[str, dict[str, Any]] = {}
    for (track, metric), v in sorted(validity.items()):
        tracks.setdefault(track, {})[metric] = {
            "verdict": v.verdict,
            "test": v.test,
            "figure": v.figure,
            "value": v.value,
            "ci_low": v.ci_low,
            "ci_high": v.ci_high,
            "details": v.details,
        }
    return {"schema": VALIDITY_SCHEMA, "suite": suite, "seed": seed, "tracks": tracks}


def write_validity(path: Path, validity: Mapping[Key, Validity], *, suite: str, seed: int) -> Path:
    """Write ``validity.json`` atomically; returns its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, validity_json(validity, suite=suite, seed=seed))
    return path


def read_validity(path: Path, suite: str) -> dict[Key, Validity]:
    """The verdicts of ``validity.json`` (:class:`XaibenchError` in one line, naming the file,
    when it is not this suite's or cannot be read)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise XaibenchError(f"{path}: cannot read the record's validity tests ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != VALIDITY_SCHEMA or data.get("suite") != suite:
        raise XaibenchError(f"{path}: not the validity tests of {suite} (schema {VALIDITY_SCHEMA})")
    out: dict[Key, Validity] = {}
    for track, metrics in data.get("tracks", {}).items():
        for metric, v in metrics.items():
            out[(track, metric)] = Validity(
                verdict=v["verdict"],
                test=v.get("test"),
                figure=v.get("figure"),
                value=v.get("value"),
                ci_low=v.get("ci_low"),
                ci_high=v.get("ci_high"),
                details=dict(v.get("details") or {}),
            )
    return out
