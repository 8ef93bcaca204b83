"""``xaibench.results.records`` and ``xaibench.results.leaderboard``: documented columns, values
as written, and one clear line for a path that is not what they read."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from xaibench.errors import XaibenchError
from xaibench.publish.leaderboard import CSV_COLUMNS
from xaibench.results import LEADERBOARD_COLUMNS, RECORD_COLUMNS, leaderboard, records
from xaibench.runner.storage.store import RecordStore

GOLDEN_SUBMISSIONS = Path(__file__).parent / "golden" / "submissions" / "v1-initial"
DOCS = Path(__file__).resolve().parents[1] / "docs" / "python-api.md"


def _record(track: str, explainer: str, metric: str, sample: str, value: float | None, **kw: Any) -> dict[str, Any]:
    return {
        "key": f"{track}/{explainer}/{metric}/{sample}/{kw.get('seed', 0)}",
        "metric": metric,
        "sample_id": sample,
        "value": value,
        "na_reason": None if value is not None else "empty saliency map",
        "wall_time_s": 0.5,
        "forward_passes": 3.0,
        "schema": "xaibench.record/1",
        "track": track,
        "explainer": {
            "name": explainer,
            "version": "1.0.0",
            "kind": "saliency",
            "params": kw.get("params", {}),
            "params_digest": kw.get("digest", "44136fa355b3"),
        },
        "model": "shapes-cnn/shapes@e533b868cc42",
        "dataset": {"name": "shapes", "revision": "56e21e6babc99bd9"},
        "seed": kw.get("seed", 0),
        "xaibench": "0.1.0",
        "platform": "Linux",
        "device": "cpu",
        "torch": "2.14.1",
        "torch_threads": 1,
        "metric_info": {
            "id": metric,
            "version": "1.0.0",
            "family": "alignment",
            "direction": "higher",
            "params": kw.get("metric_params", {}),
        },
        "target": {"class": 2, "source": "predicted"},
        **({"curve": kw["curve"]} if "curve" in kw else {}),
    }


def _workdir(tmp_path: Path, lines: dict[str, list[dict[str, Any]]], tail: str = "") -> Path:
    folder = tmp_path / "work" / "results"
    folder.mkdir(parents=True)
    for track, rows in lines.items():  # written as the runner writes them (tagged: readers check the tag)
        RecordStore(folder / f"{track}.jsonl").append(rows)
        with (folder / f"{track}.jsonl").open("a") as fh:
            fh.write(tail)
    return tmp_path / "work"


def test_records_frame_has_the_documented_columns_and_values(tmp_path: Path) -> None:
    work = _workdir(
        tmp_path,
        {
            "shapes": [
                _record("shapes", "random", "iou", "s1", 0.25),
                _record("shapes", "gradient", "iou", "s0", None),
                _record("shapes", "gradient", "iou", "s1", 0.5, curve={"fraction": [0, 1], "probability": [1, 0]}),
                _record("shapes", "gradient", "iou", "s1", 0.75, seed=1, params={"smooth": True}, digest="abc"),
            ],
            "photos": [_record("photos", "random", "iou", "astronaut", 1.0)],
        },
        tail='{"key": "torn',  # an interrupted write: skipped, as the runner skips it
    )
    frame = records(work)
    assert list(frame.columns) == list(RECORD_COLUMNS)
    assert len(frame) == 5
    # sorted by track, explainer, parameters, metric, sample
    assert list(zip(frame["track"], frame["explainer"], frame["sample_id"], strict=True)) == [
        ("photos", "random", "astronaut"),
        ("shapes", "gradient", "s0"),
        ("shapes", "gradient", "s1"),
        ("shapes", "gradient", "s1"),
        ("shapes", "random", "s1"),
    ]
    na = frame[frame["sample_id"] == "s0"].iloc[0]
    assert math.isnan(na["value"]) and na["na_reason"] == "empty saliency map"
    assert frame["value"].dtype == "float64" and str(frame["seed"].dtype) == "Int64"
    variant = frame[frame["params_digest"] == "abc"].iloc[0]
    assert variant["explainer_params"] == {"smooth": True} and variant["seed"] == 1 and variant["value"] == 0.75
    row = frame[(frame["params_digest"] == "44136fa355b3") & (frame["sample_id"] == "s1")]
    row = row[row["explainer"] == "gradient"].iloc[0]
    assert row["curve"] == {"fraction": [0, 1], "probability": [1, 0]}
    assert (row["family"], row["direction"], row["target_class"], row["target_source"]) == (
        "alignment",
        "higher",
        2,
        "predicted",
    )
    assert (row["model"], row["dataset"], row["dataset_revision"]) == (
        "shapes-cnn/shapes@e533b868cc42",
        "shapes",
        "56e21e6babc99bd9",
    )
    # a groupby a notebook would do
    means = frame.groupby(["track", "explainer"])["value"].mean()
    assert means["shapes", "gradient"] == pytest.approx(0.625) and means["photos", "random"] == 1.0
    # one file, and the results/ folder, read the same records
    assert len(records(work / "results" / "shapes.jsonl")) == 4
    pd.testing.assert_frame_equal(records(work / "results"), frame)


def test_records_of_an_empty_workdir_is_an_empty_frame_with_the_columns(tmp_path: Path) -> None:
    (tmp_path / "results").mkdir()
    frame = records(tmp_path)
    assert frame.empty and list(frame.columns) == list(RECORD_COLUMNS)


def test_records_bad_paths_say_so_in_one_line(tmp_path: Path) -> None:
    cases: list[tuple[Path, str]] = [(tmp_path / "nope", "no such workdir")]
    (tmp_path / "plain").mkdir()
    cases.append((tmp_path / "plain", "not an xaibench workdir (no results/ folder)"))
    (tmp_path / "file.txt").write_text("x")
    cases.append((tmp_path / "file.txt", "not a workdir or a records file"))
    old = _workdir(tmp_path / "old", {"t": [{**_record("t", "x", "iou", "s", 1.0), "schema": "xaibench.record/0"}]})
    cases.append((old, "a record has schema 'xaibench.record/0'"))
    broken = _record("t", "x", "iou", "s", 1.0)
    del broken["explainer"]
    cases.append((_workdir(tmp_path / "broken", {"t": [broken]}), "is malformed"))
    for path, message in cases:
        with pytest.raises(XaibenchError) as info:
            records(path)
        assert message in str(info.value) and "\n" not in str(info.value), (path, str(info.value))


@pytest.fixture(scope="module")
def board_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A leaderboard with ranked and unranked rows: the v1 golden submission of gradient (no
    per-sample values, so not ranked) beside a fresh run of three explainers on 8 shapes (random
    and center ranked, the oracle a reference). The v1 files of the fresh run's explainers are
    left out: two files for one explainer and parameters are an error, whatever their names."""
    from xaibench.python_api import run

    fresh = ("random", "center", "oracle")
    root = tmp_path_factory.mktemp("board")
    subs = root / "subs"
    shutil.copytree(GOLDEN_SUBMISSIONS, subs, ignore=shutil.ignore_patterns("*.md", *(f"{x}.json" for x in fresh)))
    for path in subs.glob("*.json"):  # other keys than the fresh run's submissions
        path.rename(path.with_name(f"v1-{path.name}"))
    assert [p.name for p in subs.glob("*.json")] == ["v1-gradient.json"]
    run(
        ",".join(fresh),
        tracks="shapes",
        metrics="iou,pointing_game",
        limit=8,
        workdir=root / "work",
        submissions=subs,
        leaderboard_dir=root / "lb",
        site=False,
        progress=False,
        executor="inprocess",
    )
    return root / "lb"


