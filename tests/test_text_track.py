"""Text on the harness (issue 46, DESIGN 12): tokenised samples, the token-sequence input, the
``planted-tokens`` track whose model's decision is built in, and the ``text`` suite end to end.

Oracles: the ground truth spread from words to tokens by hand; the input tensor by hand; the
model's logits as the sums its construction states, deleting a filler changing them by exactly 0,
and integrated gradients equal to the exact per-token contributions."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from xaibench.api import GroundTruth, Sample, TextModel, Tokenized
from xaibench.datasets.planted_tokens import FILLER, LENGTH, PlantedTokensDataset, planted_tokens
from xaibench.models.planted_tokens import PlantedTokensModel
from xaibench.plugins import manager
from xaibench.runner.run import RunConfig, run
from xaibench.tokens import spread_to_tokens, tokenized


class Halves(TextModel):
    """Splits every word in two tokens (``ab`` -> ``a``, ``##b``); 3-dimensional embeddings."""

    name = "halves"

    def __init__(self) -> None:
        self.max_tokens = 5
        self.pad_id = 0
        self.embeddings = np.arange(30, dtype=np.float32).reshape(10, 3)

    def tokenize(self, words: Any) -> Tokenized:
        ids, word_of, tokens = [], [], []
        for i, word in enumerate(words):
            for j, piece in enumerate((word[:1], "##" + word[1:])):
                ids.append(1 + (2 * i + j) % 9)
                word_of.append(i)
                tokens.append(piece)
        return Tokenized(tuple(ids), tuple(word_of), tuple(tokens))


def test_ground_truth_is_spread_from_words_to_their_tokens_then_cut_or_padded() -> None:
    levels = np.array([[0.0, 1.0, 0.5]], dtype=np.float32)
    sample = Sample(
        id="s", image=np.array(["ab", "cd", "ef"]), label=1, ground_truth=GroundTruth(mask=levels > 0, levels=levels)
    )
    out = tokenized(Halves(), sample)
    # 6 tokens cut to max_tokens = 5: a ##b c ##d e
    assert out.image.tolist() == [1, 2, 3, 4, 5]
    assert out.meta["tokens"] == ["a", "##b", "c", "##d", "e"] and out.meta["n_tokens"] == 5
    assert out.ground_truth is not None
    np.testing.assert_array_equal(out.ground_truth.levels, [[0.0, 0.0, 1.0, 1.0, 0.5]])
    np.testing.assert_array_equal(out.ground_truth.mask, [[False, False, True, True, True]])
    padded = spread_to_tokens(levels, np.array([0, 0, 2]), 5)
    np.testing.assert_array_equal(padded, [[0.0, 0.0, 0.5, 0.0, 0.0]])


def test_the_input_is_each_tokens_embedding_minus_the_paddings_with_a_presence_channel() -> None:
    model = Halves()
    x = model.preprocess([np.array([2, 0, 1, 0, 9])])
    assert tuple(x.shape) == (1, 4, 1, 5)
    table = model.embeddings
    expected = np.stack([table[i] - table[0] for i in (2, 0, 1, 0, 9)], axis=1)  # (3, 5)
    np.testing.assert_array_equal(x[0, :3, 0].numpy(), expected)
    np.testing.assert_array_equal(x[0, 3, 0].numpy(), [1, 0, 1, 0, 1])  # padding: all zero, the baseline


def _inputs(model: PlantedTokensModel, indices: list[int]) -> tuple[torch.Tensor, list[list[str]]]:
    words = [planted_tokens(i)[0] for i in indices]
    ids = [np.array(model.tokenize(w).ids) for w in words]
    return model.preprocess(ids), words


def test_the_planted_models_logits_are_the_sums_its_construction_states() -> None:
    model = PlantedTokensModel()
    x, words = _inputs(model, list(range(16)))
    with torch.no_grad():
        logits = model.module(x)
    for row, w in zip(logits, words, strict=True):
        positive = sum({"superb": 2, "wonderful": 2, "nice": 1, "fine": 1}.get(t, 0) for t in w)
        negative = sum({"awful": 2, "dreadful": 2, "dull": 1, "meh": 1}.get(t, 0) for t in w)
        assert row.tolist() == [float(negative), float(positive)]
    # removing a filler (replacing it with padding: zero) changes the logits by exactly 0
    filler = [j for j, t in enumerate(words[0]) if t in FILLER]
    removed = x.clone()
    removed[0, :, :, filler] = 0
    with torch.no_grad():
        assert torch.equal(model.module(removed), logits)
    evidence = [j for j, t in enumerate(words[0]) if t not in FILLER]
    removed[0, :, :, evidence[:1]] = 0  # an evidence word does count
    with torch.no_grad():
        assert not torch.equal(model.module(removed)[0], logits[0])


def test_integrated_gradients_recovers_the_exact_contributions_on_the_planted_track() -> None:
    from captum.attr import IntegratedGradients

    model = PlantedTokensModel()
    x, _ = _inputs(model, [0, 1, 2, 3])
    targets = torch.tensor([planted_tokens(i)[2] for i in range(4)])
    attributions = IntegratedGradients(model.module).attribute(x, target=targets, n_steps=16)
    per_token = attributions.sum(dim=1)[:, 0, :]  # (B, L)
    for i in range(4):
        levels = planted_tokens(i)[1]
        exact = 2.0 * levels[0]  # 2 per strong, 1 per weak, 0 per filler
        np.testing.assert_allclose(per_token[i].detach().numpy(), exact, atol=1e-5)


def test_the_dataset_plants_two_strong_and_two_weak_words_of_the_class() -> None:
    samples = list(PlantedTokensDataset(n=6).samples())
    assert [s.label for s in samples] == [0, 1, 0, 1, 0, 1]
    for s in samples:
        assert s.image.shape == (LENGTH,) and s.ground_truth is not None
        assert sorted(s.ground_truth.levels[0][s.ground_truth.levels[0] > 0].tolist()) == [0.5, 0.5, 1.0, 1.0]
    assert (
        PlantedTokensDataset(n=6).revision == PlantedTokensDataset(n=6).revision != PlantedTokensDataset(n=7).revision
    )


@pytest.mark.slow
def test_the_text_suite_ranks_the_token_explainers_and_gives_image_only_ones_na(
    registry: manager.Registry, tmp_path: Path
) -> None:
    config = RunConfig(
        explainers=["gradient", "input-x-gradient", "integrated-gradients", "random", "gradcam"],
        suite="text",
        tracks=["planted-tokens"],  # the IMDB tracks have tests of their own
        metrics=["iou", "mae", "pointing_game", "deletion"],
        limit=32,
        workdir=tmp_path / "work",
        examples=0,
    )
    result = run(config, registry)
    lines = (tmp_path / "work" / "results" / "planted-tokens.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]

    def mean(explainer: str, metric: str) -> float:
        values = [r["value"] for r in records if r["explainer"]["name"] == explainer and r["metric"] == metric]
        assert len(values) == 32 and None not in values, (explainer, metric)
        return float(np.mean(values))

    for exact in ("input-x-gradient", "integrated-gradients"):
        assert mean(exact, "iou") == 1.0 and mean(exact, "mae") == pytest.approx(0.0, abs=1e-6)
        assert mean(exact, "pointing_game") == 1.0
    for metric, worst in (("iou", min), ("pointing_game", min), ("mae", max), ("deletion", max)):
        values = {e: mean(e, metric) for e in ("gradient", "input-x-gradient", "integrated-gradients", "random")}
        assert worst(values, key=values.__getitem__) == "random", (metric, values)
    gradcam = {r["na_reason"] for r in records if r["explainer"]["name"] == "gradcam"}
    assert gradcam == {"modality: explainer gradcam supports image, not text"}
    assert result.summary["tracks"]["planted-tokens"]["modality_na"] == (
        "track planted-tokens (text): n/a for explainers gradcam: they do not support text"
    )


def test_alignment_on_token_masks_by_hand() -> None:
    """The alignment formulas on ``(1, L)`` token maps and masks, as on images (DESIGN 12), and the
    pointing game without tolerance: the top token itself must be in the mask."""
    from xaibench.metrics.alignment import formulas as al

    scores = np.zeros((1, 1, 64), dtype=np.float32)  # 64 tokens: an image's 15 px would be 4 tokens here
    scores[0, 0, :8] = [0.1, 0.9, 0.3, 0.8, 0.2, 0.0, 0.7, 0.4]
    mask = np.zeros((1, 1, 64), dtype=bool)
    mask[0, 0, [1, 2, 6]] = True
    top = al.topk_scores(scores, mask)  # k = |A| = 3: the top 3 tokens are 1, 3, 6; |B & A| = 2
    assert top["iou"].values[0] == pytest.approx(2 / 4)
    assert top["precision"].values[0] == pytest.approx(2 / 3) and top["recall"].values[0] == pytest.approx(2 / 3)
    assert top["f1"].values[0] == pytest.approx(2 / 3)
    assert al.threshold_scores(scores, mask)["f1"].values[0] == pytest.approx(2 / 3)  # >= 0.5: tokens 1, 3, 6
    assert al.mass_accuracy(scores, mask).values[0] == pytest.approx(1.9 / 3.4)  # (0.9 + 0.3 + 0.7) / sum
    levels = np.zeros((1, 1, 64), dtype=np.float32)  # a multi-level mask: token 1 strong, 2 and 6 weak
    levels[0, 0, [1, 2, 6]] = [1.0, 0.5, 0.5]
    mae = al.mae_scores(scores, levels)  # |E - M| on the first 8: .1 .1 .2 .8 .2 0 .2 .4; 0 on the other 56
    assert mae["mae"].values[0] == pytest.approx(2.0 / 64)
    assert mae["fn_mae"].values[0] == pytest.approx((0.1 + 0.2 + 0.2) / 3)
    assert mae["fp_mae"].values[0] == pytest.approx((0.1 + 0.8 + 0.2 + 0.4) / 61)
    assert al.pointing_game(scores, mask).values[0] == 1.0  # token 1
    near = np.zeros((1, 1, 64), dtype=bool)
    near[0, 0, 2] = True  # the token next to the top one: a miss on text (no tolerance)
    assert al.pointing_game(scores, near).values[0] == 0.0


class _SumNet(torch.nn.Module):
    """Logits ``[0, sum of the tokens' values]``: a token's value is its 1-d embedding."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        total = x[:, 0, 0, :].sum(dim=-1)
        return torch.stack([torch.zeros_like(total), total], dim=1)


class Values(TextModel):
    """Four tokens: padding 0 (value 0), then values 1, 2 and -1; sequences of 4."""

    name = "values"

    def __init__(self) -> None:
        self.module = _SumNet()
        self.embeddings = np.array([[0.0], [1.0], [2.0], [-1.0]], dtype=np.float32)
        self.pad_id = 0
        self.max_tokens = 4

    def tokenize(self, words: Any) -> Tokenized:
        raise NotImplementedError


def test_deletion_and_insertion_on_tokens_by_hand() -> None:
    """Tokens ``[1, 2, 3, pad]`` (values 1, 2, -1, 0) ranked by the map ``[0.1, 0.9, 0.5, 0.3]``:
    position 1, 2, 3 (padding), 0. Insertion starts from the all-padding sequence (logit 0) and
    inserts them in that order, one per step (steps = 4): logits 0, 2, 1, 1, 2; deletion removes
    them (replaces them by padding) in the same order: logits 2, 0, 1, 1, 0. p = sigmoid(logit) of
    class 1; the value is the trapezoid area over the fractions 0, 1/4, ..., 1."""
    from xaibench.api import MetricInput, Sample
    from xaibench.metrics.faithfulness.curves import Deletion, Insertion

    model = Values()
    ids = np.array([1, 2, 3, 0])
    batch = MetricInput(
        saliency=np.array([[[0.1, 0.9, 0.5, 0.3]]]),
        concepts=None,
        samples=[Sample(id="s", image=ids)],
        targets=np.array([1]),
        inputs=model.preprocess([ids]),
        model=model,
    )

    def area(logits: list[float]) -> float:
        p = [1.0 / (1.0 + np.exp(-z)) for z in logits]
        return sum(0.25 * (a + b) / 2 for a, b in itertools.pairwise(p))

    inserted = Insertion(steps=4).score(batch)
    assert inserted.curves is not None and inserted.curves[0] is not None
    np.testing.assert_allclose(inserted.curves[0]["probability"], 1 / (1 + np.exp(-np.array([0, 2, 1, 1, 2]))))
    assert inserted.values[0] == pytest.approx(area([0, 2, 1, 1, 2]), abs=1e-7)
    deleted = Deletion(steps=4).score(batch)
    assert deleted.values[0] == pytest.approx(area([2, 0, 1, 1, 0]), abs=1e-7)


def test_a_run_reads_the_dataset_revision_once_per_track_not_once_per_record(
    registry: manager.Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record key holds the dataset's revision; IMDB's is a digest of every review and the
    VADER lexicon, and reading it for each key (several per record) made a run of one
    image-only explainer on `imdb` take three minutes for nothing but n/a records."""
    from xaibench.datasets.imdb import ImdbDataset

    reads: list[str] = []
    digest = ImdbDataset.revision.func  # the digest itself, without the class's caching

    def counted(self: ImdbDataset) -> str:
        reads.append(self.split)
        return digest(self)

    monkeypatch.setattr(ImdbDataset, "revision", property(counted))
    config = RunConfig(
        explainers=["random", "gradcam"],
        suite="text",
        tracks=["imdb"],
        metrics=["iou", "pointing_game", "deletion"],
        limit=6,
        workdir=tmp_path / "work",
        examples=0,
        progress=False,
    )
    run(config, registry)
    records = (tmp_path / "work" / "results" / "imdb.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(records) == 2 * 3 * 6
    assert 1 <= len(reads) <= 2, len(reads)  # the track's load (and the suite's pin check, if any)
