"""The columnar records store (issue 28): journal + tagged Parquet part files, provenance once per
block; convert of a JSONL workdir written by the xaibench before it, export, tamper, crash and
concurrent writers. (Kill-and-resume and two runs at once, with a part file every 5 records, are
in tests/test_store.py.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

from xaibench import integrity
from xaibench.cli import main
from xaibench.results import records
from xaibench.runner.storage import columnar
from xaibench.runner.storage.store import RecordStore, part_files, record_files

FIXTURE = Path(__file__).parent / "golden" / "records-jsonl-v1"  # written by xaibench before part files


def _lines(path: Path) -> dict[str, dict[str, Any]]:
    """The records of a JSONL file as the old store read them: by key, the integrity tag dropped."""
    out = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        record.pop("integrity", None)
        out[record["key"]] = record
    return out


def _rec(i: int, **kw: Any) -> dict[str, Any]:
    """A record as RecordMaker makes them (a sha256 key, provenance shared by the (explainer, metric))."""
    metric = kw.get("metric", "iou")
    return {
        "key": f"{i:064x}",
        "key_version": 2,
        "metric": metric,
        "sample_id": f"s{i}",
        "value": i / 4,
        "na_reason": None,
        "wall_time_s": 0.25,
        "forward_passes": 2,
        "schema": "xaibench.record/1",
        "track": "t",
        "explainer": {"name": kw.get("explainer", "random"), "params": {}, "params_digest": "44136fa355b3"},
        "seed": 0,
        "metric_info": {"id": metric, "family": "alignment", "direction": "higher", "params": {}},
        "target": {"class": i % 3, "source": "predicted"},
    }


@pytest.fixture
def work(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "work")
    return tmp_path / "work"


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_a_jsonl_workdir_reads_then_converts_to_equal_records_once(work: Path, capsys: Any) -> None:
    journal = work / "results" / "shapes.jsonl"
    before = _lines(journal)
    assert len(before) == 24  # 2 explainers x 3 metrics x 4 samples, from the run that made the fixture
    frame_before = records(work)
    assert RecordStore(journal).records == before  # read as it is, before converting
    code, out, err = _cli(capsys, "records", "convert", str(work))
    assert code == 0, err
    assert out.strip() == f"{work}: 24 records of 1 tracks moved into 1 part files; 0 were in part files already"
    [part] = part_files(journal)
    assert journal.stat().st_size == 0 and pq.read_metadata(part).num_rows == 24
    blocks = columnar.read_part(part.read_bytes())[1]
    assert len(blocks) == 6  # provenance once per (explainer, metric)
    assert RecordStore(journal).records == before
    pd.testing.assert_frame_equal(records(work), frame_before)
    assert list(frame_before["value"].isna()) == [r["value"] is None for r in _sorted(before)]
    raw = part.read_bytes()
    code, out, _ = _cli(capsys, "records", "convert", str(work))  # idempotent
    assert code == 0 and " 0 records of 1 tracks moved into 0 part files; 24 were in part files already" in out
    assert part_files(journal) == [part] and part.read_bytes() == raw
    assert [p.name for p in record_files(work / "results")] == ["shapes.jsonl", part.name]


def _sorted(by_key: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    key = lambda r: (r["track"], r["explainer"]["name"], r["explainer"]["params_digest"], r["metric"], r["sample_id"])  # noqa: E731
    return sorted(by_key.values(), key=key)


def test_export_round_trips_the_records(work: Path, capsys: Any) -> None:
    before = _lines(work / "results" / "shapes.jsonl")
    store = RecordStore(work / "results" / "shapes.jsonl", compact_rows=10**6)
    store.compact()
    store.append([_rec(1), _rec(2)])  # two more in the journal: export reads parts and journal
    expected = {**before, **{r["key"]: r for r in (_rec(1), _rec(2))}}
    out_file = work.parent / "all.jsonl"
    code, out, err = _cli(capsys, "records", "export", str(work), "--out", str(out_file))
    assert code == 0 and err.strip() == f"26 records written to {out_file}"
    assert _lines(out_file) == expected
    code, out, _ = _cli(capsys, "records", "export", str(work))
    assert code == 0 and [json.loads(x)["key"] for x in out.splitlines()] == list(expected)


@pytest.mark.parametrize("kind", ["missing", "file", "no results"])
def test_convert_and_export_of_bad_input_say_so_in_one_line(tmp_path: Path, capsys: Any, kind: str) -> None:
    path = tmp_path / "w"
    if kind == "file":
        path.write_text("x")
    elif kind == "no results":
        path.mkdir()
    reason = {"missing": "no such workdir", "file": "not a workdir (a file)", "no results": "no results/ folder"}
    for command in ("convert", "export"):
        code, _, err = _cli(capsys, "records", command, str(path))
        [line] = err.strip().splitlines()
        assert code == 1 and line.startswith(f"error: {path}: ") and reason[kind] in line, line


def test_a_tampered_part_file_is_ignored_counted_and_recomputed(tmp_path: Path) -> None:
    journal = tmp_path / "results" / "t.jsonl"
    store = RecordStore(journal, compact_rows=4)
    store.append([_rec(i) for i in range(4)])  # 4 records: compacted into part 1
    store.append([_rec(4), _rec(5)])  # 2 in the journal
    [part] = part_files(journal)
    raw = bytearray(part.read_bytes())
    raw[8] ^= 0x01  # one bit of one byte of the first column's data (the footer, with the row count, intact)
    part.write_bytes(bytes(raw))
    again = RecordStore(journal, compact_rows=4)
    assert len(again) == 2 and again.unverified == 4 and _rec(0)["key"] not in again
    with pytest.warns(UserWarning, match="4 records fail their integrity check"):
        assert sorted(records(tmp_path)["sample_id"]) == ["s4", "s5"]
    again.append([_rec(i) for i in range(4)])  # a resumed run computes them again: a new part
    assert len(part_files(journal)) == 2 and len(RecordStore(journal)) == 6
    assert RecordStore(journal).unverified == 4  # the tampered part stays ignored


@pytest.mark.parametrize("how", ["tag removed", "renamed", "journal line edited"])
def test_other_tampering_is_ignored_and_counted(tmp_path: Path, how: str) -> None:
    journal = tmp_path / "t.jsonl"
    RecordStore(journal, compact_rows=3).append([_rec(i) for i in range(3)])
    RecordStore(journal, compact_rows=10).append([_rec(3)])
    [part] = part_files(journal)
    if how == "tag removed":
        part.with_name(part.name + ".tag").unlink()
        expected = (1, 3)
    elif how == "renamed":  # another track's part (its tag binds the file name)
        part.with_name(part.name + ".tag").rename(part.with_name("t.part-000007.parquet.tag"))
        part.rename(part.with_name("t.part-000007.parquet"))
        expected = (1, 3)
    else:
        journal.write_text(journal.read_text().replace('"value":0.75', '"value":0.9'))
        expected = (3, 1)
    store = RecordStore(journal)
    assert (len(store), store.unverified) == expected


def test_a_crash_between_part_and_journal_emptying_never_duplicates(tmp_path: Path) -> None:
    journal = tmp_path / "results" / "t.jsonl"
    store = RecordStore(journal, compact_rows=100)
    store.append([_rec(i) for i in range(3)])
    old = journal.read_bytes()
    store.compact()
    journal.write_bytes(old)  # as if killed after the part's rename, before the journal was emptied
    again = RecordStore(journal, compact_rows=100)
    assert len(again) == 3 and again.journal_records == 0
    assert len(records(tmp_path)) == 3 and len(list(again.iter_records())) == 3
    assert again.compact() is None and len(part_files(journal)) == 1


def test_provenance_is_stored_once_per_block_and_rows_are_small(tmp_path: Path) -> None:
    journal = tmp_path / "t.jsonl"
    recs = [
        _rec(i, explainer=e, metric=m)
        for i, (e, m) in enumerate((e, m) for e in "ab" for m in "xyz" for _ in range(50))
    ]
    store = RecordStore(journal, compact_rows=10**6)
    store.append(recs)
    jsonl_bytes = journal.stat().st_size
    part = store.compact()
    assert part is not None
    assert len(columnar.read_part(part.read_bytes())[1]) == 6
    footer = pq.read_metadata(part).metadata
    assert footer[b"xaibench.schema"] == b"xaibench.records-part/2" and b"xaibench.provenance" not in footer
    assert part.stat().st_size < jsonl_bytes / 4, (part.stat().st_size, jsonl_bytes)
    assert RecordStore(journal).records == {r["key"]: r for r in recs}
    assert RecordStore(journal).get([recs[7]["key"], "nope", recs[0]["key"]]) == [recs[7], recs[0]]


def test_a_part_of_the_first_format_is_still_read(tmp_path: Path) -> None:
    """``xaibench.records-part/1`` kept the provenance blocks as plain JSON in the Arrow schema's
    metadata; such a part reads back the same records as the ``/2`` part of the same rows."""
    recs = [_rec(i, explainer=e) for i, e in enumerate("abab")]
    table, blocks = columnar.encode(recs)
    old = table.replace_schema_metadata(
        {b"xaibench.schema": b"xaibench.records-part/1", b"xaibench.provenance": columnar.canonical(blocks).encode()}
    )
    pq.write_table(old, tmp_path / "old.parquet", compression="zstd")
    for raw in ((tmp_path / "old.parquet").read_bytes(), columnar.part_bytes(table, blocks)):
        got, got_blocks = columnar.read_part(raw)
        assert got_blocks == blocks and columnar.decode(got, got_blocks) == recs
    unknown = table.replace_schema_metadata({b"xaibench.schema": b"xaibench.records-part/9"})
    pq.write_table(unknown, tmp_path / "new.parquet")
    with pytest.raises(ValueError, match="not a records part"):
        columnar.read_part((tmp_path / "new.parquet").read_bytes())


def test_odd_records_survive_the_columns(tmp_path: Path) -> None:
    """Fields absent, null, or of a type their column does not hold, come back as they went in."""
    odd = [
        {"key": "a", "value": 1},
        {"key": "b", "value": True, "sample_id": 7, "target": None, "curve": None, "extras": {"x": [1, 2]}},
        {"key": "c", "value": None, "na_reason": "empty", "forward_passes": 2.5, "target": {"class": 1}},
    ]
    table, blocks = columnar.encode(odd)
    assert columnar.decode(table, blocks) == odd
    journal = tmp_path / "t.jsonl"
    RecordStore(journal, compact_rows=3).append(odd)
    assert part_files(journal) and RecordStore(journal).records == {r["key"]: r for r in odd}


_WRITER = """
import sys
from pathlib import Path
from xaibench.runner.storage.store import RecordStore
path, start = Path(sys.argv[1]), int(sys.argv[2])
for i in range(start, start + 40, 2):
    rec = lambda k: {"key": f"{k:064x}", "value": k / 2, "writer": start}
    RecordStore(path, compact_rows=7).append([rec(i), rec(i + 1), rec(i + 2)])
