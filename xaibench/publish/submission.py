"""Submission files: one JSON per explainer with per-track summaries and provenance.

The leaderboard is built only from these files (data, never code). Schema
``xaibench.submission/2`` (per-sample values as arrays against one sample-id list per track,
:func:`xaibench.publish.submission_files.compact_track`) is written; ``/1`` (a sample id ->
value map per metric) is still read, validated and verified. Both are documented in
docs/results.md and published as JSON Schema in docs/submission.schema.json (the package's
copy: ``xaibench/data/submission.schema.json``); ``xaibench submission validate`` checks a file
against it (:mod:`xaibench.publish.validation`).

The disclosure is never silently lost: rewriting a submission keeps the submitter's
``notes`` and a ``true`` ``tuned_on_benchmark``/``reference_only`` from the earlier file.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

from xaibench.errors import XaibenchError
from xaibench.files import write_json_atomic
from xaibench.plugins.manager import Registry
from xaibench.publish.shapes import (
    Disclosure,
    Example,
    ExplainerBlock,
    JsonValue,
    RunSummary,
    SubmissionData,
    SubmittedRun,
    TrackResults,
)
from xaibench.publish.submission_files import (
    SCHEMA_V1,
    SCHEMA_V2,
    Submission,
    compact_track,
    forget,
    keep_only,
    read_bytes,
    submission_text,
)
from xaibench.runner import IN_PROCESS_EXECUTORS
from xaibench.safe_names import checked_name

if TYPE_CHECKING:  # the runner imports torch; reading and ranking submissions needs neither
    from xaibench.runner import RunResult

SUBMISSION_SCHEMA = SCHEMA_V2
"""The format this version writes; :data:`SUPPORTED_SCHEMAS` are those it reads."""
ENVIRONMENT_FIELDS = (
    "xaibench",
    "python",
    "torch",
    "platform",
    "machine",
    "cpu",
    "cpu_capability",
    "device",
    "device_name",
    "torch_threads",
)
"""What of the run's environment a submission records (everything that can change a number)."""
SUPPORTED_SCHEMAS = (SCHEMA_V1, SCHEMA_V2)


def submission_filename(explainer: str, params_digest: str, default_params: bool) -> str:
    """``<explainer>.json``, or ``<explainer>@<params digest>.json`` for other parameters. Both
    must be plain names (:func:`xaibench.safe_names.checked_name`; a registered explainer's name
    is): one that is not is refused in one line, never turned into a path or another file's name."""
    name = checked_name(explainer, kind="explainer")
    if default_params:
        return f"{name}.json"
    return f"{name}@{checked_name(params_digest, kind=f'explainer {name}: params digest')}.json"


class Earlier(TypedDict, total=False):
    """What a rewritten submission keeps of the earlier file: its tracks (those the run did not
    redo), and its disclosure."""

    tracks: dict[str, TrackResults]
    disclosure: Disclosure


def build_submission(
    summary: RunSummary,
    explainer: str,
    previous: Earlier | None,
    examples: Mapping[str, list[Example]] | None = None,
) -> SubmissionData:
    """The submission of ``explainer`` from a run summary; ``examples`` are its example entries
    per track (:func:`xaibench.publish.examples.render_examples`), ``previous`` its earlier file."""
    earlier_tracks = previous.get("tracks", {}) if previous else {}
    tracks = {
        name: cast(TrackResults, compact_track(t) if isinstance(t, dict) else t) for name, t in earlier_tracks.items()
    }
    block: ExplainerBlock | None = None
    for track_name, track in summary["tracks"].items():
        if "explainers" not in track or explainer not in track["explainers"]:
            continue
        entry = track["explainers"][explainer]
        block = entry["explainer"]
        made: dict[str, Any] = {
            "provenance": track["provenance"],
            "explained": entry["explained"],
            "explain_seconds": entry["explain_seconds"],
            **({"cost": entry["cost"]} if "cost" in entry else {}),
            "metrics": entry["metrics"],
        }
        if examples is not None and track_name in examples:
            made["examples"] = examples[track_name]
        tracks[track_name] = cast(TrackResults, compact_track(made))
    if block is None:
        raise KeyError(explainer)
    run = summary["run"]
    recorded = cast("Mapping[str, JsonValue]", run)
    given = previous.get("disclosure") if previous else None
    earlier: Disclosure = given if isinstance(given, dict) else {}
    return {
        "schema": SUBMISSION_SCHEMA,
        "explainer": block,
        "disclosure": {
            "tuned_on_benchmark": bool(block.get("tuned_on_benchmark", False) or earlier.get("tuned_on_benchmark")),
            "reference_only": bool(block.get("reference_only", False) or earlier.get("reference_only")),
            "notes": str(earlier.get("notes", "") or ""),
        },
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "environment": {
            **{k: recorded[k] for k in ENVIRONMENT_FIELDS if k in recorded},
            # said only of trusted in-process runs: verify and the record refuse them (issue 42)
            **({"executor": recorded["executor"]} if recorded.get("executor") in IN_PROCESS_EXECUTORS else {}),
        },
        "run": cast(
            SubmittedRun, {k: recorded[k] for k in ("started", "limit", "torch_threads", "batch_size") if k in recorded}
        ),
        "plugins": run.get("plugins", []),
        "seed": run.get("seed"),
        **({"intervals": run["intervals"]} if "intervals" in run else {}),
        "suite": run.get("suite"),
        "tracks": tracks,
    }


