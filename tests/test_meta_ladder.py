"""DESIGN 9's graded-oracle ladder: alignment metrics that tell the ground truth from noise are
valid; a planted metric that ignores the map is invalid. End to end through ``xaibench.meta``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xaibench
from xaibench import hookimpl
from xaibench.api import Metric, MetricInput, MetricOutput
from xaibench.metaeval.ladder import LEVELS, ladder_validity
from xaibench.plugins import manager


def _levels(per_level: dict[float, list[float]]) -> dict[float, dict[str, float | None]]:
    return {a: {f"s{i}": v for i, v in enumerate(values)} for a, values in per_level.items()}


def test_a_metric_that_worsens_along_the_ladder_is_valid_and_one_that_ignores_it_invalid() -> None:
    rng = np.random.default_rng(0)
    noise = rng.random(20) * 0.05
    honest = _levels({a: list(1 - a + noise) for a in LEVELS})
    v = ladder_validity(honest, "higher", seed=0, track="t", metric="m")
    assert (v.verdict, v.test, v.figure) == ("valid", "ladder", "m(0) - m(1)")
    assert v.value == pytest.approx(1.0) and v.ci_low == pytest.approx(1.0) and v.details["spearman"] == 1.0
    errors = _levels({a: list(a + noise) for a in LEVELS})  # an error: lower is better
    assert ladder_validity(errors, "lower", seed=0, track="t", metric="e").verdict == "valid"
    assert ladder_validity(errors, "higher", seed=0, track="t", metric="e").verdict == "invalid"  # reversed
    constant = _levels({a: [0.5] * 20 for a in LEVELS})
    flat = ladder_validity(constant, "higher", seed=0, track="t", metric="c")
    assert flat.verdict == "invalid" and (flat.ci_low, flat.ci_high) == (0.0, 0.0)
    bumpy = _levels({a: list((1 - a) + (0.5 if a == 0.6 else 0.0) + noise) for a in LEVELS})
    rises = ladder_validity(bumpy, "higher", seed=0, track="t", metric="b")
    assert rises.verdict == "invalid" and rises.details["rises"] == [[0.4, 0.6]]
    few = ladder_validity({0.0: {"a": 1.0}, 1.0: {"a": 0.0}}, "higher", seed=0, track="t", metric="f")
    assert few.verdict == "untested" and "too few samples" in few.details["reason"]


class MapBlind(Metric):
    """A planted broken alignment metric: its value depends on the sample, never on the map."""

    name = "map_blind"
    version = "1.0.0"
    family = "alignment"
    direction = "higher"
    ranking = True  # it would count in the alignment rank, were it not found invalid
    licence = "test"

    def score(self, batch: MetricInput) -> MetricOutput:
        values = np.array([len(s.id) % 7 / 7 for s in batch.samples], dtype=float)
        return MetricOutput(values=values, reasons=[None] * len(values))


class Plugin:
    @hookimpl
    def register_metrics(self, register: Any) -> None:
        register(MapBlind)


def test_meta_on_shapes_finds_the_alignment_metrics_valid_and_the_planted_one_invalid(
    tmp_path: Path, registry: manager.Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XAIBENCH_CACHE", str(tmp_path / "cache"))
    registry.add_plugin(Plugin(), name="planted")
    metrics = ["iou", "mae", "mass_accuracy", "pointing_game", "map_blind"]
    result = xaibench.meta(
        ["random", "center", "gradient", "oracle"],
        suite="default",
        tracks="shapes",
        metrics=metrics,
        limit=12,
        output_path=tmp_path / "out",
        progress=False,
    )
    cards = result.tracks["shapes"].cards
    assert {m: cards[m].validity.verdict for m in metrics} == {
        "iou": "valid",
        "mae": "valid",
        "mass_accuracy": "valid",
        "pointing_game": "valid",
        "map_blind": "invalid",
    }
    assert cards["iou"].stability.explainers == 3  # the reference explainer (oracle) is not ranked
    data = json.loads(result.json_path.read_text())
    assert data["provenance"]["submissions"].keys() == {"center.json", "gradient.json", "oracle.json", "random.json"}
    assert data["provenance"]["records"].keys() == {"shapes.jsonl"}
    site = tmp_path / "out" / "leaderboard" / "site" / "metrics.html"  # meta republishes the run's board
    assert 'id="card-shapes-map_blind"' in site.read_text()
    frame = xaibench.results.meta(result.csv_path.parent)
    row = frame[(frame["metric"] == "map_blind") & (frame["test"] == "ladder")].iloc[0]
    assert row["verdict"].startswith("invalid") and row["ci_low"] <= 0 <= row["ci_high"]
    # the ladder is never published, and a second meta reuses every record (nothing to recompute)
    assert not (tmp_path / "out" / "submissions" / "ladder.json").exists()
    summary = json.loads((tmp_path / "out" / ".xaibench" / "summary.json").read_text())
    assert "gradient" in summary["tracks"]["shapes"]["explainers"]  # the assessed run's, not the ladder's
    assert not xaibench.results.records(tmp_path / "out" / ".xaibench")["explainer"].eq("ladder").any()
    again = xaibench.meta(
        ["random", "center", "gradient", "oracle"],
        suite="default",
        tracks="shapes",
        metrics=metrics,
        limit=12,
        output_path=tmp_path / "out",
        progress=False,
    )
    assert again.run is not None
    explained = again.run.summary["tracks"]["shapes"]["explainers"]["gradient"]["explained"]
    assert explained["computed"] == 0
    assert json.loads(again.json_path.read_text())["tracks"] == data["tracks"]
