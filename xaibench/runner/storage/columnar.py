"""Record part files: per-sample records as one Parquet table, provenance stored once.

A record (``xaibench.record/1``, :mod:`xaibench.runner.records`) splits into its row fields
(:data:`ROW_FIELDS`: the key, sample, value, n/a reason, costs, target, curve and extras) and
the rest, its provenance (track, explainer block, model, dataset, seed, runtime, metric block):
the same for every record of one (track, explainer, metric) of a run. A part file holds one
row per record (:data:`COLUMNS`) and, in its key-value metadata, the provenance blocks by id
(``p`` + the first 31 hex of the sha256 of their canonical JSON); each row names its block in the
dictionary-encoded ``prov`` column. :func:`decode` gives back records equal (``==``) to the ones
encoded once they went through JSON (what the journal stores): numbers compare equal, a
``forward_passes`` that is a whole number comes back as an ``int``.

Keys that are 64 lowercase hex digits (the runner's sha256 keys) are stored as 32 raw bytes
(``key_bin``); any other key as text (``key_text``). A row field that is absent, or of a type its
column does not hold, goes to the row's ``rest`` JSON so that nothing is lost.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

PART_SCHEMA = "xaibench.records-part/2"
READ_PART_SCHEMAS = ("xaibench.records-part/1", PART_SCHEMA)
"""The part formats read: ``/1`` kept the provenance blocks as plain JSON in the Arrow schema's
metadata (so twice in the footer: also inside pyarrow's serialised schema, base64); ``/2`` keeps
them once, zlib-compressed, in the file's key-value metadata (:func:`part_bytes`)."""
RECORD_SCHEMA = "xaibench.record/1"
"""The records' schema (:data:`xaibench.runner.records.RECORD_SCHEMA`, here without torch's import time)."""
ROW_FIELDS = ("key", "sample_id", "value", "na_reason", "wall_time_s", "forward_passes", "target", "curve", "extras")
_STR = pa.dictionary(pa.int32(), pa.string())
SCHEMA = pa.schema(
    [
        ("key_bin", pa.binary(32)),
        ("key_text", pa.string()),
        ("prov", _STR),
        ("sample_id", _STR),
        ("value", pa.float64()),
        ("na_reason", _STR),
        ("wall_time_s", pa.float64()),
        ("forward_passes", pa.float64()),
        ("target_class", pa.int64()),
        ("target_source", _STR),
        ("curve", pa.string()),
        ("extras", pa.string()),
        ("rest", pa.string()),
    ]
)
COLUMNS = tuple(SCHEMA.names)
KEY_COLUMNS = ["key_bin", "key_text"]
_NUMBERS = ("value", "wall_time_s", "forward_passes")
_HEX = frozenset("0123456789abcdef")
_META_SCHEMA = b"xaibench.schema"
_META_PROV = b"xaibench.provenance"  # /1: canonical JSON
_META_PROV_ZLIB = b"xaibench.provenance.zlib"  # /2: base64 of the zlib-compressed canonical JSON


def canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def provenance_id(block: dict[str, Any]) -> str:
    """The id of a provenance block: ``p`` + 31 hex digits of the sha256 of its canonical JSON."""
    return "p" + hashlib.sha256(canonical(block).encode()).hexdigest()[:31]


def _is_hex_key(key: str) -> bool:
    return len(key) == 64 and _HEX.issuperset(key)


def _number(v: Any) -> bool:
    return v is None or (isinstance(v, int | float) and not isinstance(v, bool))


def encode(records: Iterable[dict[str, Any]]) -> tuple[pa.Table, dict[str, dict[str, Any]]]:
    """The rows of ``records`` (JSON-safe dicts, each with a string ``key``) as a table of
    :data:`SCHEMA`, and the provenance blocks they name, by id."""
    cols: dict[str, list[Any]] = {name: [] for name in COLUMNS}
    blocks: dict[str, dict[str, Any]] = {}
    ids: dict[str, str] = {}  # canonical JSON -> id (most records share a handful of blocks)
    for record in records:
        key = record["key"]
        hexkey = _is_hex_key(key)
        cols["key_bin"].append(bytes.fromhex(key) if hexkey else None)
        cols["key_text"].append(None if hexkey else key)
        block = {k: v for k, v in record.items() if k not in ROW_FIELDS}
        text = canonical(block)
        pid = ids.get(text)
        if pid is None:
            pid = ids[text] = provenance_id(block)
            blocks[pid] = block
        cols["prov"].append(pid)
        rest: dict[str, Any] = {}
        absent: list[str] = []

        _put(cols, rest, absent, record, "sample_id", isinstance(record.get("sample_id"), str))
        reason = record.get("na_reason")
        _put(cols, rest, absent, record, "na_reason", reason is None or isinstance(reason, str))
        for name in _NUMBERS:
            _put(cols, rest, absent, record, name, _number(record.get(name)))
        target = record.get("target")
        plain_target = (
            isinstance(target, dict)
            and set(target) == {"class", "source"}
            and isinstance(target["class"], int)
            and not isinstance(target["class"], bool)
            and -(2**63) <= target["class"] < 2**63
            and isinstance(target["source"], str)
        )
        if plain_target:
            cols["target_class"].append(target["class"])  # type: ignore[index]
            cols["target_source"].append(target["source"])  # type: ignore[index]
        else:
            cols["target_class"].append(None)
            cols["target_source"].append(None)
            if "target" in record:
                rest["target"] = target
            else:
                absent.append("target")
        for name in ("curve", "extras"):  # absent: null; present (even null): its JSON
            cols[name].append(canonical(record[name]) if name in record else None)
        if absent:
            rest["__absent__"] = absent
        cols["rest"].append(canonical(rest) if rest else None)
    arrays = [pa.array(cols[f.name], type=f.type) for f in SCHEMA]
    return pa.Table.from_arrays(arrays, schema=SCHEMA), blocks


def _put(
    cols: dict[str, list[Any]], rest: dict[str, Any], absent: list[str], record: dict[str, Any], name: str, ok: bool
) -> None:
    """Put ``record[name]`` in its column when ``ok`` (it fits), else in ``rest`` (or ``absent``)."""
    if name not in record:
        absent.append(name)
        cols[name].append(None)
    elif ok:
        cols[name].append(record[name])
    else:
        rest[name] = record[name]
        cols[name].append(None)


def part_bytes(table: pa.Table, blocks: dict[str, dict[str, Any]]) -> bytes:
    """A Parquet file of ``table`` (``xaibench.records-part/2``) with ``blocks`` in its metadata.

    zstd at level 9 (reading costs the same at any level; the curves' JSON text shrinks by a
    fifth against level 1), dictionary-encoded text columns, the float columns byte-stream split
    (the exponent bytes of a column's values compress apart from their noisy low bytes), and the
    provenance blocks once, zlib-compressed: they repeat the explainer, model and dataset of every
    metric and were, as plain JSON in the Arrow schema, a fifth of a large store."""
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(
        sink,
        table.schema,
        compression="zstd",
        compression_level=9,
        use_dictionary=["prov", "sample_id", "na_reason", "target_source"],
        use_byte_stream_split=list(_NUMBERS),
    ) as writer:
        writer.write_table(table, row_group_size=1 << 20)
        writer.add_key_value_metadata(
            {
                _META_SCHEMA: PART_SCHEMA.encode(),
                _META_PROV_ZLIB: base64.b64encode(zlib.compress(canonical(blocks).encode(), 9)),
            }
        )
    return sink.getvalue().to_pybytes()


def read_part(raw: bytes, columns: Sequence[str] | None = None) -> tuple[pa.Table, dict[str, dict[str, Any]]]:
    """The table (``columns`` of it, or all) and provenance blocks of a part file's bytes.
    Raises ``ValueError`` for bytes that are not a part file."""
    try:
        # ParquetFile, not read_table: that one imports pyarrow.dataset (0.7 s) on first use
        table = pq.ParquetFile(pa.BufferReader(raw)).read(columns=list(columns) if columns else None)
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"not a Parquet file ({exc})") from None
    meta = table.schema.metadata or {}
    if meta.get(_META_SCHEMA) not in {s.encode() for s in READ_PART_SCHEMAS}:
        raise ValueError(f"not a records part ({', '.join(READ_PART_SCHEMAS)})")
    try:
        packed = meta.get(_META_PROV_ZLIB)
        text = zlib.decompress(base64.b64decode(packed)) if packed is not None else meta.get(_META_PROV, b"{}")
        blocks = json.loads(text)
    except (ValueError, zlib.error) as exc:
        raise ValueError(f"unreadable provenance blocks ({exc})") from None
    return table.replace_schema_metadata(None), blocks


