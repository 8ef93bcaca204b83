"""The official suite and the regeneration of the record (DESIGN 10, issue 41).

- ``record-v1`` pins each dataset (content digest, sample count); a copy that differs stops a run
  before any work with one line naming the dataset and what differs.
- ``xaibench record build`` computes only what the record lacks, one explainer at a time; killed
  (SIGKILL) in the middle and run again, it ends with the same records and submission values as
  an uninterrupted build (creation and timing fields excepted).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from xaibench.api import TrackSpec
from xaibench.datasets.mechanisms import KINDS as MECHANISM_KINDS
from xaibench.datasets.mechanisms import MechanismsDataset
from xaibench.errors import XaibenchError
from xaibench.record import missing_work, record_paths
from xaibench.results import records
from xaibench.runner.pins import check_revisions
from xaibench.suites.record import MECHANISM_SAMPLES, RECORD_SUITE, RECORD_TRACKS, REVISIONS, Pinned, RecordSuite

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
TIMING = {"created", "started", "explain_seconds", "wall_time_s", "seconds", "run_id", "explained", "cost"}
"""Fields that differ between two builds of the same record: when, how long (``cost``: the measured
seconds and memory of each explanation), and whether a map was computed or read from the cache
(``explained``: a resumed build reads the maps it made before)."""


class Copy:
    """A dataset stand-in: a revision and a length."""

    def __init__(self, revision: str, n: int) -> None:
        self.revision, self.n = revision, n

    def __len__(self) -> int:
        return self.n


def test_the_official_suite_declares_every_track_and_pins_each_dataset() -> None:
    names = [t.spec.name for t in RECORD_TRACKS]
    assert names == [
        "shapes",
        "shapes-shortcut",
        "shapes-cbm",
        "shapes-vit",
        "photos",
        "human-attention",
        "voc2012-seg",
        "oxford-pets",
        "coco",
        *(f"mechanism-{kind}" for kind in MECHANISM_KINDS),
    ]
    assert set(REVISIONS) == set(names)
    synthetic = [t.spec for t in RECORD_TRACKS if t.spec.synthetic and t.spec.dataset != "mechanisms"]
    assert {s.name for s in synthetic} == {"shapes", "shapes-shortcut", "shapes-cbm", "shapes-vit"}
    assert all(s.dataset_params["n"] >= 256 and REVISIONS[s.name].samples >= 256 for s in synthetic)
    # the mechanism tracks (DESIGN 11): pinned to what the generator makes here, ranked on the known answer
    for spec in (t.spec for t in RECORD_TRACKS if t.spec.dataset == "mechanisms"):
        made = MechanismsDataset(**spec.dataset_params)
        assert (
            (REVISIONS[spec.name].revision, REVISIONS[spec.name].samples)
            == (made.revision, MECHANISM_SAMPLES)  # as many as the other synthetic tracks (DESIGN 10)
            == (
                made.revision,
                len(made),
            )
        )
        assert spec.metrics is not None and spec.metrics[0] == "family:ground_truth" and spec.synthetic
    suite = RecordSuite()
    assert suite.name == RECORD_SUITE == "record-v1"
    assert suite.revisions()["shapes"] == (REVISIONS["shapes"].revision, 256)


def test_a_copy_that_differs_is_named_before_any_work() -> None:
    spec = TrackSpec(name="coco", dataset="coco", model="m", dataset_params={"root": "/data/coco"})
    pinned = {"coco": ("31a6933c0303b53d", 10)}
    check_revisions("record-v1", [spec], pinned, lambda s: Copy("31a6933c0303b53d", 10))  # the same: nothing
    with pytest.raises(XaibenchError) as caught:
        check_revisions("record-v1", [spec], pinned, lambda s: Copy("59ae0d8f5fcdbe96", 9))
    line = str(caught.value)
    assert "\n" not in line and line.startswith("suite record-v1: dataset 'coco' of track 'coco' at /data/coco")
    assert "9 samples where the suite's copy has 10" in line and "content digest 59ae0d8f5fcdbe96" in line
    other = TrackSpec(name="mine", dataset="folder", model="m")
    check_revisions("record-v1", [other], pinned, lambda s: pytest.fail("an unpinned track is not loaded"))


def test_docs_datasets_table_states_every_pin() -> None:
    """docs/datasets.md's table of the official suite has one row per track with its pinned sample
    count and revision, and no row for a track the suite does not pin."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "datasets.md").read_text(encoding="utf-8")
    table = text.split("## The official suite: `record-v1`")[1].split("\n## ")[0]
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| `") and len(cells) == 5:
            rows[cells[0].strip("`")] = (cells[3].strip("`"), int(cells[2]))
    assert rows == {name: (pin.revision, pin.samples) for name, pin in REVISIONS.items()}


def test_the_shipped_synthetic_datasets_are_the_pinned_ones() -> None:
    from xaibench.plugins.manager import get_registry

    registry = get_registry()
    for row in RECORD_TRACKS:
        if row.spec.synthetic:
            dataset = registry.create("dataset", row.spec.dataset, **row.spec.dataset_params)
            pinned = REVISIONS[row.spec.name]
            assert (dataset.revision, len(dataset)) == (pinned.revision, pinned.samples), row.spec.name
            assert pinned.samples == 256  # every synthetic track, mechanisms included (DESIGN 10)


@pytest.mark.skipif(not SHARED.is_dir(), reason="needs ../shared/data (the real datasets of the record)")
def test_the_real_datasets_of_the_data_folder_are_the_pinned_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    from xaibench.plugins.manager import get_registry

    monkeypatch.setenv("XAIBENCH_DATA_DIR", str(SHARED))
    registry = get_registry()
    specs = {s.name: s for s in RecordSuite().tracks()}
    assert set(specs) == {t.spec.name for t in RECORD_TRACKS}  # every track found
    for row in RECORD_TRACKS:
        if row.real:
            spec = specs[row.spec.name]
            dataset = registry.create("dataset", spec.dataset, **spec.dataset_params)
            assert (dataset.revision, len(dataset)) == (REVISIONS[spec.name].revision, REVISIONS[spec.name].samples)


def test_missing_work_is_every_track_but_those_the_submission_holds(tmp_path: Path) -> None:
    tracks = ["shapes", "photos"]
    assert missing_work(tmp_path, "gradient", tracks) == tracks
    base = {"schema": "xaibench.submission/2", "explainer": {"name": "gradient"}, "run": {"limit": None}}
    (tmp_path / "gradient.json").write_text(
        json.dumps({**base, "suite": RECORD_SUITE, "seed": 0, "tracks": {"shapes": {}}})
    )
    assert missing_work(tmp_path, "gradient", tracks) == ["photos"]
    assert missing_work(tmp_path, "gradient", tracks, limit=8) == tracks  # another sample limit: all again
    (tmp_path / "gradient.json").write_text(
        json.dumps({**base, "suite": "default", "seed": 0, "tracks": {"shapes": {}}})
    )
    assert missing_work(tmp_path, "gradient", tracks) == tracks  # another suite's file: all again
    (tmp_path / "gradient.json").write_text(
        json.dumps(
            {
                **base,
                "explainer": {"name": "gradient", "version": "1.0.0"},
                "suite": RECORD_SUITE,
                "seed": 0,
                "tracks": {"shapes": {}},
            }
        )
    )
    assert missing_work(tmp_path, "gradient", tracks, version="1.0.0") == ["photos"]
    assert missing_work(tmp_path, "gradient", tracks, version="1.1.0") == tracks  # another explainer version: all


def test_missing_work_recomputes_a_track_whose_pin_changed_and_keeps_the_others(tmp_path: Path) -> None:
    def held(revision: str, n: int) -> dict:
        return {"provenance": {"dataset": {"revision": revision}, "n_samples": n}}

    base = {"schema": "xaibench.submission/2", "explainer": {"name": "gradient"}, "run": {"limit": None}}
    tracks = {"shapes": held("aaaa", 256), "mechanism-confined": held("bbbb", 64)}
    (tmp_path / "gradient.json").write_text(json.dumps({**base, "suite": RECORD_SUITE, "seed": 0, "tracks": tracks}))
    names = ["shapes", "mechanism-confined", "photos"]
    assert missing_work(tmp_path, "gradient", names) == ["photos"]  # without pins: presence only
    pins = {"shapes": Pinned("aaaa", 256), "mechanism-confined": Pinned("cccc", 256)}
    assert missing_work(tmp_path, "gradient", names, pins=pins) == ["mechanism-confined", "photos"]
    pins["mechanism-confined"] = Pinned("bbbb", 256)  # the same revision, another sample count
    assert missing_work(tmp_path, "gradient", names, pins=pins) == ["mechanism-confined", "photos"]
    pins["mechanism-confined"] = Pinned("bbbb", 64)
    assert missing_work(tmp_path, "gradient", names, pins=pins) == ["photos"]


def build_command(root: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "xaibench",
        "record",
        "build",
        "-e",
        "gradient,random",
        "--track",
        "shapes",
        "--limit",
        "8",
        "--root",
        str(root / "record"),
        "--quiet",
    ]


def stripped(value: Any) -> Any:
    """``value`` without the fields that say when or how long (:data:`TIMING`)."""
    if isinstance(value, dict):
        return {k: stripped(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [stripped(v) for v in value]
    return value


def outcome(root: Path) -> tuple[Any, dict[str, Any]]:
    """The records (values, n/a reasons, keys) and the submissions of a build in ``root``."""
    paths = record_paths(RECORD_SUITE, root / "record")
    frame = records(paths.workdir)
    columns = ["track", "explainer", "metric", "sample_id", "value", "na_reason"]
    rows = frame[columns].sort_values(columns[:4]).astype(str).values.tolist()
    subs = {p.name: stripped(json.loads(p.read_text())) for p in sorted(paths.submissions.glob("*.json"))}
    for data in subs.values():
        data.pop("environment", None)  # the same machine; its thread count and device are as given
    return rows, subs


@pytest.mark.slow
def test_a_killed_build_resumes_to_the_records_and_values_of_an_uninterrupted_one(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    whole = tmp_path / "whole"
    subprocess.run(build_command(whole), env=env, check=True, capture_output=True, timeout=900, cwd=tmp_path)
    killed = tmp_path / "killed"
    journal = record_paths(RECORD_SUITE, killed / "record").workdir / "results" / "shapes.jsonl"
    proc = subprocess.Popen(
        build_command(killed),
        env=env,
        start_new_session=True,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:  # kill once some records are written
        if journal.exists() and journal.stat().st_size > 2000:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the build ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = sorted(p.name for p in (killed / "record" / RECORD_SUITE / "submissions").glob("*.json"))
    assert done_before != ["gradient.json", "random.json"], "killed too late to test a resume"
    second = subprocess.run(
        build_command(killed), env=env, check=True, capture_output=True, text=True, timeout=900, cwd=tmp_path
    )
    assert "to compute" in second.stdout
    assert outcome(killed) == outcome(whole)
    for name in ("gradient", "random"):  # every map's cost survived the kill: stored beside it in the cache
        track = json.loads((killed / "record" / RECORD_SUITE / "submissions" / f"{name}.json").read_text())
        assert track["tracks"]["shapes"]["cost"]["measured"] == 8, name
    third = subprocess.run(
        build_command(killed), env=env, check=True, capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert "2 complete, 0 to compute" in third.stdout  # nothing left: nothing runs


def test_bad_record_options_are_one_line_and_write_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from xaibench.cli import cli

    for name in list(os.environ):
        if name.startswith("XAIBENCH_DATA"):
            monkeypatch.delenv(name)
    root = tmp_path / "record"
    # the command raises XaibenchError, which xaibench's entry point prints as one "error: ..." line
    unknown = CliRunner().invoke(cli, ["record", "build", "--track", "nope", "--root", str(root)])
    assert isinstance(unknown.exception, XaibenchError)
    assert str(unknown.exception) == "record-v1 has no track 'nope'; it has " + ", ".join(
        t.spec.name for t in RECORD_TRACKS
    )
    absent = CliRunner().invoke(cli, ["record", "build", "--root", str(root)])
    assert isinstance(absent.exception, XaibenchError) and str(absent.exception) == (
        "the record of record-v1 needs the data of human-attention, voc2012-seg, oxford-pets, coco: "
        "pass --data-dir (docs/datasets.md)"
    )
    assert not root.exists() and not (tmp_path / ".xaibench").exists()
