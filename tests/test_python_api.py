"""``xaibench.run(...)``: the command ``xaibench run`` as a function, returning DataFrames.

The suite path is checked against the command line value for value; the ad-hoc path on a folder
of images with masks and a timm checkpoint with random weights, offline; every bad argument fails
before any work with one line naming the argument.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from PIL import Image

import xaibench
from xaibench.cli import cli
from xaibench.errors import XaibenchError
from xaibench.results import LEADERBOARD_COLUMNS, RECORD_COLUMNS, leaderboard

METRICS = ["iou", "pointing_game"]
SMALL: dict[str, Any] = {"tracks": "shapes", "metrics": METRICS, "limit": 4, "progress": False, "site": False}


def _dirs(root: Path) -> dict[str, Path]:
    return {"workdir": root / "work", "submissions": root / "sub", "leaderboard_dir": root / "lb"}


def test_import_xaibench_stays_light_and_exposes_run_and_results_lazily() -> None:
    code = (
        "import sys, xaibench\n"
        "heavy = [m for m in ('torch', 'pandas', 'sklearn', 'xaibench.python_api', 'xaibench.results') "
        "if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "from xaibench import hookimpl, run, results\n"
        "assert run is xaibench.run and results is xaibench.results\n"
        "assert callable(run) and callable(results.records) and callable(results.leaderboard)\n"
        "assert {'run', 'results', 'hookimpl'} <= set(dir(xaibench))\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = xaibench.nope  # type: ignore[attr-defined]


def test_run_mirrors_the_cli_and_returns_frames(tmp_path: Path, registry: Any) -> None:
    res = xaibench.run(["random", "oracle"], **SMALL, **_dirs(tmp_path / "api"))

    assert res.tracks == ["shapes"] and res.failed == {}
    assert res.summary["run"]["suite"] == "default" and res.summary["run"]["limit"] == 4
    assert (tmp_path / "api" / "work" / "summary.json").is_file()
    assert sorted(p.name for p in res.submission_files) == ["oracle.json", "random.json"]
    assert all(p.is_file() for p in res.submission_files + res.leaderboard_files)
    assert res.site_dir is None and "RunResults(suite='default'" in repr(res)

    records = res.records
    assert list(records.columns) == list(RECORD_COLUMNS)
    assert len(records) == 2 * len(METRICS) * 4  # explainers x metrics x samples
    assert set(records["explainer"]) == {"random", "oracle"} and set(records["metric"]) == set(METRICS)
    explainers = res.summary["tracks"]["shapes"]["explainers"]
    for row in records.itertuples():  # every value is the summary's per-sample value
        assert explainers[row.explainer]["metrics"][row.metric]["samples"][row.sample_id] == pytest.approx(row.value)
    means = records.groupby(["explainer", "metric"])["value"].mean()
    assert means["oracle", "iou"] == pytest.approx(1.0) and means["random", "iou"] < 0.5

    board = res.leaderboard
    assert board is not None and list(board.columns) == list(LEADERBOARD_COLUMNS)
    cell = board.set_index(["explainer", "metric"]).loc[("random", "iou")]
    assert cell["value"] == pytest.approx(explainers["random"]["metrics"]["iou"]["mean"])

    # The command line with the same options writes the same leaderboard, value for value.
    d = _dirs(tmp_path / "cli")
    args = ["run", "-e", "random,oracle", "--track", "shapes", "--limit", "4", "--quiet", "--device", "auto"]
    args += [a for m in METRICS for a in ("--metric", m)]
    args += ["--workdir", str(d["workdir"]), "--submissions", str(d["submissions"])]
    args += ["--leaderboard-dir", str(d["leaderboard_dir"])]
    result = CliRunner().invoke(cli, args, env={**os.environ, "COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    pd.testing.assert_frame_equal(board, leaderboard(d["leaderboard_dir"]))


def test_records_are_this_runs_only_and_publishing_can_be_skipped(tmp_path: Path, registry: Any) -> None:
    work = tmp_path / "work"
    first = xaibench.run("random", **SMALL, workdir=work, submissions=None, leaderboard_dir=None, seed=0)
    second = xaibench.run("random", **SMALL, workdir=work, submissions=None, leaderboard_dir=None, seed=1)
    assert first.submission_files == [] and first.leaderboard is None and second.leaderboard_dir is None
    assert not (tmp_path / "submissions").exists()
    everything = xaibench.results.records(work)
    assert sorted(everything["seed"].unique()) == [0, 1] and len(everything) == 2 * len(METRICS) * 4
    assert set(second.records["seed"]) == {1} and len(second.records) == len(METRICS) * 4
    assert set(first.records["seed"]) == {0}
    # The random explainer draws other maps with another seed: the frames differ where they should.
    assert not np.allclose(first.records["value"].to_numpy(), second.records["value"].to_numpy())


def _folder_with_masks(root: Path, n: int = 3) -> Path:
    rng = np.random.default_rng(0)
    (root / "images").mkdir(parents=True)
    (root / "masks").mkdir()
    for i in range(n):
        image = rng.integers(0, 255, (40, 48, 3), dtype=np.uint8)
        mask = np.zeros((40, 48), np.uint8)
        mask[10:30, 12 + i : 30 + i] = 255
        Image.fromarray(image).save(root / "images" / f"img{i}.png")
        Image.fromarray(mask).save(root / "masks" / f"img{i}.png")
    return root


def test_run_an_adhoc_track_from_a_timm_checkpoint_and_a_folder(tmp_path: Path, registry: Any) -> None:
    timm = pytest.importorskip("timm")
    import torch

    checkpoint = tmp_path / "resnet18-random.pth"
    torch.save(timm.create_model("resnet18", pretrained=False, num_classes=4).state_dict(), checkpoint)
    data = _folder_with_masks(tmp_path / "cats")
    res = xaibench.run(
        "gradient,random",
        model="timm:resnet18",
        model_params={"checkpoint": str(checkpoint), "num_classes": 4},
        dataset=f"folder:{data}",
        metrics="iou",
        progress=False,
        site=False,
        **_dirs(tmp_path),
    )
    assert res.failed == {} and res.tracks == ["resnet18-on-cats"]
    assert res.summary["run"]["suite"] == "adhoc"
    prov = res.summary["tracks"]["resnet18-on-cats"]["provenance"]
    assert prov["model"]["name"] == "timm" and prov["dataset"]["name"] == "folder" and prov["n_samples"] == 3
    records = res.records
    assert len(records) == 2 * 3 and set(records["sample_id"]) == {"img0", "img1", "img2"}
    assert records["value"].notna().all() and records["value"].between(0, 1).all()
    assert set(records["target_source"]) == {"predicted"}
    assert set(res.leaderboard["track"]) == {"resnet18-on-cats"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"explainers": "no-such-explainer"}, "no-such-explainer"),
        ({"params": {"gradient": {"x": 1}}}, "params['gradient']: explainer 'gradient' is not run"),
        ({"params": {"random": 3}}, "params['random']=3: expected a dict"),
        ({"limit": 0}, "limit=0: expected a positive integer"),
        ({"threads": 1.5}, "threads=1.5: expected a positive integer"),
        ({"seed": "0"}, "seed='0': expected an integer"),
        ({"timeout": -1}, "timeout=-1: expected seconds"),
        ({"executor": "threads"}, "executor='threads': expected one of local, ray, inprocess"),
        ({"device": "gpu"}, "device='gpu': expected auto, cpu"),
        ({"model": "timm:resnet18"}, "dataset= is missing"),
        ({"suite": "default", "model": "timm:resnet18", "dataset": "folder:x"}, "give one or the other"),
        ({"model_params": {"a": 1}}, "model_params, dataset_params, target and track_name need model= and dataset="),
        ({"target": "label"}, "target and track_name need model= and dataset="),
        ({"suite": "no-such-suite"}, "no-such-suite"),
        ({"suite": "missing.toml"}, "suite file not found"),
        ({"submissions": None}, "leaderboard_dir needs submissions"),
        ({"data_dir": "/no/such/folder"}, "data_dir='/no/such/folder': no such folder"),
    ],
)
def test_bad_arguments_fail_with_one_line_before_any_work(
    tmp_path: Path, registry: Any, kwargs: dict[str, Any], message: str
) -> None:
    call: dict[str, Any] = {"explainers": "random", **SMALL, **_dirs(tmp_path), **kwargs}
    if {"suite", "model", "model_params", "target"} & set(kwargs):
        call.pop("tracks")
    with pytest.raises(XaibenchError, match=None) as info:
        xaibench.run(**call)
    text = str(info.value)
    assert message in text and "\n" not in text
    assert not (tmp_path / "work").exists(), "a bad argument must fail before the run starts"


def test_an_output_folder_that_is_a_file_is_named(tmp_path: Path, registry: Any) -> None:
    (tmp_path / "sub").write_text("not a folder")
    with pytest.raises(XaibenchError, match=r"^submissions='.*sub': is a file, not a folder; pass a folder$"):
        xaibench.run("random", **SMALL, **_dirs(tmp_path))
    bad = tmp_path / "other"
    bad.mkdir()
    (bad / "x.json").write_text(json.dumps({"schema": "nope"}))
    with pytest.raises(XaibenchError, match=r"problems in submissions:\n.*x\.json:1:1: "):
        xaibench.run("random", **SMALL, workdir=tmp_path / "w", submissions=bad, leaderboard_dir=tmp_path / "lb")
    assert not (tmp_path / "w").exists()


def test_docs_list_every_argument_of_run() -> None:
    import inspect

    from xaibench.python_api import run

    text = (Path(__file__).resolve().parents[1] / "docs" / "python-api.md").read_text(encoding="utf-8")
    table = text[text.index("## `xaibench.run` arguments") : text.index("## Columns of `records(workdir)`")]
    missing = [name for name in inspect.signature(run).parameters if f"`{name}`" not in table]
    assert not missing, f"docs/python-api.md does not document the arguments {missing}"
