"""``xaibench tune``: the best setting of a grid is found where it is known by construction."""

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
from xaibench.applications.settings import Setting, SettingScores, expand_grid, parse_grid, run_settings
from xaibench.applications.tune import tune
from xaibench.cli import cli
from xaibench.errors import XaibenchError
from xaibench.imaging import resize_bilinear
from xaibench.kit import Param
from xaibench.plugins import manager
from xaibench.publish.submission import write_run
from xaibench.runner.run import RunConfig


class Shifted(Explainer):
    """The sample's ground-truth mask moved right by ``shift`` pixels (wrapping): shift 0 is the
    mask itself, so every alignment metric is best there, whatever the grid's order."""

    name = "shifted"
    version = "1.0.0"
    licence = "test"
    needs = ("ground_truth",)
    reference_only = True  # it reads the answer: only a declared reference is given it (issue 42)
    default_params: ClassVar[dict[str, Any]] = {"shift": 8}
    param_specs: ClassVar[dict[str, Param]] = {"shift": Param(int, low=-64, high=64)}

    def explain(self, model: Any, inputs: Any, targets: Any, *, seed: int = 0, context: Any = None) -> Any:
        size = tuple(inputs.shape[-2:])
        maps = [resize_bilinear(s.ground_truth.multilevel(), size, antialias=False) for s in context.samples]
        return np.roll(np.stack(maps).astype(np.float32), self.params["shift"], axis=-1) + 1e-3


class ShiftedPlugin:
    @hookimpl
    def register_explainers(self, register: Any) -> None:
        register(Shifted)


@pytest.fixture()
def shifted(registry: manager.Registry) -> manager.Registry:
    registry.add_plugin(ShiftedPlugin(), name="shifted")
    return registry


def _invoke(args: list[Any]) -> Any:
    return CliRunner().invoke(cli, [str(a) for a in args], env={**os.environ, "COLUMNS": "200"})


COMMON = ["--track", "shapes", "--limit", 6, "--quiet", "--timeout", 60]


@pytest.mark.parametrize("objective", ["iou", "mae"])  # higher and lower is better
def test_tune_finds_the_known_best_setting(tmp_path: Path, shifted: manager.Registry, objective: str) -> None:
    out = tmp_path / "out"
    args = ["tune", "-e", "shifted", "--grid", "shift=12,6,0,-6", "--objective", objective, *COMMON]
    result = _invoke([*args, "--workdir", tmp_path / "work", "--out", out])
    assert result.exit_code == 0, result.output
    assert "shifted(shift=0) *" in result.output  # the best is marked in the printed table
    for shift in (12, 6, -6):
        assert f"shifted(shift={shift})" in result.output
    data = json.loads((out / f"tune-shifted-shapes-{objective}.json").read_text())
    assert data["best"]["params"] == {"shift": 0}
    assert data["direction"] == ("higher" if objective == "iou" else "lower")
    rows = {r["setting"]: r for r in data["rows"]}
    assert [r["best"] for r in data["rows"]] == [False, False, True, False]
    best = rows["shifted(shift=0)"]
    assert best["delta"] == 0.0 and best["n"] == 6 and best["ci_low"] <= best["mean"] <= best["ci_high"]
    for label in ("shifted(shift=12)", "shifted(shift=6)"):  # clearly worse: the whole interval on the bad side
        row = rows[label]
        worse = row["delta_high"] < 0 if objective == "iou" else row["delta_low"] > 0
        assert worse, row
    with (out / f"tune-shifted-shapes-{objective}.csv").open() as handle:
        table = list(csv.DictReader(handle))
    assert [r["setting"] for r in table] == list(rows)
    assert json.loads(table[2]["params"]) == {"shift": 0} and table[2]["best"] == "True"
    # a second search recomputes nothing: the same numbers from the workdir's records
    again = _invoke([*args, "--workdir", tmp_path / "work", "--out", out])
    assert again.exit_code == 0, again.output
    assert json.loads((out / f"tune-shifted-shapes-{objective}.json").read_text())["rows"] == data["rows"]


def test_tune_is_direction_aware_and_keeps_the_first_of_a_tie() -> None:
    settings = [Setting("x", {"k": k}) for k in (1, 2, 3)]
    values = {
        "x(k=1)": {"a": 0.2, "b": 0.4},
        "x(k=2)": {"a": 0.1, "b": 0.1},
        "x(k=3)": {"a": 0.3, "b": 0.3},
    }
    params = {s.label: dict(s.params) for s in settings}
    higher = SettingScores("t", "m", "higher", settings, values, {}, params, ["a", "b"])
    lower = SettingScores("t", "m", "lower", settings, values, {}, params, ["a", "b"])
    assert tune(higher).best.label == "x(k=1)"  # 0.3 ties with k=3: the first listed wins
    assert tune(lower).best.label == "x(k=2)"
    row = next(r for r in tune(lower).rows if r.setting == "x(k=3)")
    assert row.delta == pytest.approx(0.2) and row.n == 2


def test_grid_parsing_and_expansion() -> None:
    grid = parse_grid(["kernel_width=0.1,0.25", "target_layer=layer3,blocks.5,layer3"])
    assert grid == {"kernel_width": [0.1, 0.25], "target_layer": ["layer3", "blocks.5"]}
    settings = expand_grid("lime", grid, {"n_samples": 32})
    assert len(settings) == 4
    assert settings[1].params == {"n_samples": 32, "kernel_width": 0.1, "target_layer": "blocks.5"}
    for bad, message in [
        (["kernel_width"], "expected KEY=V1,V2"),
        (["kernel_width="], "no values"),
        (["a=1", "a=2"], "given twice"),
    ]:
        with pytest.raises(XaibenchError, match=message):
            parse_grid(bad)
    with pytest.raises(XaibenchError, match="also a fixed --param"):
        expand_grid("lime", {"a": [1]}, {"a": 2})


def test_tune_bad_input_is_one_line(tmp_path: Path, shifted: manager.Registry) -> None:
    work = ["--workdir", tmp_path / "work"]
    bad_param = _invoke(["tune", "-e", "shifted", "--grid", "sigma=1,2", "--objective", "iou", *COMMON, *work])
    assert bad_param.exit_code != 0
    assert "unknown parameter(s) ['sigma']" in str(bad_param.exception) + bad_param.output
    bad_metric = _invoke(["tune", "-e", "shifted", "--grid", "shift=0,1", "--objective", "nope", *COMMON, *work])
    assert bad_metric.exit_code != 0 and "nope" in str(bad_metric.exception) + bad_metric.output


def test_the_chosen_setting_is_submitted_marked_tuned(tmp_path: Path, shifted: manager.Registry) -> None:
    config = RunConfig(
        explainers=[], tracks=["shapes"], metrics=["iou"], limit=6, workdir=tmp_path / "w", progress=False
    )
    result = run_settings([Setting("shifted", {"shift": 0})], config, shifted, tuned=True, keep_names=True)
    (path,) = write_run(result, shifted, tmp_path / "subs")
    submission = json.loads(path.read_text())
    assert submission["disclosure"]["tuned_on_benchmark"] is True
    assert submission["explainer"]["params"] == {"shift": 0}
    assert path.name.startswith("shifted@")  # not the default parameters: its own file
    untuned = run_settings([Setting("shifted", {"shift": 0})], config, shifted, keep_names=True)
    assert untuned.summary["tracks"]["shapes"]["explainers"]["shifted"]["explainer"]["tuned_on_benchmark"] is False
