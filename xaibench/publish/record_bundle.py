"""The record that travels with the package, and a run that joins it (DESIGN 10, point 5).

The leaderboard of record lives in the repository (``record/<suite>/``); what a user who
pip-installed xaibench needs of it to rank a new explainer is the per-sample values. The
*bundle* (``xaibench/data/record/<suite>.json.gz``, :data:`BUNDLE_SCHEMA`) holds every record
submission with its values and provenance but without what only the site shows (histograms,
curves, example overlays): :func:`make_bundle` derives it from the record's submissions, byte for
byte the same on every machine (gzip without a time stamp), and CI checks that the committed
bundle is that derivation.

:func:`join_record` is what ``xaibench run --suite <record suite>`` does after writing its own
submissions: it checks that the run can be compared with the record on every track it ran (the
dataset's revision, the model's identity, and each shared metric's version and parameters must
equal the record's; a difference is named in one line and nothing is joined) and shows what
is only informative (torch, platform, device). Then it writes the record's submissions beside
the run's, so the printed table and the leaderboard files rank the new explainer against the
record. It never overwrites a submission it did not write itself: the ones it wrote are listed,
with their digests, in ``.record-<suite>.joined`` (JSON) in the submissions folder, and only those,
unchanged since, are refreshed from a newer bundle.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xaibench.errors import XaibenchError
from xaibench.files import write_bytes_atomic, write_json_atomic
from xaibench.publish.submission import read_submissions
from xaibench.safe_names import file_name

__all__ = [
    "BUNDLE_DIR",
    "BUNDLE_SCHEMA",
    "JoinedRecord",
    "bundle_bytes",
    "bundle_file",
    "join_record",
    "make_bundle",
    "read_bundle",
    "values_only",
]

BUNDLE_SCHEMA = "xaibench.record-bundle/1"
BUNDLE_DIR = Path(__file__).resolve().parents[1] / "data" / "record"
"""Where the package keeps the bundles: ``xaibench/data/record/<suite>.json.gz``."""
SITE_ONLY_METRIC_KEYS = ("histogram", "curve")
"""What a metric block keeps for the site alone; ranks never read them (docs/results.md)."""


def bundle_file(suite: str, folder: Path | None = None) -> Path:
    """The bundle of ``suite`` in ``folder`` (default :data:`BUNDLE_DIR`)."""
    return (folder if folder is not None else BUNDLE_DIR) / f"{file_name(suite, kind='suite')}.json.gz"


def values_only(data: Mapping[str, Any]) -> dict[str, Any]:
    """A submission without what only the site shows: its tracks' ``examples`` and its metrics'
    histograms and curves. It still validates and ranks as the full one does."""
    out = dict(data)
    tracks: dict[str, Any] = {}
    for name, track in data.get("tracks", {}).items():
        block = {k: v for k, v in track.items() if k != "examples"}
        block["metrics"] = {
            m: {k: v for k, v in metric.items() if k not in SITE_ONLY_METRIC_KEYS}
            for m, metric in track.get("metrics", {}).items()
        }
        tracks[name] = block
    out["tracks"] = tracks
    return out


def make_bundle(submissions: Path, suite: str) -> dict[str, Any]:
    """The bundle of the record's ``submissions`` folder: ``{"schema", "suite", "submissions":
    {file name: values-only submission}}``, by file name."""
    subs = sorted(read_submissions(submissions, keep_bytes=False), key=lambda s: s.path.name)
    if not subs:
        raise XaibenchError(f"{submissions}: no submissions to bundle")
    wrong = [s.path.name for s in subs if s.data.get("suite") != suite]
    if wrong:
        raise XaibenchError(f"{submissions}/{wrong[0]}: not a submission of {suite}")
    return {
        "schema": BUNDLE_SCHEMA,
        "suite": suite,
        "submissions": {s.path.name: values_only(s.data) for s in subs},
    }


def bundle_bytes(bundle: Mapping[str, Any]) -> bytes:
    """The bundle as written: compact JSON, gzip level 9 without a time stamp (the same bytes for
    the same bundle with the same zlib)."""
    text = json.dumps(bundle, separators=(",", ":"), allow_nan=False)
    return gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)


def write_bundle(path: Path, bundle: Mapping[str, Any]) -> Path:
    """Write the bundle atomically; returns its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, bundle_bytes(bundle))
    return path


def read_bundle(suite: str, folder: Path | None = None) -> dict[str, Any] | None:
    """The bundle of ``suite`` that ships with the package; ``None`` when there is none (a suite
    without a record). :class:`XaibenchError` naming the file when it cannot be read."""
    path = bundle_file(suite, folder)
    if not path.is_file():
        return None
    try:
        data = json.loads(gzip.decompress(path.read_bytes()).decode("utf-8"))
    except (OSError, ValueError, EOFError) as exc:
        raise XaibenchError(f"{path}: the record's bundle cannot be read ({exc}); reinstall xaibench") from None
    if not isinstance(data, dict) or data.get("schema") != BUNDLE_SCHEMA or data.get("suite") != suite:
        raise XaibenchError(f"{path}: not the record bundle of {suite} (schema {BUNDLE_SCHEMA}); reinstall xaibench")
    return data