"""


def test_concurrent_writers_that_compact_never_duplicate_or_lose_a_key(tmp_path: Path) -> None:
    """Four processes append overlapping keys to one store (a part file every 7 records) at once:
    every key is stored once, in a part or in the journal."""
    journal = tmp_path / "t.jsonl"
    integrity.secret(tmp_path, create=True)  # as a run makes it, under the workdir lock, before any writer
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")]),
    }
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(journal), str(s)], env=env, stderr=subprocess.PIPE)
        for s in (0, 10, 20, 30)
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    store = RecordStore(journal, full=True)
    assert (store.unverified, store.torn_lines) == (0, 0)
    table, _ = store.table()
    keys = columnar.key_list(table)
    assert len(keys) == len(set(keys)) and set(keys) == {f"{k:064x}" for k in range(0, 71)}
    assert len(part_files(journal)) >= 2


def test_the_record_schema_is_the_runners() -> None:
    from xaibench.runner.records import RECORD_SCHEMA

    assert columnar.RECORD_SCHEMA == RECORD_SCHEMA == "xaibench.record/1"


def test_get_reads_parts_written_after_its_first_call(tmp_path: Path) -> None:
    store = RecordStore(tmp_path / "t.jsonl", compact_rows=2)
    store.append([_rec(0), _rec(1)])  # part 1
    assert store.get([_rec(1)["key"]]) == [_rec(1)]  # part 1 read for get()
    store.append([_rec(2), _rec(3)])  # part 2: added to what get() read
    store.append([_rec(4)])  # in the journal
    keys = [_rec(i)["key"] for i in (3, 0, 4, 9)]
    assert store.get(keys) == [_rec(3), _rec(0), _rec(4)]
    assert len(part_files(tmp_path / "t.jsonl")) == 2 and store.journal_records == 1


_RESUMER = """
import sys
from pathlib import Path
from xaibench.runner.storage.store import RecordStore
path = Path(sys.argv[1])
store = RecordStore(path, compact_rows=7)
for i in range(0, 300, 3):  # what a run does: skip what is stored, append the rest a batch at a time
    batch = [{"key": f"{k:064x}", "value": k / 8, "sample_id": f"s{k}"} for k in range(i, i + 3)]
    store.append([r for r in batch if r["key"] not in store])
