"""JSON objects parsed on first use: the ``curve`` cells of a large records frame.

A deletion curve is about a hundred numbers; parsed, each is a Python float (32 bytes with its
list slot), so the 200,000 curves of a 4-million-record store would take 1.3 GB and most of the
load time. :class:`LazyJSONObject` holds a reference to the curve's JSON text, which stays in the
Arrow string array it was read into (one buffer for every curve; no Python string per curve), and
parses it the first time it is read. It is a read-only :class:`~collections.abc.Mapping`: it
reads, compares (``==`` with a ``dict``) and prints as the ``dict`` it holds, and ``dict(cell)``
gives a plain ``dict`` (what ``json.dumps`` and ``pyarrow`` need; ``DataFrame.to_json`` writes it
as its dict).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["LazyJSONObject", "lazy_objects"]


class LazyJSONObject(Mapping[str, Any]):
    """A JSON object (a ``dict`` of str keys) parsed from row ``row`` of a string array (or from
    a text) when first read, then kept. Read-only; ``dict(obj)`` is a plain copy."""

    __slots__ = ("_parsed", "_row", "_source")

    def __init__(self, source: pa.StringArray | pa.LargeStringArray | str, row: int = 0) -> None:
        self._source: Any = source  # the array holding the text at ``row``, or the text itself
        self._row = row
        self._parsed: dict[str, Any] | None = None

    @classmethod
    def from_text(cls, text: str) -> LazyJSONObject:
        """The object of one JSON text (it must be a JSON object), parsed when first read."""
        return cls(text)

    @property
    def text(self) -> str:
        """Its JSON text (once parsed: the parsed object's, compact)."""
        if self._parsed is not None:
            return json.dumps(self._parsed, separators=(",", ":"))
        return self._source if isinstance(self._source, str) else self._source[self._row].as_py()

    def _value(self) -> dict[str, Any]:
        if self._parsed is None:
            text = self.text
            parsed = json.loads(text)
            if not isinstance(parsed, dict):
                raise TypeError(f"not a JSON object: {text[:60]!r}")
            self._parsed = parsed
            self._source = None  # the text is not needed any more
        return self._parsed

    def __getitem__(self, key: str) -> Any:
        return self._value()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._value())

    def __len__(self) -> int:
        return len(self._value())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyJSONObject):
            return self._value() == other._value()
        return self._value() == other if isinstance(other, Mapping) else NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable-looking, as a dict: not hashable

    def toDict(self) -> dict[str, Any]:  # the name pandas' ``to_json`` looks for
        """The parsed object (``DataFrame.to_json`` writes the cell as this dict)."""
        return self._value()

    def __repr__(self) -> str:
        return repr(self._value())

    def __reduce__(self) -> tuple[Any, tuple[str]]:  # pickles (and deep-copies) as its text
        return (LazyJSONObject.from_text, (self.text,))


def lazy_objects(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """An object array, one cell per row of a string column of JSON texts: ``None`` where null,
    a :class:`LazyJSONObject` where the text is a JSON object (starts with ``{``), and the parsed
    value for any other text (parsed now). No row's text is copied: each object refers to its row
    in ``column``'s chunks, which it keeps until it is parsed."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    out = np.full(len(column), None, dtype=object)
    start = 0
    for chunk in chunks:
        if chunk.null_count < len(chunk):
            objects = pc.starts_with(chunk, "{").fill_null(False).to_numpy(zero_copy_only=False)
            for row in np.flatnonzero(objects).tolist():
                out[start + row] = LazyJSONObject(chunk, row)
            others = np.flatnonzero(chunk.is_valid().to_numpy(zero_copy_only=False) & ~objects)
            if len(others):
                texts = chunk.take(pa.array(others)).to_pylist()
                for row, value in zip(others.tolist(), json.loads("[" + ",".join(texts) + "]"), strict=True):
                    out[start + row] = value
        start += len(chunk)
    return out