def test_leaderboard_frame_from_json_and_csv_are_equal_and_match_the_rows(board_dir: Path) -> None:
    from_dir = leaderboard(board_dir)
    from_json = leaderboard(board_dir / "leaderboard.json")
    from_csv = leaderboard(board_dir / "leaderboard.csv")
    assert list(from_dir.columns) == list(LEADERBOARD_COLUMNS) == list(CSV_COLUMNS)
    pd.testing.assert_frame_equal(from_dir, from_json)
    pd.testing.assert_frame_equal(from_json, from_csv)
    rows = json.loads((board_dir / "leaderboard.json").read_text())["rows"]
    assert len(from_json) == len(rows) > 0
    for got, row in zip(from_json.to_dict("records"), rows, strict=True):
        for column in ("track", "explainer", "metric", "family", "direction"):
            assert got[column] == row[column]
        for column in ("value", "ci_low", "ci_high"):
            assert (math.isnan(got[column]) and row[column] is None) or got[column] == row[column]
        for column in ("n", "n_na", "rank"):
            assert (got[column] is pd.NA and row[column] is None) or got[column] == row[column]
        for column in ("status", "label", "flags"):
            assert got[column] == (row[column] or "")
    assert str(from_json["rank"].dtype) == "Int64" and from_json["value"].dtype == "float64"
    assert from_json["rank"].notna().any() and from_json["rank"].isna().any()
    ranked = from_json.set_index(["track", "explainer", "metric"])
    # the oracle is a reference: shown with its value, never ranked (DESIGN 10)
    assert ranked.loc[("shapes", "oracle", "iou"), "rank"] is pd.NA
    # random and center: the two methods a metric ranks among (at least two, references left out)
    assert {ranked.loc[("shapes", x, "iou"), "rank"] for x in ("random", "center")} <= {1, 2}
    assert ranked.loc[("shapes", "oracle", "iou"), "value"] == 1.0
    assert set(from_json["explainer"]) == {"center", "oracle", "random", "v1-gradient"}


def test_leaderboard_bad_paths_say_so_in_one_line(tmp_path: Path, board_dir: Path) -> None:
    def write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    (tmp_path / "empty").mkdir()
    header_only = ",".join(c for c in CSV_COLUMNS if c != "rank")
    text_value = (board_dir / "leaderboard.csv").read_text().splitlines()
    cells = text_value[1].split(",")
    cells[5] = "lots"
    cases = [
        (tmp_path / "nope", "no such leaderboard file or folder"),
        (tmp_path / "empty", "no leaderboard.json or leaderboard.csv here"),
        (write("board.txt", "x"), "not a leaderboard file"),
        (write("bad.json", '{"schema": "xaibench.leaderboard/2",\n "rows": [}'), "bad.json:2:11: not valid JSON"),
        (write("old.json", '{"schema": "xaibench.leaderboard/1", "rows": []}'), "schema 'xaibench.leaderboard/1'"),
        (write("rows.json", '{"schema": "xaibench.leaderboard/2", "rows": {}}'), "'rows' must be a list"),
        (write("cols.csv", header_only + "\n"), "not a leaderboard (no column 'rank')"),
        (write("empty.csv", ""), "empty; expected the header"),
        (write("value.csv", "\n".join([text_value[0], ",".join(cells)]) + "\n"), "column 'value' holds 'lots'"),
    ]
    for path, message in cases:
        with pytest.raises(XaibenchError) as info:
            leaderboard(path)
        assert message in str(info.value) and "\n" not in str(info.value), (path, str(info.value))


def test_the_docs_list_every_column() -> None:
    text = DOCS.read_text(encoding="utf-8")
    for column in (*RECORD_COLUMNS, *LEADERBOARD_COLUMNS):
        assert f"| `{column}` |" in text, f"docs/python-api.md does not document the column {column!r}"
