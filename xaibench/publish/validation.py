"""Line-precise validation of submission files against ``xaibench.submission/1`` and ``/2``.

Three layers, every finding reported as ``FILE:LINE:COLUMN: message (at /json/pointer)``:

1. JSON syntax (the decoder's line and column), plus what Python's decoder lets through but
   JSON forbids (``NaN``, ``Infinity``) and duplicate keys (the last one would silently win).
   Hostile text gets one finding, never a crash: nesting deeper than :data:`MAX_DEPTH`, an
   integer longer than Python's conversion limit (4,300 digits), a number beyond float range.
2. The JSON Schema (``xaibench/data/submission.schema.json``, published as
   ``docs/submission.schema.json``), checked with ``jsonschema``. Each error's JSON pointer is
   mapped to the line of the offending key (for a missing key: the line of the object that
   lacks it) by a small scanner that records where every key and array item starts.
3. Consistency the schema cannot express: for ``/2``, each metric's ``values`` decode and align
   with its ``sample_ids`` (listed once each), and neither version uses the other's keys;
   interval order, counts, the summary numbers against
   the per-sample values (:mod:`xaibench.publish.recompute`: finite, at most 1e100 in size, the
   mean and the seeded bootstrap interval recomputed), histogram and curve shapes, disclosure
   vs the explainer's own flags, and, for a file on disk, that each example overlay exists
   under ``assets/``, is a JPEG (``jpeg``) or, in older files, a PNG (``png``; never both keys:
   the schema says so) and has the recorded sha256; a text example (``tokens``, DESIGN 12) has one
   value per token, its ground-truth positions increasing among its tokens, no overlay, at most
   :data:`MAX_TEXT_EXAMPLES` of them per track (:func:`token_example_errors`).
4. What a file cannot vouch for itself (the registry is the installed one,
   :func:`xaibench.plugins.manager.get_registry`):

   - every per-sample value (and the mean and interval ends) of a metric lies within the
     ``value_range`` that the installed metric of that id declares (:attr:`xaibench.api.Metric.value_range`,
     within :data:`xaibench.api.RANGE_SLACK`); a metric id not installed here, or one declaring no
     range, has no range check (:func:`range_notes` says which);
     A process without torch (a board built without its site) reads the registry in a child
     process, so that it still imports no torch (:func:`installed`);
   - ``created`` is not in the future (more than :data:`CLOCK_SKEW` past this machine's clock): a
     date is the file's own claim, and a far one served once to make a file win over another;
   - the explainer's name is not a look-alike of an installed explainer's
     (:func:`xaibench.publish.identity.lookalike_problem`: ``gradсam`` with a Cyrillic ``с`` is
     refused, it would be read as ``gradcam``). Names across files (two files for one explainer,
     look-alikes of each other) are checked when the board is built
     (:func:`xaibench.publish.identity.check_submissions`).
"""

from __future__ import annotations

import bisect
import datetime as dt
import hashlib
import itertools
import json
import math
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from json.decoder import scanstring  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any, cast

import numpy as np

