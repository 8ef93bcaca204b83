"""JSON objects parsed on first read (xaibench.lazyjson): the records frame's ``curve`` cells."""

from __future__ import annotations

import copy
import json
import pickle

import pandas as pd
import pyarrow as pa
import pytest

from xaibench.lazyjson import LazyJSONObject, lazy_objects

CURVE = {"fraction": [0.0, 0.5, 1.0], "probability": [0.9, 0.4, None], "steps": 2}


def _column() -> pa.ChunkedArray:
    """Two chunks, the second a slice (its rows start at an offset into its buffers)."""
    first = pa.array([json.dumps(CURVE), None, "[1, 2]"])
    second = pa.array(["x", '{"a": {"b": [true]}}', "3.5", None, '{"c": "{not parsed yet"}']).slice(1)
    return pa.chunked_array([first, second])


def test_cells_are_the_json_values_of_their_rows_across_chunks_and_offsets() -> None:
    cells = lazy_objects(_column())
    assert len(cells) == 7
    assert cells[0] == CURVE
    assert CURVE == cells[0]  # noqa: SIM300 - the dict on the left: its == gives way to the cell's
    assert cells[1] is None and cells[5] is None
    assert cells[2] == [1, 2] and isinstance(cells[2], list)  # not an object: parsed at once
    assert cells[3] == {"a": {"b": [True]}}
    assert cells[4] == 3.5
    assert cells[6] == {"c": "{not parsed yet"}
    assert [type(c).__name__ for c in cells] == [
        "LazyJSONObject", "NoneType", "list", "LazyJSONObject", "float", "NoneType", "LazyJSONObject"
    ]  # fmt: skip


def test_an_object_is_parsed_on_first_read_only_and_then_lets_its_text_go() -> None:
    cell = lazy_objects(_column())[0]
    assert cell._parsed is None and cell._source is not None  # nothing parsed while loading
    assert cell["probability"] == [0.9, 0.4, None]
    assert cell._parsed == CURVE and cell._source is None
    assert cell["probability"] is cell["probability"]  # parsed once, then kept


def test_a_cell_reads_as_the_dict_it_holds() -> None:
    cell = LazyJSONObject.from_text(json.dumps(CURVE))
    assert list(cell) == list(CURVE) and len(cell) == 3 and "steps" in cell and cell.get("x") is None
    assert dict(cell) == CURVE and type(dict(cell)) is dict
    assert json.loads(json.dumps(dict(cell))) == CURVE
    assert repr(cell) == repr(CURVE)
    assert cell != {**CURVE, "steps": 3} and cell != [1] and cell == LazyJSONObject.from_text(json.dumps(CURVE))
    with pytest.raises(TypeError):
        cell["steps"] = 3  # type: ignore[index]  # read-only
    with pytest.raises(TypeError):
        hash(cell)


def test_a_cell_pickles_and_copies_as_its_value_parsed_or_not() -> None:
    fresh, read = lazy_objects(_column())[[0, 3]]
    read["a"]
    for cell, value in ((fresh, CURVE), (read, {"a": {"b": [True]}})):
        assert pickle.loads(pickle.dumps(cell)) == value
        assert copy.deepcopy(cell) == value


def test_a_frame_of_cells_writes_them_as_dicts_to_json() -> None:
    frame = pd.DataFrame({"curve": lazy_objects(_column())[:2]})
    assert json.loads(frame.to_json()) == {"curve": {"0": CURVE, "1": None}}


def test_a_text_that_is_not_an_object_cannot_become_a_lazy_object() -> None:
    with pytest.raises(TypeError, match="not a JSON object"):
        LazyJSONObject.from_text("[1, 2]")["x"]


def test_an_unpickled_cell_is_still_unparsed() -> None:
    cell = pickle.loads(pickle.dumps(lazy_objects(_column())[0]))
    assert cell._parsed is None and cell == CURVE
