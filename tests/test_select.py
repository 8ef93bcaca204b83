"""``xaibench select``: per-image choices and the gain over the best single setting."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from click.testing import CliRunner

from xaibench import hookimpl
from xaibench.api import Explainer
from xaibench.applications.select import select
from xaibench.applications.settings import Setting, SettingScores, candidate_settings
from xaibench.cli import cli
from xaibench.errors import XaibenchError
from xaibench.imaging import resize_bilinear
from xaibench.kit import Param
from xaibench.plugins import manager


class Parity(Explainer):
    """The ground-truth mask on samples whose index (``shapes-test-NNNN``) has parity ``which``,
    the mask moved half an image away elsewhere: per image, the right setting is known."""

    name = "parity"
    version = "1.0.0"
    licence = "test"
    needs = ("ground_truth",)
    reference_only = True  # it reads the answer: only a declared reference is given it (issue 42)
    default_params: ClassVar[dict[str, Any]] = {"which": "even"}
    param_specs: ClassVar[dict[str, Param]] = {"which": Param(str, choices=("even", "odd"))}

    def explain(self, model: Any, inputs: Any, targets: Any, *, seed: int = 0, context: Any = None) -> Any:
        size = tuple(inputs.shape[-2:])
        maps = []
        for s in context.samples:
            truth = resize_bilinear(s.ground_truth.multilevel(), size, antialias=False).astype(np.float32)
            right = (int(s.id.rsplit("-", 1)[1]) % 2 == 0) == (self.params["which"] == "even")
            maps.append((truth if right else np.roll(truth, size[-1] // 2, axis=-1)) + 1e-3)
        return np.stack(maps)


class ParityPlugin:
    @hookimpl
    def register_explainers(self, register: Any) -> None:
        register(Parity)


def _invoke(args: list[Any]) -> Any:
    return CliRunner().invoke(cli, [str(a) for a in args], env={**os.environ, "COLUMNS": "200"})


COMMON = ["--objective", "iou", "--track", "shapes", "--limit", 8, "--quiet", "--timeout", 60]


def test_select_picks_the_oracle_over_random(tmp_path: Path, registry: manager.Registry) -> None:
    out = tmp_path / "out"
    result = _invoke(["select", "-e", "random", "-e", "oracle", *COMMON, "--workdir", tmp_path / "w", "--out", out])
    assert result.exit_code == 0, result.output
    data = json.loads((out / "select-shapes-iou.json").read_text())
    assert data["settings"] == ["random", "oracle"] and data["n"] == 8
    assert data["counts"]["oracle"] >= 7  # the ground truth itself beats noise nearly everywhere
    assert data["best_single"]["setting"] == "oracle"
    # with one setting best nearly everywhere the per-image choice gains (almost) nothing over it
    assert 0.0 <= data["gain"]["value"] <= 0.05
    assert data["selected_mean"] == pytest.approx(data["best_single"]["mean"] + data["gain"]["value"])
    assert "gain over the best single setting (oracle)" in result.output


def test_select_finds_the_right_setting_per_image(tmp_path: Path, registry: manager.Registry) -> None:
    registry.add_plugin(ParityPlugin(), name="parity")
    out = tmp_path / "out"
    args = ["select", "-e", "parity", "--grid", "which=even,odd", *COMMON, "--workdir", tmp_path / "w", "--out", out]
    result = _invoke(args)
    assert result.exit_code == 0, result.output
    with (out / "select-shapes-iou.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 8 and list(rows[0]) == [
        "sample_id",
        "setting",
        "value",
        "parity(which=even)",
        "parity(which=odd)",
        "objective_label",
        "objective_status",
    ]
    assert {(row["objective_label"], row["objective_status"]) for row in rows} == {("", "")}  # iou: ranked
    for row in rows:
        even = int(row["sample_id"].rsplit("-", 1)[1]) % 2 == 0
        assert row["setting"] == ("parity(which=even)" if even else "parity(which=odd)"), row
    data = json.loads((out / "select-shapes-iou.json").read_text())
    # each single setting is right on half the images; the per-image choice on all of them
    assert data["selected_mean"] > 0.9
    assert data["gain"]["value"] > 0.3 and data["gain"]["ci_low"] > 0
    assert sorted(data["counts"].values()) == [4, 4]


def test_select_gain_is_signed_by_direction() -> None:
    settings = [Setting("a"), Setting("b")]
    values = {"a": {"s1": 1.0, "s2": 3.0, "s3": None}, "b": {"s1": 2.0, "s2": 2.0, "s3": 5.0}}
    params: dict[str, dict[str, Any]] = {"a": {}, "b": {}}
    lower = select(SettingScores("t", "mae", "lower", settings, values, {}, params, ["s1", "s2", "s3"]))
    assert [c.setting for c in lower.choices] == ["a", "b"] and lower.skipped == 1  # s3 lacks a value of a
    assert lower.means == {"a": 2.0, "b": 2.0} and lower.best_single == "a"  # a tie keeps the first
    assert lower.selected_mean == 1.5 and lower.gain == pytest.approx(0.5)  # lower is better: 2.0 - 1.5
    higher = select(SettingScores("t", "iou", "higher", settings, values, {}, params, ["s1", "s2", "s3"]))
    assert [c.setting for c in higher.choices] == ["b", "a"] and higher.gain == pytest.approx(0.5)


def test_candidate_settings_and_bad_input(tmp_path: Path, registry: manager.Registry) -> None:
    got = candidate_settings(["gradcam", "random"], ["gradcam.reshape=model,none"])
    assert [s.label for s in got] == ["gradcam(reshape=model)", "gradcam(reshape=none)", "random"]
    with pytest.raises(XaibenchError, match=r"EXPLAINER\.KEY"):
        candidate_settings(["gradcam", "random"], ["reshape=model"])
    one = _invoke(["select", "-e", "oracle", *COMMON, "--workdir", tmp_path / "w"])
    assert one.exit_code != 0 and "at least two settings" in one.output
