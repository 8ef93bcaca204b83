"""Suites as TOML files (issue 15, item 1): `xaibench run --suite FILE.toml` runs the file's
tracks; a bad file is one line naming the file and the key."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_adhoc_tracks import assert_scored, checkpoint, make_folder, records, run_cli

from xaibench.errors import XaibenchError
from xaibench.suites.suite_file import is_suite_file, load_suite_file

__all__ = ["checkpoint"]  # the session fixture, imported for the end-to-end test

TWO_TRACKS = """
name = "mine"
description = "ResNet-18 on my folders"

[[tracks]]
model = "timm:resnet18"
dataset = "folder:{suite_dir}/cats"
model_params = { checkpoint = "CHECKPOINT" }
metrics = ["iou", "deletion"]
metric_params = { deletion = { steps = 5 } }
limit = 2

[[tracks]]
name = "dogs-by-label"
model = "timm"
model_params = { arch = "resnet18", checkpoint = "CHECKPOINT" }
dataset = "folder"
dataset_params = { root = "{suite_dir}/dogs" }
metrics = ["iou", "deletion"]
limit = 3
target = "label"
"""


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_two_track_suite_file_runs(tmp_path: Path, checkpoint: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_folder(tmp_path / "cats")
    make_folder(tmp_path / "dogs", n=4)
    suite = write(tmp_path / "mine.toml", TWO_TRACKS.replace("CHECKPOINT", str(checkpoint)))
    code, output = run_cli(capsys, tmp_path, "-e", "gradient", "--suite", suite)
    assert code == 0, output
    assert_scored(records(tmp_path / "work", "resnet18-on-cats"), {"s0", "s1"})  # limit = 2
    assert_scored(records(tmp_path / "work", "dogs-by-label"), {"s0", "s1", "s2"})  # limit = 3
    summary = json.loads((tmp_path / "work" / "summary.json").read_text())
    assert summary["run"]["suite"] == "mine"
    dogs = summary["tracks"]["dogs-by-label"]
    assert dogs["provenance"]["target"] == "label"
    assert dogs["provenance"]["dataset"]["params"] == {"root": str(tmp_path / "dogs")}
    assert (
        dogs["explainers"]["gradient"]["metrics"]["deletion"]["params"]
        != (summary["tracks"]["resnet18-on-cats"]["explainers"]["gradient"]["metrics"]["deletion"]["params"])
    )  # metric_params reach the first track only


def test_a_suite_file_is_read_into_tracks(tmp_path: Path, registry: object) -> None:
    suite = load_suite_file(write(tmp_path / "s.toml", TWO_TRACKS.replace("CHECKPOINT", "w.pth")))
    assert (suite.name, suite.description) == ("mine", "ResNet-18 on my folders")
    first, second = suite.tracks
    assert (first.name, first.model, dict(first.model_params)) == (
        "resnet18-on-cats",
        "timm",
        {"arch": "resnet18", "checkpoint": "w.pth"},
    )
    assert dict(first.dataset_params) == {"root": f"{tmp_path}/cats"}  # {suite_dir}: the file's folder
    assert (first.metrics, dict(first.metric_params), first.limit) == (
        ("iou", "deletion"),
        {"deletion": {"steps": 5}},
        2,
    )
    assert (second.name, second.target, second.limit, dict(second.dataset_params)) == (
        "dogs-by-label",
        "label",
        3,
        {"root": f"{tmp_path}/dogs"},
    )
    unnamed = load_suite_file(write(tmp_path / "plain.toml", '[[tracks]]\nmodel = "timm:a"\ndataset = "folder:b"\n'))
    assert (unnamed.name, unnamed.tracks[0].metrics, unnamed.tracks[0].target) == ("plain", ("default",), "predicted")
    assert is_suite_file("x/y.TOML") and not is_suite_file("default")


TRACK = '[[tracks]]\nmodel = "timm:resnet18"\ndataset = "folder:x"\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name = x\n", "invalid TOML"),
        ('name = "x"\n', "tracks: missing"),
        ('tracks = "x"\n', "tracks: must be a non-empty list"),
        ('suite = "x"\n' + TRACK, "suite: unknown key; known keys: name, description, tracks"),
        (TRACK + "limt = 3\n", "tracks[1].limt: unknown key"),
        (TRACK + "limit = 0\n", "tracks[1].limit: must be a positive integer, got 0"),
        (TRACK + 'target = "gold"\n', "tracks[1].target: must be one of predicted, label"),
        (TRACK + 'metrics = ["iuo"]\n', "tracks[1].metrics: unknown metric 'iuo'; did you mean 'iou', 'irof'?"),
        (TRACK + 'metrics = ["family:alignmnt"]\n', "tracks[1].metrics: 'family:alignmnt': no such metric family"),
        (TRACK + "metric_params = { iou = 3 }\n", "tracks[1].metric_params.iou: must be a table"),
        (TRACK + 'model_params = "x"\n', "tracks[1].model_params: must be a table"),
        ('[[tracks]]\ndataset = "folder:x"\n', "tracks[1].model: missing"),
        ('[[tracks]]\nmodel = "timm:a"\ndataset = "fold:x"\n', "tracks[1]: unknown dataset 'fold'"),
        (TRACK + TRACK, "tracks[2].name: track name 'resnet18-on-x' is also tracks[1]'s"),
    ],
)
def test_a_bad_suite_file_is_one_line_naming_the_file_and_the_key(
    tmp_path: Path, registry: object, text: str, message: str
) -> None:
    path = write(tmp_path / "bad.toml", text)
    with pytest.raises(XaibenchError) as info:
        load_suite_file(path)
    line = str(info.value)
    assert "\n" not in line
    assert line.startswith(f"{path}: ") and message in line, line


def test_the_cli_reports_a_bad_or_missing_suite_file_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write(tmp_path / "bad.toml", TRACK + "limt = 3\n")
    code, output = run_cli(capsys, tmp_path, "-e", "gradient", "--suite", bad)
    assert code == 1 and "Traceback" not in output
    known = "name, model, dataset, model_params, dataset_params, metrics, metric_params, limit, target, description"
    assert output.strip().splitlines()[-1] == f"error: {bad}: tracks[1].limt: unknown key; known keys: {known}"
    code, output = run_cli(capsys, tmp_path, "-e", "gradient", "--suite", tmp_path / "none.toml")
    assert code == 1 and re.search(r"none\.toml: suite file not found$", output.strip()), output


def test_the_suite_file_in_the_docs_is_valid(tmp_path: Path, registry: object) -> None:
    doc = Path(__file__).resolve().parents[1] / "docs" / "suites.md"
    blocks = re.findall(r"```toml\n(.*?)```", doc.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) == 1, "docs/suites.md should show one suite file"
    suite = load_suite_file(write(tmp_path / "my-pets.toml", blocks[0]))
    assert suite.name == "my-pets"
    assert [t.name for t in suite.tracks] == ["resnet18-on-cats", "pets-hf-test"]
    assert suite.tracks[1].dataset_params["path"] == f"{tmp_path}/pets-imagefolder"