def row_count(raw: bytes) -> int:
    """The rows a part file's footer claims (1 when it has no readable footer)."""
    try:
        return max(1, pq.ParquetFile(pa.BufferReader(raw)).metadata.num_rows)
    except (pa.ArrowException, OSError):
        return 1


_HEX_ROWS = 1 << 16  # keys converted at a time: the temporaries stay a few MB


def _key_bytes(keys: pa.Array) -> np.ndarray:
    """``(N, 32)`` uint8: the bytes of a ``binary(32)`` array without nulls (no copy)."""
    raw = np.frombuffer(keys.buffers()[1], dtype=np.uint8, count=32 * (len(keys) + keys.offset))
    return raw[32 * keys.offset :].reshape(-1, 32)


def _hex_digits(nibbles: np.ndarray) -> np.ndarray:
    """The ASCII hex digits of a uint8 array of values 0..15, in place (arithmetic, no gather)."""
    nibbles += 48  # "0".."9"; 10..15 then go on to "a".."f"
    nibbles += (nibbles > 57) * np.uint8(39)
    return nibbles


def _hex(raw: np.ndarray, order: np.ndarray | None = None) -> np.ndarray:
    """``(N,)`` ``S64``: the rows of ``raw`` (``(N, 32)`` uint8; in ``order`` when given) as 64 hex
    digits each: each byte's two nibbles as digits, some 65k rows at a time, written into the one
    output array."""
    n = len(raw) if order is None else len(order)
    out = np.empty((n, 64), dtype=np.uint8)
    for start in range(0, n, _HEX_ROWS):
        stop = min(n, start + _HEX_ROWS)
        rows = raw[start:stop] if order is None else raw[order[start:stop]]
        out[start:stop, 0::2] = _hex_digits(rows >> 4)
        out[start:stop, 1::2] = _hex_digits(rows & 15)
    return out.view("S64").ravel()


