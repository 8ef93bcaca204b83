"""``imdb-cnn``: a convolutional sentiment classifier on word embeddings (Kim 2014), trained once on
the 20,000 training reviews of :mod:`xaibench.datasets.imdb` and shipped (DESIGN 12).

Architecture: an embedding of :data:`ARCH` ``emb`` dimensions per word of a 25,002-word vocabulary
(``<pad>`` 0, its vector zero, ``<unk>`` 1, then the 25,000 most frequent training words seen at
least twice), 100 filters each of widths 3, 4 and 5 with ReLU and max over time, dropout 0.5 and a
linear layer to the two classes. As a :class:`~xaibench.api.TextModel` it reads its input back as
the tokens' embeddings (the padding token's, zero, added back); the presence channel is not read:
padding is the zero vector it was trained with. A word is one token (an unknown word is
``<unk>``); the first :data:`MAX_TOKENS` words of a review are explained.

Training (:data:`TRAIN`): Adam, learning rate 2e-3, batch 64, 3 epochs, embeddings drawn from
N(0, 0.1^2), seed 0, one thread, reviews cut at 400 words. ``python -m xaibench.models.imdb_cnn``
trains and rewrites the shipped weights (a maintainer's command: training depends on the CPU's
kernels), the vocabulary in the safetensors file's metadata and the held-out accuracy (the 5,000
reviews never trained on, at :data:`MAX_TOKENS` words) in the manifest.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from xaibench.api import TextModel, Tokenized
from xaibench.datasets.imdb import LABEL_NAMES, imdb_reviews, imdb_split, review_words
from xaibench.models.shipped import load_shipped, write_shipped

__all__ = ["ARCH", "MAX_TOKENS", "TRAIN", "ImdbCNN", "TextCNN", "train_imdb_cnn"]

KEY = "imdb-cnn"
ARCH: dict[str, Any] = {"emb": 64, "filters": 100, "kernels": [3, 4, 5], "dropout": 0.5}
TRAIN: dict[str, Any] = {
    "epochs": 3,
    "lr": 2e-3,
    "batch": 64,
    "emb_std": 0.1,
    "seed": 0,
    "threads": 1,
    "max_len": 400,
    "vocab_size": 25000,
    "min_count": 2,
}
MAX_TOKENS = 256
PAD, UNK = "<pad>", "<unk>"


def train_key() -> str:
    """The training configuration's key (architecture, training, split): shipped weights are for it only."""
    text = json.dumps({"arch": ARCH, "train": TRAIN, "split": "imdb_split(5000, seed 0)"}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class TextCNN(nn.Module):
    """Kim's CNN over word vectors; :meth:`forward` takes the :class:`~xaibench.api.TextModel` input."""

    def __init__(self, vocabulary: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocabulary, ARCH["emb"], padding_idx=0)
        self.convs = nn.ModuleList(nn.Conv1d(ARCH["emb"], ARCH["filters"], k) for k in ARCH["kernels"])
        self.drop = nn.Dropout(ARCH["dropout"])
        self.fc = nn.Linear(ARCH["filters"] * len(ARCH["kernels"]), 2)

    def from_vectors(self, vectors: torch.Tensor) -> torch.Tensor:
        """``(B, E, L)`` word vectors -> ``(B, 2)`` logits."""
        pooled = [F.relu(conv(vectors)).amax(dim=2) for conv in self.convs]
        return self.fc(self.drop(torch.cat(pooled, dim=1)))

    def from_ids(self, ids: torch.Tensor) -> torch.Tensor:
        """``(B, L)`` token ids -> logits (training)."""
        return self.from_vectors(self.emb(ids).transpose(1, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, E + 1, 1, L)``: each token's vector minus the padding token's, and presence."""
        vectors = x[:, : ARCH["emb"], 0, :] + self.emb.weight[0].view(1, -1, 1)
        return self.from_vectors(vectors)


def _vocabulary(token_lists: Sequence[Sequence[str]]) -> list[str]:
    counts = Counter(t for tokens in token_lists for t in tokens)
    ranked = sorted((w for w, c in counts.items() if c >= TRAIN["min_count"]), key=lambda w: (-counts[w], w))
    return [PAD, UNK, *ranked[: TRAIN["vocab_size"]]]


def _encode(token_lists: Sequence[Sequence[str]], index: dict[str, int], length: int) -> torch.Tensor:
    out = np.zeros((len(token_lists), length), dtype=np.int64)
    for i, tokens in enumerate(token_lists):
        ids = [index.get(t, 1) for t in tokens[:length]]
        out[i, : len(ids)] = ids
    return torch.from_numpy(out)


def held_out_accuracy(net: TextCNN, index: dict[str, int], length: int = MAX_TOKENS) -> float:
    """Accuracy on the 5,000 held-out reviews, each cut at ``length`` words."""
    texts, labels = imdb_reviews()
    _, test = imdb_split(labels)
    x = _encode([review_words(texts[i]) for i in test], index, length)
    net.eval()
    with torch.no_grad():
        predicted = torch.cat([net.from_ids(x[i : i + 500]).argmax(dim=1) for i in range(0, len(x), 500)])
    return float((predicted.numpy() == labels[test]).mean())


def train_imdb_cnn() -> tuple[TextCNN, list[str]]:
    """Train on the 20,000 training reviews (:data:`TRAIN`); the network and its vocabulary."""
    torch.manual_seed(TRAIN["seed"])
    torch.set_num_threads(TRAIN["threads"])
    texts, labels = imdb_reviews()
    train, _ = imdb_split(labels)
    tokens = [review_words(texts[i]) for i in train]
    vocabulary = _vocabulary(tokens)
    index = {w: i for i, w in enumerate(vocabulary)}
    x, y = _encode(tokens, index, TRAIN["max_len"]), torch.from_numpy(labels[train])
    net = TextCNN(len(vocabulary))
    with torch.no_grad():
        net.emb.weight.normal_(0.0, TRAIN["emb_std"])
        net.emb.weight[0].zero_()
    optimiser = torch.optim.Adam(net.parameters(), lr=TRAIN["lr"])
    for _ in range(TRAIN["epochs"]):
        net.train()
        order = torch.randperm(len(x))
        for start in range(0, len(order), TRAIN["batch"]):
            rows = order[start : start + TRAIN["batch"]]
            loss = F.cross_entropy(net.from_ids(x[rows]), y[rows])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    return net.eval(), vocabulary


class ImdbCNN(TextModel):
    """A word-level CNN sentiment classifier trained on IMDB (held-out accuracy in its provenance)."""

    name: ClassVar[str] = "imdb-cnn"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = (
        "Kim-style CNN on 64-d word embeddings (widths 3/4/5, 100 filters each), trained on 20,000 IMDB reviews; "
        "shipped weights"
    )
    licence: ClassVar[str] = "Apache-2.0 (trained by xaibench)"

    def __init__(self) -> None:
        shipped = load_shipped(KEY, train_key())
        vocabulary = shipped.metadata["vocabulary"].split("\n")
        net = TextCNN(len(vocabulary))
        net.load_state_dict({k: v.float() for k, v in shipped.state.items()})
        self.module = net.eval()
        self.embeddings = net.emb.weight.detach().numpy().copy()
        self.pad_id = 0
        self.max_tokens = MAX_TOKENS
        self.label_names = LABEL_NAMES
        self.weights_source = f"shipped, held-out accuracy {shipped.entry['accuracy']['accuracy']:.4f}"
        self._index = {w: i for i, w in enumerate(vocabulary)}
        self._identity = f"{self.name}@{shipped.digest[:12]}"

    @property
    def identity(self) -> str:
        return self._identity

    def tokenize(self, words: Sequence[str]) -> Tokenized:
        """One token per word; a word outside the vocabulary is ``<unk>`` (shown as the word)."""
        ids = tuple(self._index.get(w, 1) for w in words)
        return Tokenized(ids=ids, word_of=tuple(range(len(words))), tokens=tuple(words))


def main() -> None:
    """Train, measure the held-out accuracy and rewrite the shipped weights (float16)."""
    net, vocabulary = train_imdb_cnn()
    state = {k: v.detach().to(torch.float16) for k, v in net.state_dict().items()}
    shipped = TextCNN(len(vocabulary))
    shipped.load_state_dict({k: v.float() for k, v in state.items()})
    accuracy = held_out_accuracy(shipped, {w: i for i, w in enumerate(vocabulary)})
    entry = write_shipped(
        KEY,
        state,
        train_key=train_key(),
        accuracy={"accuracy": round(accuracy, 4)},
        command="python -m xaibench.models.imdb_cnn",
        metadata={"vocabulary": "\n".join(vocabulary)},
    )
    print(f"imdb-cnn: held-out accuracy {accuracy:.4f} at {MAX_TOKENS} words; {entry['file']}")


if __name__ == "__main__":
    main()
