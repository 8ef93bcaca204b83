"""DESIGN 9's human ceiling on human-attention: each measured human map kind scored as the
explanation against each other kind as the ground truth, through the runner's scoring; explainers
as a fraction of it. Needs the shared real-data fixture (skips with the reason without it)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from xaibench.api import MetricInput
from xaibench.metaeval.ceiling import MEASURED, Ceiling, fractions, human_ceiling
from xaibench.plugins import manager

SHARED = Path(os.environ.get("XAIBENCH_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
ROOT = SHARED / "human-attention-25"


def test_fractions_are_value_over_ceiling_or_its_inverse_for_errors() -> None:
    ceiling = Ceiling(0.5, {}, 10)
    assert fractions(ceiling, "higher", [("a", 0.25), ("b", None), ("c", 0.5)]) == {"a": 0.5, "c": 1.0}
    assert fractions(ceiling, "lower", [("a", 1.0), ("z", 0.0)]) == {"a": 0.5}  # a zero error has no fraction


def test_the_ceiling_is_the_mean_over_ordered_pairs_of_measured_kinds(
    registry: manager.Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not ROOT.is_dir():
        pytest.skip(f"shared real-data fixture {ROOT} is absent (set XAIBENCH_SHARED_DATA)")
    monkeypatch.setenv("XAIBENCH_DATA_DIR", str(SHARED))
    result = human_ceiling(registry, ["iou", "mae", "pointing_game"], limit=3)
    assert len(MEASURED) == 6 and "humanPC" not in MEASURED
    for name, ceiling in result.items():
        assert len(ceiling.pairs) == 30 and ceiling.n == 3, name
        assert ceiling.value == pytest.approx(np.mean(list(ceiling.pairs.values())))
    assert 0 < result["iou"].value < 1 and 0 <= result["pointing_game"].value <= 1
    # one pair by hand: objFIX maps scored against salFIX ground truth by the metric itself
    objfix = list(registry.create("dataset", "human-attention", map_kind="objFIX").samples(3))
    salfix = list(registry.create("dataset", "human-attention", map_kind="salFIX").samples(3))
    metric = registry.create("metric", "iou")
    maps = np.stack([s.ground_truth.multilevel() for s in objfix])
    batch = MetricInput(saliency=maps, concepts=None, samples=salfix, targets=np.zeros(3, dtype=np.int64))
    by_hand = float(np.nanmean(metric.score(batch).values))
    assert result["iou"].pairs["objFIX->salFIX"] == pytest.approx(by_hand, abs=1e-9)
