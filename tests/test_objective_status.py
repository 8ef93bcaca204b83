"""Issue 26, item 6: an objective that is not ranked on its track (an unvalidated PASTA checkpoint,
a metric ``xaibench meta`` finds invalid) shows its label and status in tune and select, in the
terminal, the CSV and the JSON; ``tune --submit`` refuses it in one line without the override."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from tests.test_tune import ShiftedPlugin
from xaibench.applications.objective import objective_status, read_meta
from xaibench.cli import main
from xaibench.errors import XaibenchError
from xaibench.plugins import manager

PROXY = {"label": "PASTA (proxy, technique-level labels)", "heldout_q1_spearman": -0.2143, "checkpoint": "proxy-v1"}


def test_the_status_follows_the_leaderboards_rules_and_a_meta_verdict(tmp_path: Path) -> None:
    perceptual = {"family": "perceptual", "direction": "higher", "ranking": True, "params": PROXY}
    proxy = objective_status("pasta_q1", "photos", perceptual)
    assert proxy.label == PROXY["label"] and not proxy.ranked
    assert proxy.status == "not ranked: proxy checkpoint, held-out Q1 technique-level Spearman -0.21 < 0.3"
    assert proxy.line("pasta_q1") == f"objective pasta_q1; label: {PROXY['label']}; {proxy.status}"
    validated = {**perceptual, "params": {**PROXY, "heldout_q1_spearman": 0.41}}
    assert objective_status("pasta_q1", "photos", validated).ranked
    assert objective_status("pasta_q1", "photos", {**perceptual, "params": {"label": "PASTA"}}).ranked
    iou = {"family": "alignment", "direction": "higher", "ranking": True, "params": {}}
    assert objective_status("iou", "shapes", iou).ranked and objective_status("iou", "shapes", iou).line("iou") is None
    reported = objective_status("sparseness", "shapes", {**iou, "family": "other", "ranking": False})
    assert reported.status == "not ranked: sparseness is reported, never ranked"
    card = {"verdict": "invalid", "validity": {"test": "ladder", "figure": "m(0) - m(1)", "value": -0.0123}}
    meta = {"schema": "xaibench.meta/1", "tracks": {"shapes": {"metrics": {"iou": card}}}}
    invalid = objective_status("iou", "shapes", iou, meta)
    assert invalid.status == "not ranked: invalid on this track (ladder: m(0) - m(1) = -0.0123)"
    assert objective_status("iou", "photos", iou, meta).ranked  # the verdict is the track's own
    path = tmp_path / "meta.json"
    path.write_text(json.dumps(meta))
    assert read_meta(path) == meta
    path.write_text("{}")
    with pytest.raises(XaibenchError, match=r"not a meta\.json of xaibench meta"):
        read_meta(path)


def _cli(args: list[Any], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


PROXY_STATUS = "not ranked: proxy checkpoint, held-out Q1 technique-level Spearman -0.21 < 0.3"
INVALID_STATUS = "not ranked: invalid on this track (ladder: m(0) - m(1) = 0)"


@pytest.mark.parametrize(
    ("objective", "label", "status"),
    [("iou", None, INVALID_STATUS), ("pasta_q1", PROXY["label"], PROXY_STATUS)],
    ids=["invalid-by-meta", "proxy-pasta"],
)
def test_tune_and_select_with_an_unranked_objective_say_so_and_tune_submit_refuses_it(
    tmp_path: Path,
    registry: manager.Registry,
    capsys: pytest.CaptureFixture[str],
    objective: str,
    label: str | None,
    status: str,
) -> None:
    registry.add_plugin(ShiftedPlugin(), name="shifted")
    card = {"verdict": "invalid", "validity": {"test": "ladder", "figure": "m(0) - m(1)", "value": 0.0}}
    meta = tmp_path / "meta.json"
    meta.write_text(json.dumps({"schema": "xaibench.meta/1", "tracks": {"shapes": {"metrics": {"iou": card}}}}))
    common = ["--objective", objective, "--track", "shapes", "--limit", 6, "--quiet", "--timeout", 60]
    common += ["--workdir", tmp_path / "work", "--out", tmp_path / "out", "--meta", meta]
    subs, board = tmp_path / "subs", tmp_path / "board"
    submit = ["--submit", "--submissions", subs, "--leaderboard-dir", board]
    code, out, err = _cli(["tune", "-e", "shifted", "--grid", "shift=0,8", *common, *submit], capsys)
    shown = f"objective {objective}; " + (f"label: {label}; " if label else "") + status
    assert shown in " ".join(out.split())  # the terminal may wrap the line
    assert code == 1 and err.strip().splitlines() == [
        f"error: --submit: --objective {objective} is {status} on track shapes; "
        "pass --allow-unranked-objective to submit its best setting anyway"
    ]
    assert not subs.exists() or not list(subs.glob("*.json"))
    data = json.loads((tmp_path / "out" / f"tune-shifted-shapes-{objective}.json").read_text())
    assert (data["objective_status"], data["objective_label"]) == (status, label)
    with open(tmp_path / "out" / f"tune-shifted-shapes-{objective}.csv") as f:
        rows = {(row["objective_label"], row["objective_status"]) for row in csv.DictReader(f)}
    assert rows == {(label or "", status)}
    code, out, err = _cli(
        ["tune", "-e", "shifted", "--grid", "shift=0,8", *common, *submit, "--allow-unranked-objective"], capsys
    )
    assert code == 0, err
    assert len(list(subs.glob("shifted@*.json"))) == 1
    code, out, err = _cli(["select", "-e", "shifted", "--grid", "shift=0,8", *common], capsys)
    assert code == 0, err
    assert shown in " ".join(out.split())
    chosen = json.loads((tmp_path / "out" / f"select-shapes-{objective}.json").read_text())
    assert (chosen["objective_status"], chosen["objective_label"]) == (status, label)
