"""Results as pandas DataFrames: the per-sample records of a workdir and a leaderboard file.

``records(workdir)`` reads ``<workdir>/results/<track>.jsonl`` (``xaibench.record/1``, one row
per (track, explainer, metric, sample)); ``leaderboard(path)`` reads ``leaderboard.json`` or
``leaderboard.csv`` (``xaibench.leaderboard/2``, one row per (track, explainer, metric) plus the
``rank:<family>`` and ``rank:overall`` rows). The columns are listed in :data:`RECORD_COLUMNS`
and :data:`LEADERBOARD_COLUMNS` and documented in docs/python-api.md. A path that is not what
the function reads raises :class:`~xaibench.errors.XaibenchError` with one line naming it.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xaibench.errors import XaibenchError
from xaibench.publish.leaderboard import CSV_COLUMNS
from xaibench.runner.records import RECORD_SCHEMA
from xaibench.runner.store import RecordStore

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "LEADERBOARD_COLUMNS",
    "LEADERBOARD_SCHEMAS",
    "META_COLUMNS",
    "RECORD_COLUMNS",
    "leaderboard",
    "meta",
    "records",
]

RECORD_COLUMNS: tuple[str, ...] = (
    "track",
    "explainer",
    "params_digest",
    "explainer_params",
    "explainer_version",
    "explainer_kind",
    "metric",
    "family",
    "direction",
    "metric_params",
    "metric_version",
    "sample_id",
    "value",
    "na_reason",
    "forward_passes",
    "wall_time_s",
    "target_class",
    "target_source",
    "model",
    "dataset",
    "dataset_revision",
    "seed",
    "device",
    "torch",
    "torch_threads",
    "batch_size",
    "xaibench",
    "platform",
    "curve",
    "extras",
    "key",
)
"""The columns of :func:`records`, in order (docs/python-api.md says what each holds)."""

LEADERBOARD_COLUMNS: tuple[str, ...] = tuple(CSV_COLUMNS)
"""The columns of :func:`leaderboard`: those of ``leaderboard.csv``, in its order."""

LEADERBOARD_SCHEMAS = ("xaibench.leaderboard/2",)
"""The ``leaderboard.json`` schemas :func:`leaderboard` reads."""

_FLOAT = ("value", "ci_low", "ci_high")
_INT = ("n", "n_na", "rank")
_TEXT = ("status", "label", "flags")
_SORT = ["track", "explainer", "params_digest", "metric", "sample_id"]


def _pandas() -> Any:
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency; this guards a broken install
        raise XaibenchError("xaibench.results needs pandas: pip install pandas") from None
    return pd


# ----------------------------------------------------------------------------- records


def _record_files(path: Path) -> list[Path]:
    """The record files ``path`` names: a workdir, its ``results/`` folder, or one ``.jsonl`` file."""
    if not path.exists():
        raise XaibenchError(f"{path}: no such workdir")
    if path.is_file():
        if path.suffix != ".jsonl":
            raise XaibenchError(f"{path}: not a workdir or a records file; pass the --workdir folder of a run")
        return [path]
    folder = path / "results"
    if not folder.is_dir():
        if any(path.glob("*.jsonl")):  # the results/ folder itself
            return sorted(path.glob("*.jsonl"))
        raise XaibenchError(f"{path}: not an xaibench workdir (no results/ folder); pass the --workdir folder of a run")
    return sorted(folder.glob("*.jsonl"))


def _record_row(record: dict[str, Any], file: Path) -> dict[str, Any]:
    schema = record.get("schema")
    if schema != RECORD_SCHEMA:
        raise XaibenchError(f"{file}: a record has schema {schema!r}; this xaibench reads {RECORD_SCHEMA}")
    try:
        explainer = record["explainer"]
        info = record.get("metric_info") or {}
        target = record.get("target") or {}
        dataset = record.get("dataset") or {}
        value = record["value"]
        return {
            "track": record["track"],
            "explainer": explainer["name"],
            "params_digest": explainer.get("params_digest"),
            "explainer_params": explainer.get("params", {}),
            "explainer_version": explainer.get("version"),
            "explainer_kind": explainer.get("kind"),
            "metric": record["metric"],
            "family": info.get("family"),
            "direction": info.get("direction"),
            "metric_params": info.get("params", {}),
            "metric_version": info.get("version"),
            "sample_id": str(record["sample_id"]),
            "value": float("nan") if value is None else float(value),
            "na_reason": record.get("na_reason"),
            "forward_passes": float(record.get("forward_passes") or 0.0),
            "wall_time_s": float(record.get("wall_time_s") or 0.0),
            "target_class": target.get("class"),
            "target_source": target.get("source"),
            "model": record.get("model"),
            "dataset": dataset.get("name"),
            "dataset_revision": dataset.get("revision"),
            "seed": record.get("seed"),
            "device": record.get("device"),
            "torch": record.get("torch"),
            "torch_threads": record.get("torch_threads"),
            "batch_size": record.get("batch_size"),
            "xaibench": record.get("xaibench"),
            "platform": record.get("platform"),
            "curve": record.get("curve"),
            "extras": record.get("extras"),
            "key": record["key"],
        }
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise XaibenchError(f"{file}: record {record.get('key', '?')!r} is malformed ({exc!r})") from None


def records(workdir: str | Path) -> pd.DataFrame:
    """Every per-sample record of a workdir as a DataFrame, one row per (track, explainer,
    metric, sample) and run configuration (seed, parameters, runtime), sorted by track,
    explainer, parameters, metric and sample.

    ``workdir`` is the folder a run wrote (``--workdir``, ``.xaibench`` by default), its
    ``results/`` folder, or one ``results/<track>.jsonl`` file. ``value`` is a float, NaN when
    the record is n/a (``na_reason`` says why); the direction of each metric (``higher`` or
    ``lower`` is better) is in ``direction``. A torn last line (an interrupted write) is skipped,
    as the runner skips it; so are lines that fail their integrity check (written by an older
    xaibench or by another process), with a warning naming the file. A workdir with no records
    yet gives an empty frame with the same columns. Raises :class:`XaibenchError` for a path that
    is not a workdir or a malformed record.
    """
    pd = _pandas()
    path = Path(workdir).expanduser()
    rows = []
    for file in _record_files(path):
        try:
            store = RecordStore(file)
        except OSError as exc:
            raise XaibenchError(f"{file}: cannot read ({exc.strerror or exc})") from None
        rows += [_record_row(r, file) for r in store.records.values()]
        if store.unverified:  # not silent: the run reports these lines too, and recomputes them
            warnings.warn(
                f"{file}: {store.unverified} records fail their integrity check (no tag, or not this "
                "workdir's); they are left out",
                stacklevel=2,
            )
        if store.old_keys:
            warnings.warn(
                f"{file}: {store.old_keys} records from an older xaibench (no key version); they are left out",
                stacklevel=2,
            )
    frame = pd.DataFrame(rows, columns=list(RECORD_COLUMNS))
    frame = frame.astype({"value": "float64", "forward_passes": "float64", "wall_time_s": "float64"})
    frame = frame.astype({"target_class": "Int64", "seed": "Int64", "torch_threads": "Int64", "batch_size": "Int64"})
    return frame.sort_values(_SORT, kind="stable", ignore_index=True)


# ----------------------------------------------------------------------------- leaderboard


def _leaderboard_file(path: Path) -> Path:
    if not path.exists():
        raise XaibenchError(f"{path}: no such leaderboard file or folder")
    if path.is_dir():
        for name in ("leaderboard.json", "leaderboard.csv"):
            if (path / name).is_file():
                return path / name
        raise XaibenchError(f"{path}: no leaderboard.json or leaderboard.csv here; pass the --leaderboard-dir of a run")
    if path.suffix not in (".json", ".csv"):
        raise XaibenchError(f"{path}: not a leaderboard file; pass leaderboard.json, leaderboard.csv or their folder")
    return path


def _json_rows(file: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise XaibenchError(f"{file}: cannot read ({exc})") from None
    except json.JSONDecodeError as exc:
        raise XaibenchError(f"{file}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})") from None
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema not in LEADERBOARD_SCHEMAS:
        raise XaibenchError(
            f"{file}: schema {schema!r} is not a leaderboard this xaibench reads ({LEADERBOARD_SCHEMAS[0]})"
        )
    rows = data.get("rows")
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise XaibenchError(f"{file}: 'rows' must be a list of objects")
    return rows


def _csv_frame(file: Path) -> pd.DataFrame:
    pd = _pandas()
    try:
        frame = pd.read_csv(file, dtype=str, keep_default_na=False)
    except (OSError, UnicodeDecodeError) as exc:
        raise XaibenchError(f"{file}: cannot read ({exc})") from None
    except pd.errors.EmptyDataError:
        raise XaibenchError(f"{file}: empty; expected the header {','.join(LEADERBOARD_COLUMNS)}") from None
    except pd.errors.ParserError as exc:
        raise XaibenchError(f"{file}: not a valid CSV ({str(exc).strip().splitlines()[-1]})") from None
    return frame


def leaderboard(path: str | Path) -> pd.DataFrame:
    """A leaderboard as a DataFrame, one row per (track, explainer, metric), with the columns of
    ``leaderboard.csv`` (:data:`LEADERBOARD_COLUMNS`).

    ``path`` is ``leaderboard.json`` or ``leaderboard.csv``, or the folder holding them
    (``--leaderboard-dir``, where the JSON is read first). ``explainer`` is the submission's key
    (the explainer's name, ``name@<params digest>`` for non-default parameters). ``metric`` is a
    metric id, or ``rank:<family>`` / ``rank:overall`` whose ``value`` is a mean rank (lower is
    better). ``value``, ``ci_low`` and ``ci_high`` are floats (NaN when empty); ``n``, ``n_na``
    and ``rank`` nullable integers (``<NA>`` when not ranked); ``status``, ``label`` and ``flags``
    strings (``""`` when empty). Both files give equal frames. Raises :class:`XaibenchError` for
    a missing file, a file of another kind or schema, or a CSV without the leaderboard's columns.
    """
    pd = _pandas()
    file = _leaderboard_file(Path(path).expanduser())
    frame = pd.DataFrame(_json_rows(file)) if file.suffix == ".json" else _csv_frame(file)
    missing = [c for c in LEADERBOARD_COLUMNS if c not in frame.columns]
    if missing and len(frame.columns):
        raise XaibenchError(f"{file}: not a leaderboard (no column {missing[0]!r}); expected {', '.join(CSV_COLUMNS)}")
    frame = frame.reindex(columns=list(LEADERBOARD_COLUMNS))
    for column in _FLOAT:
        frame[column] = _numeric(pd, frame[column], file, column).astype("float64")
    for column in _INT:
        frame[column] = _numeric(pd, frame[column], file, column).astype("Int64")
    for column in _TEXT:
        frame[column] = frame[column].map(lambda v: "" if v is None or v != v else str(v))
    for column in ("track", "explainer", "metric", "family", "direction", *_TEXT):
        frame[column] = frame[column].astype(str)
    return frame


def _numeric(pd: Any, column: pd.Series, file: Path, name: str) -> pd.Series:
    values = column.replace("", None).astype(object)
    try:
        return pd.to_numeric(values, errors="raise")
    except (ValueError, TypeError):
        bad = next(v for v in values if v is not None and not _is_number(v))
        raise XaibenchError(f"{file}: column {name!r} holds {bad!r}, not a number") from None


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


META_COLUMNS: tuple[str, ...] = ("track", "metric", "test", "figure", "value", "ci_low", "ci_high", "verdict")
"""The columns of :func:`meta`: those of ``meta.csv`` (docs/meta.md)."""


def meta(path: str | Path) -> pd.DataFrame:
    """The meta-evaluation (``xaibench meta``) as a DataFrame, one row per (track, metric, test,
    figure), the columns of ``meta.csv`` (:data:`META_COLUMNS`). ``path`` is ``meta.csv`` or the
    folder holding it. ``value``, ``ci_low`` and ``ci_high`` are floats (NaN when empty); the other
    columns strings. Raises :class:`XaibenchError` for a missing file or one without those columns."""
    pd = _pandas()
    file = Path(path).expanduser()
    if file.is_dir():
        file = file / "meta.csv"
    if not file.is_file():
        raise XaibenchError(f"{file}: no such file (xaibench meta writes meta.csv)")
    try:
        frame = pd.read_csv(file, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise XaibenchError(f"{file}: not a meta.csv ({str(exc).strip().splitlines()[-1]})") from None
    missing = [c for c in META_COLUMNS if c not in frame.columns]
    if missing:
        raise XaibenchError(f"{file}: not a meta.csv (no column {missing[0]!r}); expected {', '.join(META_COLUMNS)}")
    frame = frame.reindex(columns=list(META_COLUMNS))
    for column in ("value", "ci_low", "ci_high"):
        frame[column] = _numeric(pd, frame[column], file, column).astype("float64")
    return frame
