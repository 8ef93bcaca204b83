"""Results as pandas DataFrames: the per-sample records of a workdir and a leaderboard file.

``records(workdir)`` reads the record store of ``<workdir>/results/`` (``xaibench.record/1``: each
track's Parquet part files column-wise and its ``<track>.jsonl`` journal; one row per (track,
explainer, metric, sample)); ``leaderboard(path)`` reads ``leaderboard.json`` or
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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from xaibench.allocator import without_numpy_huge_pages
from xaibench.errors import XaibenchError
from xaibench.lazyjson import lazy_objects
from xaibench.publish.leaderboard import CSV_COLUMNS
from xaibench.runner import (
    RECORD_SCHEMA,
    RECORDS_TABLE,
    RecordStore,
    decode_records,
    hex_key_bytes,
    journals,
    key_array,
)

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


def _journals(path: Path) -> list[Path]:
    """The tracks ``path`` names, by journal path: a workdir, its ``results/`` folder, or one
    track's ``.jsonl`` journal (read with its part files)."""
    if not path.exists():
        raise XaibenchError(f"{path}: no such workdir")
    if path.is_file():
        if path.suffix != ".jsonl":
            raise XaibenchError(f"{path}: not a workdir or a records file; pass the --workdir folder of a run")
        return [path]
    folder = path / "results"
    if not folder.is_dir():
        if journals(path):  # the results/ folder itself
            return journals(path)
        raise XaibenchError(f"{path}: not an xaibench workdir (no results/ folder); pass the --workdir folder of a run")
    return journals(folder)


def _record_row(record: dict[str, Any], file: Path) -> dict[str, Any]:
    """The frame's row of a full record (rows that do not fit the part columns go this way)."""
    prov = _provenance_row(record, file)
    try:
        value = record["value"]
        target = record.get("target") or {}
        row = {
            "sample_id": str(record["sample_id"]),
            "value": float("nan") if value is None else float(value),
            "na_reason": record.get("na_reason"),
            "forward_passes": float(record.get("forward_passes") or 0.0),
            "wall_time_s": float(record.get("wall_time_s") or 0.0),
            "target_class": target.get("class"),
            "target_source": target.get("source"),
            "curve": record.get("curve"),
            "extras": record.get("extras"),
            "key": record["key"],
        }
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise XaibenchError(f"{file}: record {record.get('key', '?')!r} is malformed ({exc!r})") from None
    return {**prov, **row}


def _provenance_row(block: dict[str, Any], file: Path) -> dict[str, Any]:
    """The frame's columns that come from a record's provenance (the same for every record of one
    (track, explainer, metric) of a run)."""
    schema = block.get("schema")
    if schema != RECORD_SCHEMA:
        raise XaibenchError(f"{file}: a record has schema {schema!r}; this xaibench reads {RECORD_SCHEMA}")
    try:
        explainer = block["explainer"]
        info = block.get("metric_info") or {}
        dataset = block.get("dataset") or {}
        return {
            "track": block["track"],
            "explainer": explainer["name"],
            "params_digest": explainer.get("params_digest"),
            "explainer_params": explainer.get("params", {}),
            "explainer_version": explainer.get("version"),
            "explainer_kind": explainer.get("kind"),
            "metric": block["metric"],
            "family": info.get("family"),
            "direction": info.get("direction"),
            "metric_params": info.get("params", {}),
            "metric_version": info.get("version"),
            "model": block.get("model"),
            "dataset": dataset.get("name"),
            "dataset_revision": dataset.get("revision"),
            "seed": block.get("seed"),
            "device": block.get("device"),
            "torch": block.get("torch"),
            "torch_threads": block.get("torch_threads"),
            "batch_size": block.get("batch_size"),
            "xaibench": block.get("xaibench"),
            "platform": block.get("platform"),
        }
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise XaibenchError(f"{file}: record {block.get('key', '?')!r} is malformed ({exc!r})") from None