def submission_name(registry: Registry, name: str, block: Mapping[str, Any]) -> str:
    """The file name of explainer ``name``'s submission, from its provenance ``block`` (its
    parameters and their digest): :func:`submission_filename`, default parameters or not."""
    default = block["params"] == dict(registry.entry("explainer", name).cls.default_params)
    return submission_filename(name, block["params_digest"], default)


def write_run(result: RunResult, registry: Registry, folder: Path) -> list[Path]:
    """Publish one run into ``folder``: the example overlays, then one submission per explainer."""
    from xaibench.publish.examples import write_examples  # the overlays' renderer imports torch

    summary = cast(RunSummary, result.summary)
    return write_submissions(summary, registry, folder, examples=write_examples(result.examples, folder))


def write_submissions(
    summary: RunSummary,
    registry: Registry,
    folder: Path,
    examples: Mapping[tuple[str, str], list[Example]] | None = None,
) -> list[Path]:
    """Write or update one submission per explainer of the run (tracks of earlier runs are kept).

    ``examples`` holds the example entries by (track, explainer name), as
    :func:`xaibench.publish.examples.write_examples` returns them.
    """
    written: list[Path] = []
    names = sorted({e for t in summary["tracks"].values() for e in t.get("explainers", {})})
    for name in names:
        block = next(
            t["explainers"][name]["explainer"] for t in summary["tracks"].values() if name in t.get("explainers", {})
        )
        path = folder / submission_name(registry, name, block)
        previous: Earlier | None = None
        if path.exists():
            try:
                loaded = load_submission(path)
            except XaibenchError:
                loaded = None
            if loaded and (
                loaded["explainer"].get("params") != block["params"]
                or loaded["explainer"].get("version") != block.get("version")
                or loaded.get("seed") != summary["run"].get("seed")
            ):
                previous = {"disclosure": loaded.get("disclosure", {})}  # other results: keep only the disclosure
            elif loaded:
                previous = {"tracks": loaded["tracks"], "disclosure": loaded.get("disclosure", {})}
        mine = {track: entries for (track, who), entries in (examples or {}).items() if who == name}
        write_json_atomic(path, build_submission(summary, name, previous, mine), inline_scalars=True)
        written.append(path)
    return written


def load_submission(path: Path) -> SubmissionData:
    """Read and check a submission file; errors name the file and the problem."""
    return read_submission(path).data


def read_submission(path: Path) -> Submission:
    """Read and check a submission file, keeping the bytes read; errors name the file and the problem."""
    try:
        raw = read_bytes(path)
        data = json.loads(submission_text(raw))
    except json.JSONDecodeError as exc:
        raise XaibenchError(f"{path}: line {exc.lineno}, column {exc.colno}: invalid JSON ({exc.msg})") from exc
    except UnicodeDecodeError as exc:
        raise XaibenchError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except ValueError as exc:  # an integer over Python's int conversion limit (4,300 digits)
        raise XaibenchError(f"{path}: invalid JSON ({exc})") from exc
    except RecursionError as exc:
        raise XaibenchError(f"{path}: JSON nested too deeply") from exc
    except OSError as exc:
        raise XaibenchError(f"{path}: cannot read ({exc.strerror})") from exc
    if not isinstance(data, dict):
        raise XaibenchError(f"{path}: a submission is a JSON object")
    schema = data.get("schema")
    if schema not in SUPPORTED_SCHEMAS:
        raise XaibenchError(f"{path}: unsupported schema {schema!r}; supported: {', '.join(SUPPORTED_SCHEMAS)}")
    for field in ("explainer", "tracks"):
        if not isinstance(data.get(field), dict):
            raise XaibenchError(f"{path}: missing or invalid field {field!r}")
    if not isinstance(data["explainer"].get("name"), str):
        raise XaibenchError(f"{path}: explainer.name must be a string")
    return Submission(path, data, raw)


def read_submissions(folder: Path, *, keep_bytes: bool = True) -> list[Submission]:
    """Every ``*.json`` of ``folder`` (sorted by name), read and checked; each file is opened
    once per build (:mod:`xaibench.publish.submission_files`). ``keep_bytes=False`` (a build
    that writes no site): each file's bytes are dropped once parsed, their sha256 kept
    (:attr:`Submission.sha256`), about 8 MB less per large file."""
    if not folder.is_dir():
        raise XaibenchError(f"{folder}: no such submissions folder")
    paths = sorted(folder.glob("*.json"))
    subs = []
    for p in paths:
        sub = read_submission(p)
        if not keep_bytes and sub.raw is not None:
            sub = Submission(sub.path, sub.data, None, hashlib.sha256(sub.raw).hexdigest())
            forget(p)
        subs.append(sub)
    keep_only(paths)
    return subs


def load_submissions(folder: Path) -> list[tuple[Path, SubmissionData]]:
    """``(path, data)`` of every submission of ``folder`` (see :func:`read_submissions`)."""
    return [(s.path, s.data) for s in read_submissions(folder)]
