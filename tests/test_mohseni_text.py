"""``mohseni-text`` (issue 46): Mohseni et al.'s word-level text annotations read in the upstream
layout beside their texts. Files whose words agree with their text load, with the annotators'
shares as levels; each file that does not (a wrong text, words of several texts, no text, bad
JSON) is named in one line. The fixture is written here in the upstream layout."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from xaibench.datasets.real.mohseni_text import MohseniTextDataset, agreement, read_annotation

GOOD = "The plot was dull , but the acting was wonderful and the music lovely."
OTHER = "A quiet film about two brothers who never speak to each other again."


def _write(root: Path, rel: str, content: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")


@pytest.fixture()
def layout(tmp_path: Path) -> Path:
    root = tmp_path / "mohseni"
    words = GOOD.split()
    agreeing = {"4": ["dull", 0.75], "10": ["wonderful", 1.0], "2": ["plot", 0.25]}
    assert [words[int(k) - 1] for k in agreeing] == [w for w, _ in agreeing.values()]
    _write(root, "Text/IMDB/human_attention/pos/7.json", json.dumps(agreeing))
    _write(root, "Text/IMDB/org_reviews/pos_val/7.txt", GOOD)
    # words of another text at these numbers: 1 of 3 agrees
    _write(
        root, "Text/IMDB/human_attention/neg/8.json", json.dumps({"4": ["dull", 0.5], "1": ["A", 1.0], "3": ["x", 0.5]})
    )
    _write(root, "Text/IMDB/org_reviews/neg_val/8.txt", OTHER)
    _write(root, "Text/IMDB/human_attention/neg/9.json", json.dumps({"1": ["A", 0.5]}))  # no text
    _write(root, "Text/IMDB/human_attention/neg/10.json", "{not json")
    _write(root, "Text/IMDB/org_reviews/neg/10.txt", OTHER)
    _write(
        root, "Text/20news_group/human_attention/sci.med/11.json", json.dumps({"2": ["quiet", 0.5], "3": ["film", 1.0]})
    )
    _write(root, "Text/20news_group/org_texts/sci.med/11.txt", OTHER)
    return root


def test_agreeing_files_load_with_the_shares_as_levels_and_the_others_are_named_once(layout: Path) -> None:
    data = MohseniTextDataset(root=layout)
    samples = {s.id: s for s in data.samples()}
    assert sorted(samples) == ["20news-sci.med-11", "imdb-pos-7"]
    sample = samples["imdb-pos-7"]
    assert list(sample.image) == GOOD.split()
    assert sample.ground_truth is not None and sample.ground_truth.levels is not None
    expected = np.zeros((1, len(GOOD.split())), dtype=np.float32)
    expected[0, [3, 9, 1]] = [0.75, 1.0, 0.25]
    np.testing.assert_array_equal(sample.ground_truth.levels, expected)
    np.testing.assert_array_equal(sample.ground_truth.mask, expected > 0)
    assert "annotators' word selections" in sample.ground_truth.notes[0]
    assert data.label_names == ("neg", "pos", "sci.med")
    assert sample.label == 1 and samples["20news-sci.med-11"].label == 2
    assert data.notes == [
        "mohseni-text: IMDB/human_attention/neg/10.json left out: not readable JSON (JSONDecodeError)",
        "mohseni-text: IMDB/human_attention/neg/8.json left out: 33% of its 3 words agree with "
        "IMDB/org_reviews/neg_val/8.txt (below 95%)",
        "mohseni-text: IMDB/human_attention/neg/9.json left out: no text at IMDB/org_reviews/neg_val/9.txt",
    ]


def test_subset_and_threshold(layout: Path) -> None:
    assert [s.id for s in MohseniTextDataset(root=layout, subset="20news").samples()] == ["20news-sci.med-11"]
    loose = MohseniTextDataset(root=layout, subset="imdb", min_agreement=0.3)
    assert [s.id for s in loose.samples()] == ["imdb-neg-8", "imdb-pos-7"]
    with pytest.raises(ValueError, match="subset must be one of"):
        MohseniTextDataset(root=layout, subset="yelp")


def test_agreement_and_reading_by_hand(tmp_path: Path) -> None:
    words = ["a", "b", "c"]
    assert agreement({1: ("a", 1.0), 2: ("x", 0.5), 3: ("c", 0.5), 9: ("z", 1.0)}, words) == 0.5
    assert agreement({}, words) == 0.0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"0": ["a", 0.5]}), encoding="utf-8")
    with pytest.raises(ValueError, match="entry '0' is not a word number"):
        read_annotation(bad)
    bad.write_text(json.dumps({"1": ["a", 1.5]}), encoding="utf-8")
    with pytest.raises(ValueError, match="share in"):
        read_annotation(bad)


def test_declares_text_and_its_revision_follows_the_files(layout: Path) -> None:
    data = MohseniTextDataset(root=layout)
    assert MohseniTextDataset.modalities == ("text",)
    before = data.revision
    (layout / "Text/IMDB/org_reviews/pos_val/7.txt").write_text(GOOD + " ", encoding="utf-8")
    assert MohseniTextDataset(root=layout).revision != before