@dataclass
class JoinedRecord:
    """What :func:`join_record` did: whether the run joined the record, the record's files it
    wrote into the submissions folder (``files``, every record submission there), and the lines
    to show."""

    suite: str
    joined: bool = False
    files: list[Path] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)


def _reference(bundle: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per track, the record's provenance to match: dataset revision, model identity, and each
    metric's version and parameters (from the first submission that holds the track)."""
    out: dict[str, dict[str, Any]] = {}
    for data in bundle["submissions"].values():
        for track, block in data.get("tracks", {}).items():
            ref = out.setdefault(track, {"metrics": {}})
            prov = block.get("provenance", {})
            ref.setdefault("revision", prov.get("dataset", {}).get("revision"))
            ref.setdefault("model", prov.get("model", {}).get("identity"))
            for metric, m in block.get("metrics", {}).items():
                ref["metrics"].setdefault(metric, (m.get("version"), m.get("params")))
    return out


def _mismatch(suite: str, summary: Mapping[str, Any], reference: Mapping[str, dict[str, Any]]) -> str | None:
    """The first thing that keeps this run from being compared with the record, in one line."""
    for track, block in summary["tracks"].items():
        if "error" in block:
            continue
        ref = reference.get(track)
        if ref is None:
            return f"track {track!r} is not in the record of {suite}"
        prov = block["provenance"]
        revision, model = prov["dataset"]["revision"], prov["model"]["identity"]
        if revision != ref["revision"]:
            return f"track {track!r}: dataset revision {revision} here, {ref['revision']} in the record of {suite}"
        if model != ref["model"]:
            return f"track {track!r}: model {model} here, {ref['model']} in the record of {suite}"
        for entry in block.get("explainers", {}).values():
            for metric, m in entry.get("metrics", {}).items():
                if metric not in ref["metrics"]:
                    continue
                version, params = ref["metrics"][metric]
                if m.get("version") != version:
                    return (
                        f"track {track!r}, metric {metric!r}: version {m.get('version')} here, "
                        f"{version} in the record of {suite}"
                    )
                if json.dumps(m.get("params"), sort_keys=True) != json.dumps(params, sort_keys=True):
                    return (
                        f"track {track!r}, metric {metric!r}: parameters {m.get('params')} here, "
                        f"{params} in the record of {suite}"
                    )
    return None


def _informative(bundle: Mapping[str, Any], summary: Mapping[str, Any]) -> str:
    """Torch, platform and device of the record against this run's: shown, never required."""
    first = next(iter(bundle["submissions"].values()))
    env, run = first.get("environment", {}), summary.get("run", {})

    def said(e: Mapping[str, Any]) -> str:
        return f"torch {e.get('torch')} on {e.get('platform') or e.get('machine') or '?'}, device {e.get('device')}"

    return f"the record was computed with {said(env)}; this run: {said(run)}"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def join_record(submissions: Path, summary: Mapping[str, Any], suite: str) -> JoinedRecord | None:
    """Join the run of ``summary`` (its submissions written in ``submissions``) to the record of
    ``suite`` that ships with the package (see the module doc); ``None`` when ``suite`` has no
    record."""
    bundle = read_bundle(suite)
    if bundle is None:
        return None
    out = JoinedRecord(suite)
    why = _mismatch(suite, summary, _reference(bundle))
    if why is not None:
        out.lines.append(f"not ranked against the record of {suite}: {why}")
        return out
    marker = submissions / f".record-{file_name(suite, kind='suite')}.joined"
    written: dict[str, str] = {}
    if marker.is_file():
        try:
            written = dict(json.loads(marker.read_text(encoding="utf-8")).get("files", {}))
        except (OSError, ValueError, AttributeError):
            written = {}
    kept: dict[str, str] = {}
    for name, data in bundle["submissions"].items():
        path = submissions / name
        if path.exists() and not (name in written and _sha(path) == written[name]):
            continue  # a submission of this folder's own (or edited since): never overwritten
        write_json_atomic(path, data, inline_scalars=True)
        kept[name] = _sha(path)
        out.files.append(path)
    write_json_atomic(marker, {"suite": suite, "files": kept})
    out.joined = True
    shared = len(out.files)
    out.lines.append(f"ranked against the record of {suite}: {shared} of its submissions in {submissions}/")
    out.lines.append(_informative(bundle, summary))
    return out
