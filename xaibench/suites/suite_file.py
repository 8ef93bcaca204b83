"""Suites written as TOML files (``xaibench run --suite path/to/suite.toml``); see docs/suites.md.

::

    name = "my-suite"                      # optional; default: the file name without .toml
    description = "ResNet-18 on my data"   # optional

    [[tracks]]
    name = "cats"                          # optional; default as for --model/--dataset
    model = "timm:resnet18"                # NAME or NAME:ARG, as for --model
    dataset = "folder:{suite_dir}/cats"    # NAME or NAME:ARG, as for --dataset
    model_params = { checkpoint = "{suite_dir}/resnet18.pth" }
    dataset_params = {}
    metrics = ["family:alignment", "deletion"]   # optional; default: ["default"] (docs/suites.md)
    metric_params = { deletion = { steps = 10 } }
    limit = 8
    target = "predicted"                   # or "label"
    description = ""

``{suite_dir}`` in any string value is replaced by the folder holding the file (other relative
paths are relative to where xaibench runs). Every problem raises :class:`XaibenchError` with one
line naming the file and the key (``suite.toml: tracks[2].limit: ...``).
"""

from __future__ import annotations

import inspect
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from xaibench.api import TrackSpec
from xaibench.errors import XaibenchError
from xaibench.plugins.manager import get_registry
from xaibench.suites.adhoc import TARGETS, adhoc_track
from xaibench.suites.metric_selection import check_selectors

__all__ = ["SuiteFile", "is_suite_file", "load_suite_file"]

TOP_KEYS = ("name", "description", "tracks")
TRACK_KEYS = (
    "name",
    "model",
    "dataset",
    "model_params",
    "dataset_params",
    "metrics",
    "metric_params",
    "limit",
    "target",
    "description",
)


@dataclass(frozen=True)
class SuiteFile:
    """A suite read from a TOML file: its name (recorded as the run's suite), description and tracks."""

    path: Path
    name: str
    description: str
    tracks: list[TrackSpec]


def is_suite_file(value: str) -> bool:
    """Whether ``--suite value`` names a suite file rather than a suite plugin (it ends in ``.toml``)."""
    return str(value).lower().endswith(".toml")


def _problem(path: Path, key: str, text: str) -> XaibenchError:
    return XaibenchError(f"{path}: {key}: {text}" if key else f"{path}: {text}")


def _substitute(value: Any, suite_dir: str) -> Any:
    if isinstance(value, str):
        return value.replace("{suite_dir}", suite_dir)
    if isinstance(value, list):
        return [_substitute(v, suite_dir) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, suite_dir) for k, v in value.items()}
    return value


def _unknown(path: Path, where: str, table: Mapping[str, Any], known: tuple[str, ...]) -> None:
    for key in table:
        if key not in known:
            prefix = f"{where}." if where else ""
            raise _problem(path, f"{prefix}{key}", f"unknown key; known keys: {', '.join(known)}")


def _string(path: Path, key: str, value: Any, *, required: bool = False) -> str | None:
    if value is None and not required:
        return None
    if value is None:
        raise _problem(path, key, 'missing (e.g. model = "timm:resnet18", dataset = "folder:PATH")')
    if not isinstance(value, str) or not value.strip():
        raise _problem(path, key, f"must be a non-empty string, got {value!r}")
    return value


