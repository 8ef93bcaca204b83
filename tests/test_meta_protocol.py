"""Protocol sensitivity (DESIGN 9): a metric's documented settings, the Kendall tau of each
setting's ranking against the default's, and the cherry-pick count; end to end, the settings run
through the runner into ``<workdir>/meta`` from the run's cache and land in meta.json, meta.csv
and the metrics page."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

import xaibench
from xaibench.cli import main
from xaibench.metaeval.protocol import (
    MAX_SETTINGS,
    NO_SETTINGS,
    protocol_sensitivity,
    protocol_settings,
    setting_label,
)
from xaibench.metaeval.protocol_runs import _accepted
from xaibench.metrics.faithfulness.curves import Deletion
from xaibench.metrics.faithfulness.stepwise import PixelFlipping
from xaibench.params import Param
from xaibench.plugins import manager


class _Documented:
    param_specs: ClassVar[dict[str, Param]] = {
        "steps": Param(int, low=1),
        "baseline": Param(str, choices=("zeros", "blur", "mean")),
        "abs": Param(bool),
        "noise": Param(float, low=0.0),  # not a documented setting: a free number
    }


def test_settings_change_one_documented_parameter_at_a_time() -> None:
    default = {"steps": 10, "baseline": "zeros", "abs": False, "noise": 0.1}
    assert protocol_settings(_Documented, default) == [
        {**default, "steps": 5},
        {**default, "steps": 20},
        {**default, "baseline": "blur"},
        {**default, "baseline": "mean"},
        {**default, "abs": True},
    ]
    # the real metrics: pixel flipping's steps, baseline and abs; deletion's steps only
    flipping = protocol_settings(PixelFlipping, dict(PixelFlipping.default_params))
    assert [setting_label(PixelFlipping.default_params, s) for s in flipping] == [
        "steps=50",
        "steps=200",
        "baseline=black",
        "abs=True",
    ]
    assert protocol_settings(Deletion, {"steps": 50}) == [{"steps": 25}, {"steps": 100}]


def test_settings_respect_bounds_the_cap_and_metrics_without_settings() -> None:
    assert protocol_settings({"steps": Param(int, low=1)}, {"steps": 1}) == [{"steps": 2}]  # half of 1 is 0 < low
    assert protocol_settings({"steps": Param(int, low=1, high=10)}, {"steps": 8}) == [{"steps": 4}]
    many = {"baseline": Param(str, choices=tuple(f"b{i}" for i in range(10)))}
    assert len(protocol_settings(many, {"baseline": "b0"})) == MAX_SETTINGS
    assert protocol_settings({"threshold": Param(float, low=0.0, high=1.0)}, {"threshold": 0.5}) == []
    assert protocol_settings(_Documented, {}) == []  # only parameters the metric has are varied


def test_a_setting_the_metric_refuses_is_left_out(registry: manager.Registry) -> None:
    default = dict(PixelFlipping.default_params)
    assert _accepted(registry, "pixel_flipping", {**default, "baseline": "black"})
    assert not _accepted(registry, "pixel_flipping", {**default, "baseline": "sky"})
    assert not _accepted(registry, "pixel_flipping", {**default, "steps": 0})


def test_sensitivity_against_hand_computed_taus_and_winners() -> None:
    # default means A 3, B 2, C 1 (higher is better): A > B > C
    default = np.array([[3.0, 3.0], [2.0, 2.0], [1.0, 1.0]])
    swapped = np.array([[2.0], [3.0], [1.0]])  # B > A > C: 1 discordant pair of 3, tau = (2 - 1) / 3
    reversed_ = np.array([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0], [3.0, 3.0, 3.0]])  # C > B > A: tau = -1
    p = protocol_sensitivity(default, {"s1": swapped, "s2": reversed_}, "higher", explainers=["A", "B", "C"])
    assert [s.tau for s in p.settings] == pytest.approx([1 / 3, -1.0])
    assert p.min_tau == pytest.approx(-1.0)
    assert p.mean_tau == pytest.approx((1 / 3 - 1) / 2)
    assert p.default_winners == ["A"]
    assert [s.winners for s in p.settings] == [["B"], ["C"]]
    assert p.cherry_pick == 3
    assert [s.n for s in p.settings] == [1, 3]
    # lower is better: every ranking flips, the taus stay, the winners change
    low = protocol_sensitivity(default, {"s1": swapped, "s2": reversed_}, "lower", explainers=["A", "B", "C"])
    assert [s.tau for s in low.settings] == pytest.approx([1 / 3, -1.0])
    assert low.default_winners == ["C"] and [s.winners for s in low.settings] == [["C"], ["A"]]
    assert low.cherry_pick == 2


def test_sensitivity_counts_ties_for_first_and_a_stable_metric_scores_one() -> None:
    default = np.array([[2.0], [1.0], [0.0]])
    same_order = np.array([[5.0], [4.0], [-1.0]])
    tie = np.array([[1.0], [1.0], [0.0]])  # A and B tied first; tau-b with the tie = 2 / sqrt(3 * 2)
    p = protocol_sensitivity(default, {"same": same_order, "tie": tie}, "higher", explainers=["A", "B", "C"])
    assert p.settings[0].tau == 1.0 and p.settings[1].tau == pytest.approx(2 / math.sqrt(6))
    assert p.settings[1].winners == ["A", "B"] and p.cherry_pick == 2
    stable = protocol_sensitivity(default, {"same": same_order}, "higher", explainers=["A", "B", "C"])
    assert (stable.min_tau, stable.mean_tau, stable.cherry_pick) == (1.0, 1.0, 1)
    none = protocol_sensitivity(default, {}, "higher")
    assert none.reason == NO_SETTINGS and none.cherry_pick is None and math.isnan(none.min_tau)
    with pytest.raises(ValueError, match="rows"):
        protocol_sensitivity(default, {"bad": np.zeros((2, 1))}, "higher")


def _winners(frame: Any) -> set[str]:
    """The explainers with the best mean in the metric's direction."""
    means = frame.groupby("explainer")["value"].mean()
    best = means.min() if frame["direction"].iloc[0] == "lower" else means.max()
    return set(means[means == best].index)


