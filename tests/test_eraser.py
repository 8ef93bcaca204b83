"""ERASER comprehensiveness and sufficiency on tokens (issue 46, DESIGN 12), as ferret-xai 0.4.2
defines them: the rationales by hand (k = int(v * n), top-k by score, positive scores only, a
repeated set skipped), the AOPC by hand, and both metrics on the planted-tokens model, whose
logits are known sums, against values computed by hand from those sums."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from xaibench.datasets.planted_tokens import planted_tokens
from xaibench.metrics.faithfulness import formulas as fm
from xaibench.plugins import manager
from xaibench.runner.run import RunConfig, run


def test_rationales_follow_ferrets_rules() -> None:
    scores = np.zeros(20)
    scores[[0, 1, 2, 3, 10]] = [0.9, 0.1, -0.5, 0.7, 0.3]
    # n = 20: k = 0 (skipped), 1, 2, 4, 10; at 10 only the same four positive tokens: skipped
    got = [r.tolist() for r in fm.eraser_rationales(scores)]
    assert got == [[0], [0, 3], [0, 3, 10, 1]]
    assert fm.eraser_rationales(-np.ones(50)) == []  # no positive score: nothing to average
    assert [r.tolist() for r in fm.eraser_rationales(np.arange(10.0), (0.1, 0.35))] == [[9], [9, 8, 7]]


def test_aopc_is_the_mean_drop_or_the_default() -> None:
    assert fm.aopc(0.9, [0.5, 0.7], empty=0.0) == pytest.approx(0.3)
    assert fm.aopc(0.9, [], empty=1.0) == 1.0


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


@pytest.mark.slow
def test_both_metrics_on_the_planted_model_equal_the_hand_values(registry: manager.Registry, tmp_path: Path) -> None:
    """Sample 1 (positive, logits [0, 6]: two strong words of 2, two weak of 1) explained by
    input x gradient, whose map is the exact contributions (2, 2, 1, 1, fillers 0). n = 32:
    k = 0, 1, 3, 6, 16; positive scores only, so the rationales are 1 strong word, 2 strong and
    1 weak, then all 4 (k = 16 repeats them: skipped)."""
    config = RunConfig(
        explainers=["input-x-gradient"],
        suite="text",
        tracks=["planted-tokens"],  # the IMDB tracks have tests of their own
        metrics=["eraser_comprehensiveness", "eraser_sufficiency"],
        limit=2,
        workdir=tmp_path / "work",
        examples=0,
    )
    run(config, registry)
    lines = (tmp_path / "work" / "results" / "planted-tokens.jsonl").read_text(encoding="utf-8").splitlines()
    found = {(r["metric"], r["sample_id"]): r for r in map(json.loads, lines)}
    assert planted_tokens(1)[2] == 1
    p0 = _sigmoid(6.0)
    comprehensiveness = np.mean([p0 - _sigmoid(4.0), p0 - _sigmoid(1.0), p0 - _sigmoid(0.0)])
    sufficiency = np.mean([p0 - _sigmoid(2.0), p0 - _sigmoid(5.0), p0 - p0])
    record = found["eraser_comprehensiveness", "planted-0001"]
    assert record["value"] == pytest.approx(comprehensiveness, abs=1e-6)
    assert record["curve"]["sizes"] == [1, 3, 4]
    assert found["eraser_sufficiency", "planted-0001"]["value"] == pytest.approx(sufficiency, abs=1e-6)
    # sample 0 (negative) mirrors it exactly
    assert found["eraser_comprehensiveness", "planted-0000"]["value"] == pytest.approx(comprehensiveness, abs=1e-6)


def test_they_are_text_only_and_left_out_of_image_selections(registry: manager.Registry) -> None:
    from xaibench.suites.metric_selection import select_metrics

    assert registry.info("metric", "eraser_sufficiency").modalities == ("text",)
    image = select_metrics(registry, ["family:faithfulness", "all"])
    text = select_metrics(registry, ["family:faithfulness"], modality="text")
    assert "eraser_comprehensiveness" not in image and "deletion" in image
    assert sorted(text) == ["deletion", "eraser_comprehensiveness", "eraser_sufficiency", "insertion"]