from xaibench.api import metric_value_range, outside_range
from xaibench.errors import XaibenchError
from xaibench.pasta.highlight import HIGHLIGHT_NAME
from xaibench.pasta.highlight import MAX_EXAMPLES as MAX_TEXT_EXAMPLES
from xaibench.publish.identity import lookalike_problem
from xaibench.publish.recompute import MAX_MAGNITUDE, summary_errors, track_intervals
from xaibench.publish.sample_values import SampleValues
from xaibench.publish.shapes import Example, JsonObject, MetricSummary, SubmissionData
from xaibench.publish.submission_files import (
    SCHEMA_V2,
    metric_ids,
    metric_values,
    per_sample,
    read_bytes,
    submission_text,
)
from xaibench.stats import INTERVAL_RULE

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
JPEG_SIGNATURE = b"\xff\xd8\xff"
OVERLAY_FORMATS: dict[str, tuple[bytes, str, str]] = {
    "jpeg": (JPEG_SIGNATURE, "JPEG", ".jpg"),
    "png": (PNG_SIGNATURE, "PNG", ".png"),
}
"""The keys an example names its overlay file by (one of them, never both), with the signature
the file's bytes start with, the format's name and its file suffix: ``jpeg`` for the files runs
write now, ``png`` for those of older submissions (still read and shown)."""
_WS = re.compile(r"[ \t\n\r]*")
_SCALAR = re.compile(r"-?Infinity|NaN|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null")
_MAX_MESSAGE = 240
MAX_DEPTH = 64
"""Deepest nesting of arrays and objects accepted (a submission needs about 8); deeper text is
reported, not parsed, so neither the decoder nor the validators can run out of stack."""
_PLAIN = r'"[^"\\]*"|-?\d[\d.eE+-]*|true|false|null'
_PLAIN_ARRAY = re.compile(rf"\[\s*+(?:(?:{_PLAIN})\s*+(?:,\s*+(?:{_PLAIN})\s*+)*+)?+\]")  # possessive: no backtracking
_PLAIN_ITEM = re.compile(rf"{_PLAIN}|\]")  # in a plain array: its items, then its end
_SUSPECT_NUMBER = re.compile(r"\d{300}|[eE]\+?\d{3}")  # a number that may be out of a float's range
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')  # a string's plain runs in one step
_OUT_OF_RANGE = "is out of range (beyond a 64-bit float)"
CLOCK_SKEW = dt.timedelta(days=1)
"""How far past this machine's clock a submission's ``created`` may lie (clocks and time zones
differ); a later date is refused."""


@dataclass(frozen=True)
class Issue:
    """One finding: where (file, 1-based line and column, JSON pointer) and what."""

    file: str
    line: int
    column: int
    pointer: str
    message: str

    def __str__(self) -> str:
        where = f" (at {self.pointer})" if self.pointer else ""
        return f"{self.file}:{self.line}:{self.column}: {self.message}{where}"


