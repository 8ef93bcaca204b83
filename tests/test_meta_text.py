"""The meta-evaluation on the text suite (issue 46, DESIGN 9 and 12), end to end through
``xaibench.meta``: the graded-oracle ladder on ``(1, L)`` token maps finds the alignment metrics
valid on ``planted-tokens`` (whose ground truth is exact), rank stability is measured on both
text tracks, and ``random`` ranks last on ``planted-tokens``.

Oracles: the ladder's maps by hand (E_0 is the per-token ground truth, E_1 the noise ``random``
would draw, the same noise at every level); the verdicts as the issue's done-when states them."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import xaibench
from xaibench.api import ExplainContext
from xaibench.datasets.planted_tokens import PlantedTokensDataset
from xaibench.explainers.ladder import LadderExplainer
from xaibench.models.planted_tokens import PlantedTokensModel
from xaibench.tokens import tokenized

ALIGNMENT = ("iou", "mae", "pointing_game")


def test_the_ladder_on_tokens_mixes_the_token_ground_truth_with_per_token_noise() -> None:
    model = PlantedTokensModel()
    samples = [tokenized(model, s) for s in PlantedTokensDataset(n=3).samples()]
    inputs = model.preprocess([s.image for s in samples])
    context = ExplainContext(samples=samples)
    maps = {a: LadderExplainer(a=a).explain(model, inputs, None, seed=7, context=context) for a in (0.0, 0.5, 1.0)}
    truth = np.stack([s.ground_truth.levels for s in samples]).astype(np.float32)  # (3, 1, L): 1, 0.5, 0
    assert maps[0.0].shape == truth.shape == (3, 1, int(model.max_tokens))
    np.testing.assert_array_equal(maps[0.0], truth)
    noise = maps[1.0]
    assert ((noise >= 0) & (noise < 1)).all() and len(np.unique(noise)) == noise.size
    np.testing.assert_allclose(maps[0.5], 0.5 * truth + 0.5 * noise, atol=1e-6)  # the same noise at every a


@pytest.mark.slow
def test_meta_on_the_text_suite_finds_the_alignment_metrics_valid_and_random_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XAIBENCH_CACHE", str(tmp_path / "cache"))
    result = xaibench.meta(
        ["gradient", "input-x-gradient", "random"],
        suite="text",
        tracks=["planted-tokens", "imdb"],  # imdb-minilm: a transformer, slow on a CPU (tests/test_minilm_text.py)
        metrics=[*ALIGNMENT, "deletion"],
        limit=8,
        output_path=tmp_path / "out",
        consistency="none",
        protocol=False,
        site=False,
        progress=False,
    )
    planted, imdb = result.tracks["planted-tokens"].cards, result.tracks["imdb"].cards
    verdicts = {m: planted[m].validity.verdict for m in ALIGNMENT}
    assert verdicts == dict.fromkeys(ALIGNMENT, "valid"), {m: planted[m].validity for m in ALIGNMENT}
    for m in ALIGNMENT:  # the ground truth scores best, noise worst
        assert planted[m].validity.test == "ladder" and planted[m].validity.ci_low > 0
    assert planted["deletion"].validity.verdict == "untested"  # no planted-cue test on text
    for cards in (planted, imdb):  # stability on both text tracks
        for m in (*ALIGNMENT, "deletion"):
            s = cards[m].stability
            assert s.n == 8 and s.explainers == 3 and s.mean_tau is not None, (m, s)
    assert {m: imdb[m].validity.test for m in ALIGNMENT} == dict.fromkeys(ALIGNMENT, "ladder")
    board = json.loads((tmp_path / "out" / "leaderboard" / "leaderboard.json").read_text())
    overall = {
        r["explainer"]: r["rank"]
        for r in board["rows"]
        if r["track"] == "planted-tokens" and r["metric"] == "rank:overall"
    }
    assert overall["random"] == max(overall.values()) and list(overall.values()).count(overall["random"]) == 1
    # the ladder is a reference run apart: never published, never among the run's records
    assert not (tmp_path / "out" / "submissions" / "ladder.json").exists()
    assert not xaibench.results.records(tmp_path / "out" / ".xaibench")["explainer"].eq("ladder").any()


def test_noise_resilience_says_why_it_leaves_a_text_track_out() -> None:
    from xaibench.metaeval.consistency_runs import perturbable
    from xaibench.suites.text import TEXT_TRACKS

    planted = next(t for t in TEXT_TRACKS if t.name == "planted-tokens")
    assert planted.synthetic  # --consistency synthetic (the default) picks it
    assert perturbable(planted) == "dataset 'planted-tokens' is text: input noise adds to pixels (images only)"


def test_the_command_line_passes_limit_to_meta(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from xaibench import python_api
    from xaibench.cli import cli

    asked: list[dict[str, Any]] = []

    def fake(explainers: Any, **kwargs: Any) -> Any:
        asked.append(kwargs)
        return SimpleNamespace(tracks={}, known_answer=[], json_path="m.json", csv_path="m.csv")

    monkeypatch.setattr(python_api, "meta", fake)
    args = ["meta", "--suite", "text", "--output-path", str(tmp_path), "-q"]
    assert CliRunner().invoke(cli, [*args, "--limit", "8"]).exit_code == 0
    assert CliRunner().invoke(cli, args).exit_code == 0
    assert asked[0]["limit"] == 8 and "limit" not in asked[1]  # absent: the run's own default (every sample)
    assert CliRunner().invoke(cli, [*args, "--limit", "0"]).exit_code == 2