def hex_keys(table: pa.Table) -> np.ndarray:
    """The record keys of a table with :data:`KEY_COLUMNS`, as an object array of str."""
    n = table.num_rows
    out = np.empty(n, dtype=object)
    if n == 0:
        return out
    kb = table.column("key_bin").combine_chunks()
    valid = kb.is_valid().to_numpy(zero_copy_only=False)
    if valid.any():
        out[valid] = _hex(_key_bytes(kb.filter(kb.is_valid()))).astype(str).astype(object)
    if not valid.all():
        kt = table.column("key_text").to_numpy(zero_copy_only=False)
        out[~valid] = kt[~valid]
    return out


def hex_key_bytes(table: pa.Table, order: np.ndarray | None = None) -> np.ndarray | None:
    """``(N,)`` ``S64``: every key of a table with :data:`KEY_COLUMNS` (in ``order`` when given) as
    64 hex digits, computed from ``key_bin`` without a Python object per key; ``None`` when some
    key is stored as text."""
    kb = table.column("key_bin").combine_chunks()
    if kb.null_count:
        return None
    return _hex(_key_bytes(kb), order)


def key_array(table: pa.Table) -> pa.Array:
    """The record keys of a table with :data:`KEY_COLUMNS`, as an Arrow string array."""
    kb = table.column("key_bin").combine_chunks()
    valid = kb.is_valid().to_numpy(zero_copy_only=False)
    text = np.zeros(len(kb), dtype="S64")
    if valid.any():
        text[valid] = _hex(_key_bytes(kb.filter(kb.is_valid())))
    keys = pa.array(text, pa.binary()).cast(pa.string())
    if valid.all():
        return keys
    return pc.if_else(pa.array(valid), keys, table.column("key_text").combine_chunks())


def key_list(table: pa.Table) -> list[str]:
    """:func:`hex_keys` as a list."""
    return hex_keys(table).tolist()


def decode(table: pa.Table, blocks: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of a part table (all :data:`COLUMNS`), in row order."""
    keys = key_list(table)
    data = {name: table.column(name).to_pylist() for name in COLUMNS if name not in KEY_COLUMNS}
    out = []
    for i, key in enumerate(keys):
        record = dict(blocks.get(data["prov"][i], {}))
        record["key"] = key
        record["sample_id"] = data["sample_id"][i]
        record["value"] = data["value"][i]
        record["na_reason"] = data["na_reason"][i]
        record["wall_time_s"] = data["wall_time_s"][i]
        fp = data["forward_passes"][i]
        record["forward_passes"] = int(fp) if isinstance(fp, float) and fp.is_integer() else fp
        if data["target_class"][i] is not None:
            record["target"] = {"class": data["target_class"][i], "source": data["target_source"][i]}
        for name in ("curve", "extras"):
            if data[name][i] is not None:
                record[name] = json.loads(data[name][i])
        if data["rest"][i] is not None:
            rest = json.loads(data["rest"][i])
            for name in rest.pop("__absent__", []):
                record.pop(name, None)
            record.update(rest)
        out.append(record)
    return out