"""


def test_sigkill_mid_append_or_compaction_then_resume_gives_every_record_once(tmp_path: Path) -> None:
    """A writer killed (SIGKILL) at seeded random points, five times, then run to the end: the store
    holds exactly the records of an uninterrupted writer, each key once across parts and journal."""
    import random
    import signal
    import time

    journal = tmp_path / "t.jsonl"
    integrity.secret(tmp_path, create=True)
    root = str(Path(__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    rng = random.Random(3)
    killed_mid_work = 0
    for _ in range(5):
        proc = subprocess.Popen([sys.executable, "-c", _RESUMER, str(journal)], env=env)
        deadline = time.monotonic() + 60
        while not journal.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.3))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        killed_mid_work += len(RecordStore(journal)) < 300
    assert killed_mid_work >= 2, "most kills should land before the records are complete"
    done = subprocess.run([sys.executable, "-c", _RESUMER, str(journal)], env=env, timeout=120)
    assert done.returncode == 0
    store = RecordStore(journal, full=True)
    table, blocks = store.table()
    keys = columnar.key_list(table)
    assert len(keys) == len(set(keys)) == 300
    expected = {f"{k:064x}": {"key": f"{k:064x}", "value": k / 8, "sample_id": f"s{k}"} for k in range(300)}
    assert {r["key"]: r for r in columnar.decode(table, blocks)} == expected
    assert len(part_files(journal)) >= 30 and store.unverified == 0  # a part every 9 records (3 appends)


def test_a_record_that_does_not_fit_the_columns_reads_into_the_frame(tmp_path: Path) -> None:
    """A sample id, reason or target source that is not in the part's dictionaries (the row goes
    to ``rest``) still reads into the frame's categorical columns, in sorted place."""
    from xaibench.results import records
    from xaibench.testing.scale import ScaleData, ScaleSpec

    recs = list(ScaleData(ScaleSpec(tracks=1, explainers=1, metrics=2, samples=8)).records(0, 0))
    recs[3] = {**recs[3], "sample_id": 12345, "value": None, "na_reason": "an odd reason"}  # an int id: to `rest`
    journal = tmp_path / "results" / f"{recs[0]['track']}.jsonl"
    RecordStore(journal, compact_rows=len(recs)).append(recs)
    assert part_files(journal)
    frame = records(tmp_path)
    assert len(frame) == len(recs)
    row = frame[frame["key"] == recs[3]["key"]].iloc[0]
    assert row["sample_id"] == "12345" and row["na_reason"] == "an odd reason" and pd.isna(row["value"])
    assert isinstance(frame["sample_id"].dtype, pd.CategoricalDtype)
    assert frame[["metric", "sample_id"]].astype(str).values.tolist() == sorted(
        frame[["metric", "sample_id"]].astype(str).values.tolist()
    )


