"""Selectors end to end (issue 24, items 2 and 3): ``--metric family:alignment`` on the command line
and ``metrics="family:alignment"`` in the API run the family; an ad-hoc track and a suite-file
track without metrics run the ``default`` set, with the alignment metrics only where the samples
have masks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xaibench
from tests.test_adhoc_tracks import make_folder, records
from xaibench.errors import XaibenchError
from xaibench.suites.metric_selection import select_metrics

ALIGNMENT_RANKING = {"iou", "mae", "mass_accuracy", "pointing_game"}
DEFAULT_WITHOUT_MASKS = {"deletion", "insertion", "model_randomisation"}


def _dirs(root: Path) -> dict[str, Path]:
    return {"workdir": root / "work", "submissions": root / "sub", "leaderboard_dir": root / "lb"}


def _alignment(registry: Any) -> set[str]:
    names = set(select_metrics(registry, ["family:alignment"]))
    assert len(names) == 29 and names >= ALIGNMENT_RANKING  # the 29 bundled alignment metrics
    return names


def test_cli_family_selector_runs_only_that_family(tmp_path: Path, registry: Any) -> None:
    dirs = _dirs(tmp_path)
    args = [sys.executable, "-m", "xaibench.cli", "run", "-q", "-e", "gradient", "--track", "shapes"]
    args += ["--metric", "family:alignment", "--limit", "4"]
    for option, path in (("--workdir", "workdir"), ("--submissions", "submissions")):
        args += [option, str(dirs[path])]
    args += ["--leaderboard-dir", str(dirs["leaderboard_dir"])]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = records(dirs["workdir"], "shapes")
    assert {r["metric"] for r in rows} == _alignment(registry)
    assert len(rows) == 29 * 4


def test_api_family_selector_runs_only_that_family(tmp_path: Path, registry: Any) -> None:
    res = xaibench.run(
        "gradient", tracks="shapes", metrics="family:alignment", limit=4, progress=False, **_dirs(tmp_path)
    )
    assert res.failed == {}
    assert set(res.records["metric"]) == _alignment(registry) and len(res.records) == 29 * 4


def test_unknown_family_fails_before_any_work(tmp_path: Path, registry: Any) -> None:
    with pytest.raises(XaibenchError, match=r"'family:alignmnt': no such metric family; families: align"):
        xaibench.run("gradient", tracks="shapes", metrics="family:alignmnt", limit=4, progress=False, **_dirs(tmp_path))
    assert not (tmp_path / "work").exists()


def test_adhoc_track_without_metrics_runs_the_defaults(tmp_path: Path, registry: Any) -> None:
    pytest.importorskip("timm")
    data = make_folder(tmp_path / "cats", n=2)
    res = xaibench.run(
        "gradient",
        model="timm:resnet18",
        model_params={"pretrained": False},
        dataset=f"folder:{data}",
        progress=False,
        site=False,
        **_dirs(tmp_path),
    )
    assert res.failed == {}
    assert set(res.records["metric"]) == ALIGNMENT_RANKING | DEFAULT_WITHOUT_MASKS
    metrics = res.summary["tracks"]["resnet18-on-cats"]["explainers"]["gradient"]["metrics"]
    assert metrics["deletion"]["params"]["steps"] == 10 and metrics["insertion"]["params"]["steps"] == 10


def test_suite_file_tracks_without_metrics_run_the_defaults_alignment_only_with_masks(
    tmp_path: Path, registry: Any
) -> None:
    pytest.importorskip("timm")
    make_folder(tmp_path / "cats", n=2)
    bare = make_folder(tmp_path / "bare", n=2)
    for mask in (bare / "masks").iterdir():
        mask.unlink()
    (bare / "masks").rmdir()
    suite = tmp_path / "suite.toml"
    track = '[[tracks]]\nmodel = "timm:resnet18"\nmodel_params = {{ pretrained = false }}\n'
    track += 'dataset = "folder:{{suite_dir}}/{}"\n'
    suite.write_text(track.format("cats") + track.format("bare"), encoding="utf-8")
    res = xaibench.run("gradient", suite=str(suite), progress=False, site=False, **_dirs(tmp_path))
    assert res.failed == {}
    by_track = res.records.groupby("track")["metric"].apply(set).to_dict()
    assert by_track == {
        "resnet18-on-cats": ALIGNMENT_RANKING | DEFAULT_WITHOUT_MASKS,
        "resnet18-on-bare": DEFAULT_WITHOUT_MASKS,
    }
    summary = json.loads((tmp_path / "work" / "summary.json").read_text())
    assert set(summary["tracks"]["resnet18-on-bare"]["explainers"]["gradient"]["metrics"]) == DEFAULT_WITHOUT_MASKS


def test_score_takes_selectors_too(tmp_path: Path, capsys: pytest.CaptureFixture[str], registry: Any) -> None:
    from tests.test_score_cli import _folder, _score

    masks = _folder(tmp_path / "data")
    (tmp_path / "maps").mkdir()
    for sid, mask in masks.items():
        np.save(tmp_path / "maps" / f"{sid}.npy", mask.astype(np.float32))
    args = ["--dataset", str(tmp_path / "data"), "--explanations", str(tmp_path / "maps"), "--json"]
    code, out, err = _score(capsys, *args, "--metric", "family:alignment")
    assert code == 0, err
    assert set(json.loads(out)["metrics"]) == _alignment(registry)
    code, out, err = _score(capsys, *args, "--metric", "family:alignmnt")
    assert code != 0 and "'family:alignmnt': no such metric family" in err