def _table(path: Path, key: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _problem(path, key, f'must be a table (e.g. {{ checkpoint = "PATH" }}), got {value!r}')
    return value


def _metrics(path: Path, key: str, value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        example = '["iou", "family:faithfulness"]'
        raise _problem(path, key, f"must be a list of metric selectors (e.g. {example}), got {value!r}")
    try:
        check_selectors(get_registry(), value)
    except XaibenchError as exc:
        raise _problem(path, key, str(exc)) from None
    return tuple(value)


def _metric_params(path: Path, key: str, value: Any) -> dict[str, dict[str, Any]]:
    table = _table(path, key, value)
    for metric, params in table.items():
        if not isinstance(params, dict):
            raise _problem(path, f"{key}.{metric}", f"must be a table of parameters, got {params!r}")
        try:
            get_registry().entry("metric", metric)
        except XaibenchError as exc:
            raise _problem(path, f"{key}.{metric}", str(exc)) from None
    return table


def _limit(path: Path, key: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _problem(path, key, f"must be a positive integer, got {value!r}")
    return value


def _track(path: Path, index: int, raw: Any, suite_dir: str) -> TrackSpec:
    where = f"tracks[{index}]"
    if not isinstance(raw, dict):
        raise _problem(path, where, "must be a table ([[tracks]])")
    _unknown(path, where, raw, TRACK_KEYS)
    raw = _substitute(raw, suite_dir)
    model = _string(path, f"{where}.model", raw.get("model"), required=True)
    dataset = _string(path, f"{where}.dataset", raw.get("dataset"), required=True)
    name = _string(path, f"{where}.name", raw.get("name"))
    description = _string(path, f"{where}.description", raw.get("description"))
    target = raw.get("target", "predicted")
    if target not in TARGETS:
        raise _problem(path, f"{where}.target", f"must be one of {', '.join(TARGETS)}, got {target!r}")
    model_params = _table(path, f"{where}.model_params", raw.get("model_params"))
    dataset_params = _table(path, f"{where}.dataset_params", raw.get("dataset_params"))
    metrics = _metrics(path, f"{where}.metrics", raw.get("metrics"))
    metric_params = _metric_params(path, f"{where}.metric_params", raw.get("metric_params"))
    limit = _limit(path, f"{where}.limit", raw.get("limit"))
    assert model is not None and dataset is not None
    try:
        spec = adhoc_track(
            model, dataset, model_params=model_params, dataset_params=dataset_params, target=target, name=name
        )
    except XaibenchError as exc:
        raise _problem(path, where, str(exc)) from None
    _check_signature(path, f"{where}.model_params", "model", spec.model, spec.model_params)
    _check_signature(path, f"{where}.dataset_params", "dataset", spec.dataset, spec.dataset_params)
    return replace(
        spec,
        limit=limit,
        metrics=metrics if metrics is not None else spec.metrics,
        metric_params=metric_params,
        description=description if description is not None else spec.description,
    )


def _check_signature(path: Path, key: str, kind: str, name: str, params: Mapping[str, Any]) -> None:
    """Parameter names the plugin's constructor does not take, or required ones missing: one line
    naming the file and the key now, not a failed track later (the values are checked when the
    track is loaded)."""
    cls = get_registry().entry(kind, name).cls
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):  # no signature to check against
        return
    try:
        signature.bind(**params)
    except TypeError as exc:
        accepted = [
            p.name for p in signature.parameters.values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        ]
        raise _problem(path, key, f"{kind} {name!r}: {exc}; its parameters: {', '.join(accepted) or 'none'}") from None


_AT = re.compile(r"^(?P<text>.*) \(at line (?P<line>\d+), column (?P<column>\d+)\)$", re.S)


def _toml_problem(path: Path, exc: tomllib.TOMLDecodeError) -> XaibenchError:
    match = _AT.match(str(exc))
    if match is None:
        return _problem(path, "", f"invalid TOML ({exc})")
    where = f"line {match['line']}, column {match['column']}"
    return _problem(path, "", f"invalid TOML at {where}: {match['text']}")


def load_suite_file(path: str | Path) -> SuiteFile:
    """Read and check the suite file ``path`` (see the module doc); the plugin and metric names
    are checked against the installed plugins, the parameters when each track is loaded."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise XaibenchError(f"--suite {path}: suite file not found" if not path.exists() else f"{path}: not a file")
    try:
        return _load(path, path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise _problem(path, "", f"not UTF-8 text ({exc.reason})") from None
    except RecursionError:  # tomllib (and our walk over the values) recurse once per level
        raise _problem(path, "", "nested too deeply") from None


def _load(path: Path, text: str) -> SuiteFile:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _toml_problem(path, exc) from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise _problem(path, "", f"invalid TOML ({exc})") from None
    _unknown(path, "", data, TOP_KEYS)
    name = _string(path, "name", data.get("name")) or path.stem
    description = _string(path, "description", data.get("description")) or ""
    raw_tracks = data.get("tracks")
    if raw_tracks is None:
        raise _problem(path, "tracks", "missing; list the tracks as [[tracks]] tables with model and dataset")
    if not isinstance(raw_tracks, list) or not raw_tracks:
        raise _problem(path, "tracks", "must be a non-empty list of [[tracks]] tables")
    suite_dir = str(path.resolve().parent)
    tracks = [_track(path, i, raw, suite_dir) for i, raw in enumerate(raw_tracks, start=1)]
    seen: dict[str, int] = {}
    for i, spec in enumerate(tracks, start=1):
        if spec.name in seen:
            raise _problem(
                path, f"tracks[{i}].name", f"track name {spec.name!r} is also tracks[{seen[spec.name]}]'s; set name"
            )
        seen[spec.name] = i
    return SuiteFile(path=path, name=name, description=description, tracks=tracks)