def test_records_without_curves_equal_records_but_for_the_curve_column(tmp_path: Path) -> None:
    from xaibench.results import records
    from xaibench.testing.scale import ScaleData, ScaleSpec

    data = ScaleData(ScaleSpec(tracks=1, explainers=2, metrics=6, samples=8))  # the 5th and 6th: deletion, insertion
    data.write_records(tmp_path)
    full, lean = records(tmp_path), records(tmp_path, curves=False)
    assert full["curve"].notna().any() and lean["curve"].isna().all()
    pd.testing.assert_frame_equal(full.drop(columns="curve"), lean.drop(columns="curve"))


def test_curves_load_unparsed_and_read_as_the_records_curves(tmp_path: Path) -> None:
    """A curve cell is parsed when it is first read, not while loading (200k curves parsed at load
    were most of the time and 1.3 GB of a 4M-record store); read, it is the record's curve."""
    from xaibench.lazyjson import LazyJSONObject
    from xaibench.results import records
    from xaibench.testing.scale import ScaleData, ScaleSpec

    data = ScaleData(ScaleSpec(tracks=1, explainers=2, metrics=6, samples=8))
    data.write_records(tmp_path)
    frame = records(tmp_path)
    cells = frame["curve"].dropna()
    assert len(cells) and all(isinstance(c, LazyJSONObject) and c._parsed is None for c in cells)
    by_key = {r["key"]: r for r in data.records(0, 0)} | {r["key"]: r for r in data.records(0, 1)}
    for key, cell in zip(frame["key"], frame["curve"], strict=True):
        assert cell == by_key[key].get("curve")