@lru_cache(maxsize=1)
def submission_schema() -> JsonObject:
    """The JSON Schema of ``xaibench.submission/1`` (shipped as package data)."""
    text = resources.files("xaibench").joinpath("data/submission.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


def pointer(parts: Iterable[Any]) -> str:
    """RFC 6901 JSON pointer of a path (``~`` -> ``~0``, ``/`` -> ``~1``); the root is ``""``."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


class _Locator:
    """Offsets of every key (object members) and item (array elements) of a JSON text.

    An array of plain scalars (numbers in range, ``true``, ``false``, ``null``, strings without
    escapes: histograms, sample ids) is passed in one regular-expression match, its items' offsets
    found again only when a finding points into it (:meth:`offset`): most of a submission's items
    are in such arrays."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.positions: dict[str, int] = {"": _WS.match(text, 0).end()}  # type: ignore[union-attr]
        self.flat: dict[str, int] = {}  # pointer of a plain array -> the offset of its "["
        self.findings: list[tuple[int, str, str]] = []  # offset, pointer, message
        self._value(0, "")

    def offset(self, ptr: str) -> int:
        """The offset of ``ptr``'s value, or of its nearest enclosing value that has one."""
        while ptr not in self.positions:
            parent, _, item = ptr.rpartition("/")
            if parent in self.flat and item.isdigit():
                items = _PLAIN_ITEM.finditer(self.text, self.flat[parent] + 1)
                for k, match in enumerate(items):
                    if k == int(item) and match.group(0) != "]":
                        return match.start()
                    if match.group(0) == "]":
                        break
            ptr = parent if "/" in ptr else ""
        return self.positions[ptr]

    def _ws(self, i: int) -> int:
        return _WS.match(self.text, i).end()  # type: ignore[union-attr]

    def _value(self, i: int, ptr: str) -> int:
        text = self.text
        i = self._ws(i)
        c = text[i]
        if c == "{":
            i = self._ws(i + 1)
            if text[i] == "}":
                return i + 1
            seen: set[str] = set()
            while True:
                i = self._ws(i)
                at = i
                key, i = scanstring(text, i + 1)
                child = ptr + pointer([key])
                if key in seen:
                    self.findings.append((at, child, f"duplicate key {key!r} (the last one would win)"))
                seen.add(key)
                self.positions[child] = at
                i = self._value(self._ws(i) + 1, child)  # skip the colon
                i = self._ws(i)
                if text[i] == "}":
                    return i + 1
                i += 1  # the comma
        if c == "[":
            plain = _PLAIN_ARRAY.match(text, i)
            if plain is not None and _SUSPECT_NUMBER.search(text, i, plain.end()) is None:
                self.flat[ptr] = i
                return plain.end()
            i = self._ws(i + 1)
            if text[i] == "]":
                return i + 1
            k = 0
            while True:
                i = self._ws(i)
                child = f"{ptr}/{k}"
                self.positions[child] = i
                i = self._ws(self._value(i, child))
                if text[i] == "]":
                    return i + 1
                i += 1
                k += 1
        if c == '"':
            return scanstring(text, i + 1)[1]
        match = _SCALAR.match(text, i)
        if match is None:  # cannot happen after json.loads accepted the text
            raise ValueError(f"unexpected character {c!r} at offset {i}")
        literal = match.group(0)
        if literal.lstrip("-") in ("NaN", "Infinity"):
            self.findings.append((i, ptr, f"{literal} is not valid JSON; write null for a missing value"))
        elif literal[-1].isdigit() and math.isinf(float(literal)):
            self.findings.append((i, ptr, f"number {_short_number(literal)} {_OUT_OF_RANGE}"))
        return match.end()


def _short_number(literal: str) -> str:
    return literal if len(literal) <= 24 else f"{literal[:12]}...({len(literal)} characters)"


def _too_deep(text: str, limit: int) -> int | None:
    """Offset of the first bracket nested deeper than ``limit`` (strings skipped), else None."""
    depth = 0
    for match in _TOKENS.finditer(text):
        c = match.group(0)
        if c in "[{":
            depth += 1
            if depth > limit:
                return match.start()
        elif c in "]}":
            depth -= 1
    return None


def _long_integer(text: str) -> int | None:
    """Offset of the first integer over Python's int conversion limit, else None."""
    limit = sys.get_int_max_str_digits()
    match = re.search(rf"\d{{{limit + 1},}}", text) if limit else None
    return match.start() if match else None


class _Lines:
    def __init__(self, text: str) -> None:
        self.starts = [0] + [m.end() for m in re.finditer(r"\n", text)]

    def __call__(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.starts, offset)
        return line, offset - self.starts[line - 1] + 1


def validate_text(text: str, file: str = "<submission>", folder: Path | None = None) -> list[Issue]:
    """Every problem of a submission's text, sorted by position; ``[]`` when it is valid.

    ``folder`` (the submission's folder) enables the checks of example overlay files.
    """
    lines = _Lines(text)
    deep = _too_deep(text, MAX_DEPTH)
    if deep is not None:
        return [Issue(file, *lines(deep), "", f"JSON nested deeper than {MAX_DEPTH} levels")]
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return [Issue(file, exc.lineno, exc.colno, "", f"invalid JSON: {exc.msg}")]
    except ValueError as exc:  # an integer over the int conversion limit
        at = _long_integer(text)
        message = f"number has over {sys.get_int_max_str_digits()} digits" if at is not None else str(exc)
        return [Issue(file, *lines(at or 0), "", message)]
    except RecursionError:  # MAX_DEPTH keeps this away; a guard for a smaller recursion limit
        return [Issue(file, 1, 1, "", "JSON nested too deeply to parse")]
    try:
        return _validate(text, data, file, folder, lines)
    except RecursionError:
        return [Issue(file, 1, 1, "", "JSON nested too deeply to validate")]


def _validate(text: str, data: Any, file: str, folder: Path | None, lines: _Lines) -> list[Issue]:
    locator = _Locator(text)

    def issue(ptr: str, message: str, offset: int | None = None) -> Issue:
        at = offset if offset is not None else locator.offset(ptr)
        line, column = lines(at)
        if len(message) > _MAX_MESSAGE:
            message = message[: _MAX_MESSAGE - 3] + "..."
        return Issue(file, line, column, ptr, message)

    issues = [issue(ptr, msg, at) for at, ptr, msg in locator.findings]
    issues += [issue(ptr, msg) for ptr, msg in schema_errors(data)]
    if not any(i.message.startswith("schema:") or i.message.endswith(_OUT_OF_RANGE) for i in issues):
        issues += [issue(ptr, msg) for ptr, msg in consistency_errors(data, folder)]
    return sorted(issues, key=lambda i: (i.line, i.column, i.message))


def schema_errors(data: Any) -> Iterator[tuple[str, str]]:
    """``(pointer, message)`` of every JSON Schema violation (messages start with ``schema:``)."""
    validator_cls = _validator_class()
    validator = validator_cls(submission_schema(), format_checker=validator_cls.FORMAT_CHECKER)
    for error in validator.iter_errors(data):
        ptr = pointer(error.absolute_path)
        if error.validator == "required" or error.validator == "dependentRequired":
            yield ptr, f"schema: {error.message}"
        elif error.validator == "not" and set(error.validator_value) == {"required"}:
            keys = " and ".join(error.validator_value["required"])
            yield ptr, f"schema: {keys} are not allowed together (one of them)"
        elif error.validator in ("enum", "const", "type", "pattern", "minimum", "minLength", "format"):
            yield ptr, f"schema: {_short_repr(error.instance)} is not allowed here: {_constraint(error)}"
        else:
            yield ptr, f"schema: {error.message}"


_ITEM_TYPES: dict[str, Any] = {
    "string": lambda v: isinstance(v, str),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
    "null": lambda v: v is None,
}


@lru_cache(maxsize=1)
def _validator_class() -> Any:
    """The schema's validator class with a fast path for arrays of plain values (``sample_ids``,
    histogram bins, curve points: tens of thousands of items in a large file). Where the item
    schema is only a ``type`` of plain values (and a ``minimum``), every item is checked in one
    Python loop; only an array with a bad item goes through jsonschema's own ``items`` (same
    errors, same messages). jsonschema validates each item by descending into it, about 5 us
    apiece: half of a 20-track file's schema check."""
    import jsonschema

    base = jsonschema.validators.validator_for(submission_schema())
    items = base.VALIDATORS["items"]

    def fast_items(validator: Any, schema_items: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if isinstance(instance, list) and isinstance(schema_items, dict) and set(schema_items) <= {"type", "minimum"}:
            kinds = schema_items.get("type")
            kinds = [kinds] if isinstance(kinds, str) else kinds
            if isinstance(kinds, list) and kinds and all(k in _ITEM_TYPES for k in kinds):
                checks, low = [_ITEM_TYPES[k] for k in kinds], schema_items.get("minimum")
                if all(any(c(v) for c in checks) and (low is None or (v is not None and v >= low)) for v in instance):
                    return
        yield from items(validator, schema_items, instance, schema)

    return jsonschema.validators.extend(base, {"items": fast_items})


def _short_repr(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, dict | list) else type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def _constraint(error: Any) -> str:
    v, expected = error.validator, error.validator_value
    if v == "type":
        return f"expected type {' or '.join(expected) if isinstance(expected, list) else expected}"
    if v == "enum":
        return "expected one of " + ", ".join(json.dumps(x) for x in expected)
    return f"{v} {json.dumps(expected)}"


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) else None


@dataclass(frozen=True)
class Installed:
    """What the checks of a file read from the installed registry: each metric id's declared
    ``value_range`` and version (metrics declaring none are left out) and the explainers' names."""

    ranges: dict[str, tuple[tuple[float, float], str]]
    explainers: tuple[str, ...]


def installed() -> Installed:
    """The installed registry's metric ranges and explainer names (:class:`Installed`); empty
    when the registry cannot be built (then no range or name is checked against it). A process
    that has not imported torch (a board built without its site, which must not pay for it) reads
    the registry in a child process instead (:func:`_installed_elsewhere`, once per process)."""
    return _installed_here() if "torch" in sys.modules else _installed_elsewhere()


def _installed_here() -> Installed:
    try:
        from xaibench.plugins.manager import get_registry

        registry = get_registry()
        metrics, explainers = registry.entries("metric"), registry.names("explainer")
    except Exception:  # noqa: BLE001 - a broken plugin set leaves these checks out, not validation
        return Installed({}, ())
    ranges: dict[str, tuple[tuple[float, float], str]] = {}
    for entry in metrics:
        bounds = metric_value_range(entry.cls)
        if bounds is not None and bounds != (-math.inf, math.inf):
            ranges[entry.cls.name] = (bounds, str(entry.cls.version))
    return Installed(ranges, tuple(explainers))


_INSTALLED_LINE = "xaibench-installed: "
_INSTALLED_CODE = (
    "import json, sys\n"
    "sys.path[:0] = json.loads(sys.argv[1])\n"
    "from xaibench.publish.validation import _INSTALLED_LINE, _installed_here\n"
    "known = _installed_here()\n"
    "ranges = {k: [low, high, version] for k, ((low, high), version) in known.ranges.items()}\n"
    "print(_INSTALLED_LINE + json.dumps({'ranges': ranges, 'explainers': list(known.explainers)}))\n"
)
INSTALLED_TIMEOUT = 600.0
"""Seconds the child process that reads the registry may take (plugin probes on a cold cache)."""


@lru_cache(maxsize=1)
def _installed_elsewhere() -> Installed:
    """:func:`_installed_here` run in a child process (same interpreter and ``sys.path``), so
    that this process imports neither torch nor any plugin."""
    import subprocess

    try:
        done = subprocess.run(
            [sys.executable, "-c", _INSTALLED_CODE, json.dumps(sys.path)],
            capture_output=True,
            text=True,
            timeout=INSTALLED_TIMEOUT,
            check=False,
        )
        line = next(x for x in reversed(done.stdout.splitlines()) if x.startswith(_INSTALLED_LINE))
        data = json.loads(line.removeprefix(_INSTALLED_LINE))
        ranges = {str(k): ((float(v[0]), float(v[1])), str(v[2])) for k, v in data["ranges"].items()}
        return Installed(ranges, tuple(str(x) for x in data["explainers"]))
    except (OSError, subprocess.SubprocessError, StopIteration, ValueError, KeyError, TypeError, IndexError):
        return Installed({}, ())


def range_notes(data: SubmissionData, known: Installed | None = None) -> list[str]:
    """One line per metric id of ``data`` whose values' range is not checked here (not installed,
    or declaring no ``value_range``), for a validation report to print beside its findings."""
    known = known or installed()
    ids = sorted(
        {str(k) for t in (data.get("tracks") or {}).values() if isinstance(t, dict) for k in t.get("metrics") or {}}
    )
    return [
        f"metric {k!r}: not installed here or declares no value range; its values' range is not checked"
        for k in ids
        if k not in known.ranges
    ]


def _created_errors(data: SubmissionData, now: dt.datetime | None = None) -> Iterator[tuple[str, str]]:
    text = data.get("created")
    if not isinstance(text, str):
        return
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        return  # the schema's date-time format says so
    when = when if when.tzinfo else when.replace(tzinfo=dt.UTC)
    now = now or dt.datetime.now(dt.UTC)
    if when > now + CLOCK_SKEW:
        yield (
            "/created",
            (
                f"created {text} is in the future (this machine's clock says {now.isoformat(timespec='seconds')}; "
                f"at most {CLOCK_SKEW.days} day ahead is allowed)"
            ),
        )


def _range_errors(
    ptr: str, where: str, metric_id: str, m: MetricSummary, ids: list[str] | None, known: Installed
) -> Iterator[tuple[str, str]]:
    """Summary numbers and per-sample values of metric ``metric_id`` outside its installed
    ``value_range``: each summary number, and the first per-sample value with the count. A
    number beyond :data:`~xaibench.publish.recompute.MAX_MAGNITUDE` (or not finite) is reported
    as such by :func:`~xaibench.publish.recompute.summary_errors`, not again here."""
    if metric_id not in known.ranges:
        return
    bounds, version = known.ranges[metric_id]
    shown = f"[{bounds[0]:g}, {bounds[1]:g}], the value range of metric {metric_id!r} (installed version {version})"
    for key in ("mean", "ci_low", "ci_high"):
        value = _num(m.get(key))
        if value is not None and abs(value) <= MAX_MAGNITUDE and outside_range(value, bounds):
            yield f"{ptr}/{key}", f"{where}: {key} {value:.6g} is outside {shown}"
    samples = m.get("samples")
    bad: list[tuple[str, float]] = []
    if isinstance(samples, SampleValues):
        arr = samples.array
        low, high = bounds
        with np.errstate(invalid="ignore"):
            suspect = np.flatnonzero((np.abs(arr) <= MAX_MAGNITUDE) & ((arr < low) | (arr > high)))
        bad = [(samples.ids[k], float(arr[k])) for k in suspect if outside_range(float(arr[k]), bounds)]
    elif isinstance(samples, dict):
        for sample_id, value in samples.items():
            v = _num(value)
            if v is not None and abs(v) <= MAX_MAGNITUDE and outside_range(v, bounds):
                bad.append((str(sample_id), v))
    if not bad:
        return
    sample, value = bad[0]
    more = f" ({len(bad)} values are)" if len(bad) > 1 else ""
    at = f"{ptr}/values/{ids.index(sample)}" if ids is not None else f"{ptr}/samples{pointer([sample])}"
    yield at, f"{where}: per-sample value {value:.6g} of {sample!r} is outside {shown}{more}"


def consistency_errors(data: SubmissionData, folder: Path | None = None) -> Iterator[tuple[str, str]]:
    """Checks across fields (run after the schema passed, so the required keys are there), and
    against the installed registry (metric value ranges, explainer names) and the clock."""
    explainer, disclosure = data["explainer"], data["disclosure"]
    for flag in ("tuned_on_benchmark", "reference_only"):
        if explainer.get(flag) is True and disclosure.get(flag) is False:
            yield f"/disclosure/{flag}", f"the explainer declares {flag} = true, the disclosure says false"
    known = installed()
    yield from _created_errors(data)
    why = lookalike_problem(str(explainer["name"]), known.explainers, whose="the installed explainer")
    if why is not None:
        yield "/explainer/name", why
    name, seed, rule = explainer["name"], data.get("seed"), data.get("intervals")
    compact = data["schema"] == SCHEMA_V2
    for track_name, track in data["tracks"].items():
        base = pointer(["tracks", track_name])
        n_samples = track["provenance"]["n_samples"]
        yield from _layout_errors(base, track, compact)
        views = [_with_samples(track, m) if compact else (m, None, None) for m in track["metrics"].values()]
        shared = track_intervals([v[0] for v in views], seed, track_name) if rule == INTERVAL_RULE else {}
        for k, (metric_id, (view, ids, why)) in enumerate(zip(track["metrics"], views, strict=True)):
            ptr = f"{base}/metrics{pointer([metric_id])}"
            field = "values" if compact else "samples"
            if why is not None:
                yield f"{ptr}/{why[0]}", why[1]
            yield from _metric_errors(ptr, view, n_samples, field)
            where = f"track {track_name}, metric {metric_id}, explainer {name}"
            label = f"{track_name}/{name}/{metric_id}"
            found = summary_errors(where, label, view, seed, rule=rule, track=track_name, interval=shared.get(k))
            for key, message in found:
                sample = key.removeprefix("samples/")
                if sample == key:
                    yield f"{ptr}/{key}", message
                elif ids is not None:
                    yield f"{ptr}/values/{ids.index(sample)}", message
                else:
                    yield f"{ptr}/samples{pointer([sample])}", message
            yield from _range_errors(ptr, where, str(metric_id), view, ids, known)
        examples = track.get("examples", [])
        for k, example in enumerate(examples):
            key = overlay_key(example)
            if key is not None and folder is not None:
                yield from _asset_errors(f"{base}/examples/{k}/{key}", example, key, folder)
            yield from token_example_errors(f"{base}/examples/{k}", example)
        texts = sum(1 for e in examples if isinstance(e, dict) and "tokens" in e)
        if texts > MAX_TEXT_EXAMPLES:
            yield f"{base}/examples", f"{texts} text examples: at most {MAX_TEXT_EXAMPLES} per track"


def _duplicate(ids: list[str]) -> str | None:
    seen: set[str] = set()
    for i in ids:
        if i in seen:
            return i
        seen.add(i)
    return None


def _layout_errors(base: str, track: Any, compact: bool) -> Iterator[tuple[str, str]]:
    """Keys of the other version, and duplicate ``sample_ids``."""
    version = "/2" if compact else "/1"
    if not compact and "sample_ids" in track:
        yield f"{base}/sample_ids", f"sample_ids is a key of xaibench.submission/2, not of {version}"
    for where, ids in [(base, track.get("sample_ids"))] + [
        (f"{base}/metrics{pointer([k])}", m.get("sample_ids")) for k, m in track["metrics"].items()
    ]:
        if where != base and not compact and ids is not None:
            yield f"{where}/sample_ids", f"sample_ids is a key of xaibench.submission/2, not of {version}"
        if compact and isinstance(ids, list) and (dup := _duplicate(ids)) is not None:
            yield f"{where}/sample_ids", f"sample id {dup!r} is listed twice in sample_ids (each sample once)"
    for k, m in track["metrics"].items():
        ptr = f"{base}/metrics{pointer([k])}"
        if compact and "samples" in m:
            yield f"{ptr}/samples", "samples is a key of xaibench.submission/1: /2 keeps per-sample values in values"
        if not compact and "values" in m:
            yield f"{ptr}/values", "values is a key of xaibench.submission/2: /1 keeps per-sample values in samples"


def _with_samples(track: Any, m: MetricSummary) -> tuple[MetricSummary, list[str] | None, tuple[str, str] | None]:
    """A ``/2`` metric block with its per-sample values as the ``samples`` map the checks read,
    the ids they align with, and ``(key, message)`` when they cannot be read (then no map)."""
    if "values" not in m:
        return m, None, None
    bare = cast(MetricSummary, {k: v for k, v in m.items() if k != "values"})
    ids = metric_ids(track, m)
    if ids is None:
        return bare, None, ("values", "values without sample_ids (on the track or the metric)")
    try:
        got = metric_values(track, m)
    except ValueError as exc:
        return bare, None, ("values", str(exc))
    if len(set(ids)) != len(ids):
        return bare, None, None  # reported once, at the duplicated id
    assert got is not None  # "values" is there
    arr = got[1]
    valued = arr[~np.isnan(arr)]
    if np.isfinite(valued).all() and not (np.abs(valued) > MAX_MAGNITUDE).any():
        samples: Any = SampleValues(got[0], arr)  # the checks read the array (no per-value Python)
    else:
        samples = per_sample(track, m)  # each bad value gets its own message
    return cast(MetricSummary, {**bare, "samples": samples}), ids, None


def _metric_errors(ptr: str, m: MetricSummary, n_samples: int, field: str = "samples") -> Iterator[tuple[str, str]]:
    mean, low, high, n = _num(m["mean"]), _num(m.get("ci_low")), _num(m.get("ci_high")), m["n"]
    if (mean is None) != (n == 0):
        yield f"{ptr}/mean", f"mean is {'missing' if mean is None else 'set'} but n = {n}"
    if n + m["n_na"] != n_samples:
        yield f"{ptr}/n", f"n + n_na = {n + m['n_na']} but the track has n_samples = {n_samples}"
    if mean is not None and low is not None and high is not None:
        tol = 1e-9 * max(1.0, abs(mean))
        if not low - tol <= mean <= high + tol:
            yield f"{ptr}/ci_low", f"interval [{low}, {high}] does not contain the mean {mean}"
    samples = m.get("samples")
    if isinstance(samples, SampleValues):
        nulls = int(np.isnan(samples.array).sum())
        values = len(samples) - nulls
    elif samples is not None:
        values, nulls = sum(1 for v in samples.values() if v is not None), sum(1 for v in samples.values() if v is None)
    if samples is not None and (values, nulls) != (n, m["n_na"]):
        na = "null" if field == "samples" else "n/a"
        yield f"{ptr}/{field}", f"{field} has {values} values and {nulls} {na} but n = {n}, n_na = {m['n_na']}"
    hist = m.get("histogram")
    if hist is not None:
        edges, counts = hist["edges"], hist["counts"]
        if len(edges) != len(counts) + 1:
            yield f"{ptr}/histogram/edges", f"{len(edges)} edges for {len(counts)} bins (need bins + 1)"
        elif any(b <= a for a, b in itertools.pairwise(edges)):
            yield f"{ptr}/histogram/edges", "edges must increase"
        if sum(counts) != n:
            yield f"{ptr}/histogram/counts", f"counts add up to {sum(counts)} but n = {n}"
    curve = m.get("curve")
    if curve is not None:
        size = len(curve["fraction"])
        for key in ("mean", "q25", "q75"):
            if key in curve and len(curve[key]) != size:
                yield f"{ptr}/curve/{key}", f"{len(curve[key])} points but fraction has {size}"


def token_example_errors(ptr: str, example: Any) -> Iterator[tuple[str, str]]:
    """A text example's highlight (:mod:`xaibench.pasta.highlight`; the schema checked the types,
    the bounds and the values' range): one value per token, the ground-truth positions increasing
    and among the tokens, no overlay or sentence beside it, its render a token highlight."""
    if not isinstance(example, dict) or "tokens" not in example:
        return
    tokens, values, truth = example["tokens"], example.get("values", []), example.get("truth")
    if len(values) != len(tokens):
        yield f"{ptr}/values", f"{len(values)} values for {len(tokens)} tokens (one per token)"
    if isinstance(truth, list):
        if any(b <= a for a, b in itertools.pairwise(truth)):
            yield f"{ptr}/truth", "the ground-truth positions must increase"
        if truth and truth[-1] >= len(tokens):
            yield f"{ptr}/truth", f"ground-truth position {truth[-1]} is beyond the {len(tokens)} tokens"
    for key in ("jpeg", "png", "sentence"):
        if key in example:
            yield f"{ptr}/{key}", f"a text example (tokens) has no {key}"
    render = example.get("render")
    if isinstance(render, str) and not render.startswith(f"{HIGHLIGHT_NAME}/"):
        yield f"{ptr}/render", f"a text example's render is {HIGHLIGHT_NAME}, not {render!r}"


def overlay_key(example: Any) -> str | None:
    """The key (of :data:`OVERLAY_FORMATS`) that names an example's overlay file; ``None`` when
    it names none (a concept sentence, an n/a example) or, wrongly, more than one."""
    keys = [k for k in OVERLAY_FORMATS if isinstance(example, dict) and k in example]
    return keys[0] if len(keys) == 1 else None


def _asset_errors(ptr: str, example: Example, key: str, folder: Path) -> Iterator[tuple[str, str]]:
    """The overlay file that ``example[key]`` names: under ``assets/``, there, of its format
    (:data:`OVERLAY_FORMATS`), with the recorded sha256."""
    signature, kind, _ = OVERLAY_FORMATS[key]
    root = folder.resolve()
    path = (root / str(example.get(key))).resolve()
    if not path.is_relative_to(root / "assets"):
        yield ptr, "the overlay must lie under the submissions folder's assets/"
        return
    try:
        data = path.read_bytes()
    except OSError:
        yield ptr, f"overlay file not found: {path}"
        return
    if not data.startswith(signature):
        yield ptr, f"the overlay file is not a {kind}"
    elif hashlib.sha256(data).hexdigest() != example.get("sha256"):
        yield ptr, "the overlay file's sha256 differs from the recorded one"


def validate_file(path: Path) -> list[Issue]:
    """Validate one submission file (with its example overlays); the bytes read are those the
    build then loads (:func:`xaibench.publish.submission_files.read_bytes`), so it opens each file once."""
    try:
        text = submission_text(read_bytes(path))
    except UnicodeDecodeError as exc:
        return [Issue(str(path), 1, 1, "", f"not UTF-8 text ({exc.reason} at byte {exc.start})")]
    except OSError as exc:
        raise XaibenchError(f"{path}: cannot read ({exc.strerror})") from exc
    return validate_text(text, str(path), path.parent)


def submission_files(paths: Iterable[Path]) -> list[Path]:
    """Files named, and the ``*.json`` of folders named."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out += sorted(p.glob("*.json"))
        elif p.exists():
            out.append(p)
        else:
            raise XaibenchError(f"{p}: no such file or folder")
    return out


def require_valid(paths: Iterable[Path]) -> None:
    """Raise one :class:`XaibenchError` listing every issue of every file, if there is any."""
    issues = [i for p in paths for i in validate_file(p)]
    if len(issues) == 1:
        raise XaibenchError(f"invalid submission: {issues[0]}")
    if issues:
        raise XaibenchError(f"{len(issues)} problems in submissions:\n" + "\n".join(str(i) for i in issues))