_ROW_COLUMNS = (
    "sample_id",
    "value",
    "na_reason",
    "forward_passes",
    "wall_time_s",
    "target_class",
    "target_source",
    "curve",
    "extras",
    "key",
)
"""The columns that come from a record's own fields; the others come from its provenance block."""
_PROVENANCE_COLUMNS = tuple(c for c in RECORD_COLUMNS if c not in _ROW_COLUMNS)
_NULLABLE_INT = ("target_class", "seed", "torch_threads", "batch_size")
_UNKNOWN_FILE = Path("?")  # a block no file named (not expected): errors name this


def _objects(values: list[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


def _dictionary_column(column: Any) -> tuple[np.ndarray, np.ndarray]:
    """(values as an object array ending with ``None``, indices with nulls pointing at it)."""
    arr = column.combine_chunks() if hasattr(column, "combine_chunks") else column
    values = _objects([*arr.dictionary.to_pylist(), None])
    indices = arr.indices.fill_null(len(values) - 1).to_numpy(zero_copy_only=False)
    return values, indices


def _json_column(column: Any) -> np.ndarray:
    """The parsed JSON texts of a string column (``None`` where null). Each distinct text is
    parsed once, in one call, and rows with the same text share the parsed object (the same
    ``extras`` on a million rows is one dict, not a million: copy one before changing it)."""
    arr = column.combine_chunks() if hasattr(column, "combine_chunks") else column
    encoded = pc.dictionary_encode(arr)
    texts = encoded.dictionary.to_pylist()
    parsed = json.loads("[" + ",".join(texts) + "]") if texts else []
    values = _objects([*parsed, None])
    return values[encoded.indices.fill_null(len(texts)).to_numpy(zero_copy_only=False)]


def _text(pd: Any, arr: Any) -> Any:
    """A string column as ``pandas`` would infer it from Python strings (its ``str`` dtype, NaN for
    nulls; all-null: an object column of ``None``), built from an Arrow array without them."""
    if arr.null_count == len(arr):
        return np.full(len(arr), None, dtype=object)
    return pd.array(arr, dtype=pd.Series(["x"]).dtype)


def _categorical(pd: Any, values: Any, index: np.ndarray) -> Any:
    """``values[index]`` as a pandas ``Categorical`` of ``str`` (NaN where ``None``): one small
    integer code per row and each distinct text once, whatever the number of rows."""
    texts = sorted({str(v) for v in values if v is not None})
    code_of = {v: i for i, v in enumerate(texts)}
    small = np.array([-1 if v is None else code_of[str(v)] for v in values], dtype=np.int32)
    return pd.Categorical.from_codes(small[index], categories=pd.Index(texts, dtype=str))


def _provenance_column(pd: Any, name: str, small: list[Any], prov_index: np.ndarray) -> Any:
    if name in _NULLABLE_INT:
        return pd.array(small, dtype="Int64").take(prov_index)
    if all(v is None or isinstance(v, str) for v in small):
        return _categorical(pd, small, prov_index)
    return _objects(small)[prov_index]


def _order(table: Any, ids: np.ndarray, prov_rows: list[dict[str, Any]], prov_index: np.ndarray) -> np.ndarray:
    """The rows in :data:`_SORT` order (stable): by the provenance's sort fields, then the sample id."""
    order_of_prov = sorted(range(len(ids)), key=lambda j: tuple(str(prov_rows[j][c] or "") for c in _SORT[:-1]))
    prov_rank = np.empty(len(ids), dtype=np.int64)
    prov_rank[order_of_prov] = np.arange(len(ids))
    samples, sample_index = _dictionary_column(table.column("sample_id"))
    sample_rank = np.argsort(np.argsort(np.array([str(s) for s in samples], dtype=object), kind="stable"))
    return np.lexsort((sample_rank[sample_index], prov_rank[prov_index]))


def _keys(pd: Any, table: Any, order: np.ndarray) -> Any:
    """The ``key`` column in ``order``: 64 hex digits per key, built as one Arrow string array
    over one buffer (no Python string per key) where every key is a runner key."""
    text = hex_key_bytes(table, order)
    if text is None:
        return _text(pd, key_array(table).take(pa.array(order)))
    offsets = np.arange(0, 64 * (len(text) + 1), 64, dtype=np.int64)  # large_string: pandas' own layout
    return _text(
        pd, pa.Array.from_buffers(pa.large_string(), len(text), [None, pa.py_buffer(offsets), pa.py_buffer(text)])
    )


class _Columns:
    """The columns of a table, each handed out once and then dropped from the table, so that its
    memory goes as soon as the frame's column is built from it (the table is the only holder)."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    def pop(self, name: str) -> pa.ChunkedArray:
        column = self.table.column(name)
        self.table = self.table.drop_columns([name])
        pa.default_memory_pool().release_unused()  # the columns popped before (gone by now) go back
        return column


def _frame(
    holder: list[Any], blocks: dict[str, dict[str, Any]], files: dict[str, Path], curves: bool = True
) -> pd.DataFrame:
    """The records frame of the table of :data:`~xaibench.runner.RECORDS_TABLE` (any order) that
    ``holder`` holds, sorted. The table is taken out of ``holder`` (no other reference keeps it) and
    its columns are dropped one by one as the frame's are built: the largest, the keys, first."""
    pd = _pandas()
    table = holder.pop()
    n = table.num_rows
    if n == 0:
        return pd.DataFrame([], columns=list(RECORD_COLUMNS)).astype(dict.fromkeys(_NULLABLE_INT, "Int64"))
    table = table.unify_dictionaries()  # chunks stay as read: each column is combined when it is used
    ids, prov_index = _dictionary_column(table.column("prov"))
    ids = ids[:-1]
    prov_rows = [_provenance_row(blocks[i], files.get(i, _UNKNOWN_FILE)) for i in ids]
    odd = np.flatnonzero(table.column("rest").is_valid().to_numpy(zero_copy_only=False))
    odd_records = decode_records(table.take(odd), blocks) if len(odd) else []  # rows that do not fit the columns
    # Sorted here, column by column as each is built (no copy of the table); with odd rows, pandas
    # sorts the frame below instead.
    order = _order(table, ids, prov_rows, prov_index) if not len(odd) else np.arange(n)
    prov_index = prov_index[order]
    data: dict[str, Any] = {"key": _keys(pd, table, order)}
    columns = _Columns(table.drop_columns(["key_bin", "key_text", "prov", "rest"]))
    del table
    pa.default_memory_pool().release_unused()  # the key bytes' pages go back before the frame grows
    for name in _PROVENANCE_COLUMNS:
        data[name] = _provenance_column(pd, name, [r[name] for r in prov_rows], prov_index)
    for name in ("sample_id", "na_reason", "target_source"):
        values, index = _dictionary_column(columns.pop(name))
        data[name] = _categorical(pd, values, index[order])
    data["value"] = columns.pop("value").to_numpy().astype("float64")[order]
    for name in ("forward_passes", "wall_time_s"):  # a missing cost reads 0, as the runner's summaries count it
        column = columns.pop(name).to_numpy().astype("float64")
        data[name] = np.nan_to_num(column[order], nan=0.0)
    target = columns.pop("target_class").combine_chunks()
    data["target_class"] = pd.arrays.IntegerArray(
        target.fill_null(0).to_numpy(zero_copy_only=False).astype("int64")[order],
        target.is_null().to_numpy(zero_copy_only=False)[order],
    )
    del target
    curve = columns.pop("curve")
    data["curve"] = lazy_objects(curve)[order] if curves else np.full(n, None, dtype=object)
    del curve  # with curves, the cells keep the texts' chunks (and nothing else of the table)
    data["extras"] = _json_column(columns.pop("extras"))[order]
    frame = pd.DataFrame(data, columns=list(RECORD_COLUMNS), copy=False)  # the arrays are its own
    if not len(odd):
        return frame
    for i, record in zip(odd, odd_records, strict=True):
        row = _record_row(record, files.get(ids[prov_index[i]], _UNKNOWN_FILE))
        for name, value in row.items():
            if name == "curve" and not curves:
                continue
            column = frame[name]
            if isinstance(column.dtype, pd.CategoricalDtype) and value is not None:
                if str(value) not in column.cat.categories:
                    frame[name] = column.cat.add_categories([str(value)])
                value = str(value)
            frame.at[i, name] = value
    for name in frame.columns:  # categories added above go in their sorted place (sorting follows them)
        if isinstance(frame[name].dtype, pd.CategoricalDtype):
            frame[name] = frame[name].cat.reorder_categories(sorted(frame[name].cat.categories))
    return frame.sort_values(_SORT, kind="stable", ignore_index=True)


def records(workdir: str | Path, *, curves: bool = True) -> pd.DataFrame:
    """Every per-sample record of a workdir as a DataFrame, one row per (track, explainer,
    metric, sample) and run configuration (seed, parameters, runtime), sorted by track,
    explainer, parameters, metric and sample.

    ``workdir`` is the folder a run wrote (``--workdir``, ``.xaibench`` by default), its
    ``results/`` folder, or one ``results/<track>.jsonl`` journal (read with its part files).
    The part files are read column-wise and joined with their provenance blocks; a workdir whose
    records were never compacted (JSONL only, as older xaibench wrote them) reads the same.
    ``value`` is a float, NaN when the record is n/a (``na_reason`` says why); the direction of
    each metric (``higher`` or ``lower`` is better) is in ``direction``. A torn last line (an
    interrupted write) is skipped, as the runner skips it; so are lines and part files that fail
    their integrity check (written by an older xaibench or by another process), with a warning
    naming the file. A workdir with no records yet gives an empty frame with the same columns.
    Raises :class:`XaibenchError` for a path that is not a workdir or a malformed record.

    ``curve`` cells are :class:`~xaibench.lazyjson.LazyJSONObject`: read-only mappings parsed from
    their JSON text when first read (a deletion curve is 100 numbers, each a Python object once
    parsed: parsing every curve of a large store at load was most of its time and memory);
    ``dict(cell)`` is a plain dict. ``curves=False`` leaves the ``curve`` column ``None``.
    """
    _pandas()
    with without_numpy_huge_pages():  # a GB of arrays: no stalls on compaction (xaibench.allocator)
        return _records(Path(workdir).expanduser(), curves)


def _records(path: Path, curves: bool) -> pd.DataFrame:
    tables, blocks, files = [], {}, {}
    for file in _journals(path):
        try:
            store = RecordStore(file, full=True)
            table, found = store.table()
        except OSError as exc:
            raise XaibenchError(f"{file}: cannot read ({exc.strerror or exc})") from None
        tables.append(table)
        blocks.update(found)
        files.update(dict.fromkeys(found, file))
        if store.unverified:  # not silent: the run reports these records too, and recomputes them
            warnings.warn(
                f"{file}: {store.unverified} records fail their integrity check (no tag, or not this "
                "workdir's); they are left out",
                stacklevel=3,
            )
        if store.old_keys:
            warnings.warn(
                f"{file}: {store.old_keys} records from an older xaibench (no key version); they are left out",
                stacklevel=3,
            )
        del store, table  # only `tables` holds the parts now: _frame frees each column once it is read
    holder = [pa.concat_tables(tables) if tables else RECORDS_TABLE.empty_table()]
    tables.clear()
    frame = _frame(holder, blocks, files, curves)
    return frame.astype({"value": "float64", "forward_passes": "float64", "wall_time_s": "float64"})


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