def test_meta_runs_each_setting_from_the_cache_and_reports_the_cherry_pick_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XAIBENCH_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "out"
    options: dict[str, Any] = {"suite": "default", "tracks": "shapes", "metrics": ["deletion", "iou"], "limit": 8}
    result = xaibench.meta(["gradient", "random", "center", "oracle"], output_path=out, progress=False, **options)
    card = result.tracks["shapes"].cards["deletion"]
    assert card.protocol is not None and [s.label for s in card.protocol.settings] == ["steps=25", "steps=100"]
    assert result.tracks["shapes"].cards["iou"].protocol.reason == NO_SETTINGS  # iou documents no settings
    # each setting ran into <workdir>/meta beside the others, for the run's explainers only (not the oracle)
    # and from the run's cached explanations
    meta_records = xaibench.results.records(out / ".xaibench" / "meta")
    deletion = meta_records[(meta_records["metric"] == "deletion") & (meta_records["track"] == "shapes")]
    steps = deletion["metric_params"].map(lambda p: p["steps"])
    assert sorted(set(steps)) == [25, 100]
    assert len(deletion) == 2 * 3 * 8 and set(deletion["explainer"]) == {"gradient", "random", "center"}
    summary = json.loads((out / ".xaibench" / "meta" / "summary.json").read_text())
    assert all(b["explained"]["computed"] == 0 for b in summary["tracks"]["shapes"]["explainers"].values())
    # the cherry-pick count is the number of distinct winners among the default and the settings
    main = xaibench.results.records(out / ".xaibench")
    main = main[(main["metric"] == "deletion") & (main["explainer"] != "oracle")]
    winners = _winners(main) | _winners(deletion[steps == 25]) | _winners(deletion[steps == 100])
    assert card.protocol.cherry_pick == len(winners)
    assert set(card.protocol.default_winners) == _winners(main)
    # meta.json, meta.csv and the metrics page carry the figures
    block = json.loads(result.json_path.read_text())["tracks"]["shapes"]["metrics"]["deletion"]["protocol"]
    assert block["cherry_pick"] == len(winners)
    assert [s["params"]["steps"] for s in block["settings"]] == [25, 100]
    assert block["min_tau"] == pytest.approx(card.protocol.min_tau)
    with open(result.csv_path) as f:
        rows = {r["figure"]: r for r in csv.DictReader(f) if r["metric"] == "deletion" and r["test"] == "protocol"}
    assert set(rows) == {"min_tau", "mean_tau", "cherry_pick_count"}
    assert int(rows["cherry_pick_count"]["value"]) == len(winners)
    assert float(rows["mean_tau"]["value"]) == pytest.approx(card.protocol.mean_tau)
    page = (out / "leaderboard" / "site" / "metrics.html").read_text()
    assert "cherry-pick" in page and "steps=25: tau" in page
    # protocol=False skips it: no protocol entry, nothing new run
    again = xaibench.meta(
        ["gradient", "random", "center", "oracle"], output_path=out, progress=False, protocol=False, **options
    )
    assert again.tracks["shapes"].cards["deletion"].protocol is None
    assert "protocol" not in json.loads(again.json_path.read_text())["tracks"]["shapes"]["metrics"]["deletion"]
    assert len(xaibench.results.records(out / ".xaibench" / "meta")) == len(meta_records)


SUITE = """
[[tracks]]
name = "tiny-shapes"
model = "shapes-cnn"
model_params = { variant = "shapes" }
dataset = "shapes"
metrics = ["deletion"]
metric_params = { deletion = { steps = 10 } }
limit = 8
"""


def test_the_command_line_reports_protocol_sensitivity_from_the_track_s_own_settings_and_skips_it_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XAIBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "250")
    suite = tmp_path / "tiny.toml"
    suite.write_text(SUITE)
    args = ["meta", "--suite", str(suite), "-e", "gradient,random", "--output-path", str(tmp_path / "out"), "-q"]

    def meta(*extra: str) -> tuple[str, dict[str, Any]]:
        try:
            main([*args, *extra])
        except SystemExit as exc:
            assert not exc.code, capsys.readouterr()
        text = " ".join(capsys.readouterr().out.split())
        return text, json.loads((tmp_path / "out" / "meta" / "meta.json").read_text())["tracks"]["tiny-shapes"]

    text, block = meta()
    protocol = block["metrics"]["deletion"]["protocol"]
    # the track's own steps = 10 is the default setting: half and double of it
    assert [s["params"]["steps"] for s in protocol["settings"]] == [5, 20]
    assert "cherry-pick" in text and "protocol min tau" in text
    text, block = meta("--no-protocol")
    assert "protocol" not in block["metrics"]["deletion"] and "cherry-pick" not in text
