"""``planted-tokens``: a text classifier whose decision is built in (no training), the model of
the ``planted-tokens`` track (DESIGN 12).

Each word of :data:`~xaibench.datasets.planted_tokens.VOCABULARY` has a 4-dimensional embedding
``(p, q, r, s)``: ``p`` its positive evidence, ``q`` its negative evidence (strong 2, weak 1, else
-1), ``r`` and ``s`` seeded noise in [-1, 1] that no logit reads; the padding token is all zero.
The module reads the token vectors back from the input (:class:`~xaibench.api.TextModel`: each
embedding minus the padding token's, and a presence channel) and outputs
``[sum relu(q), sum relu(p)]`` over tokens: class 1 gets 2 per strong and 1 per weak positive
word, class 0 the same for negative words, and a filler adds nothing. Its exact attribution to a
token, relative to the explainers' baseline (the all-padding sequence), is that token's term, so
integrated gradients and input x gradient recover it exactly; a token's gradient is 1 on the
target's evidence and 0 elsewhere.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import torch
from torch import nn

from xaibench.api import TextModel, Tokenized
from xaibench.datasets.planted_tokens import LABEL_NAMES, LENGTH, NEGATIVE, PAD, POSITIVE, VOCABULARY

__all__ = ["PlantedTokensModel", "PlantedTokensNet", "planted_embeddings"]

ARCH_VERSION = "1"
EVIDENCE = {"strong": 2.0, "weak": 1.0}


def planted_embeddings() -> np.ndarray:
    """The ``(V, 4)`` float32 embeddings of the vocabulary (module doc)."""
    rng = np.random.default_rng(12)
    table = np.zeros((len(VOCABULARY), 4), dtype=np.float32)
    for i, word in enumerate(VOCABULARY):
        if word == PAD:
            continue
        p = next((EVIDENCE[k] for k, ws in POSITIVE.items() if word in ws), -1.0)
        q = next((EVIDENCE[k] for k, ws in NEGATIVE.items() if word in ws), -1.0)
        table[i] = (p, q, *rng.uniform(-1.0, 1.0, 2))
    return table


class PlantedTokensNet(nn.Module):
    """``(B, 5, 1, L)`` input -> ``(B, 2)`` logits ``[sum relu(q), sum relu(p)]`` (module doc)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("pad", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        vectors = x[:, :4, 0, :] + self.pad.view(1, 4, 1)  # (B, 4, L): the tokens' embeddings
        return torch.stack([torch.relu(vectors[:, 1]).sum(dim=-1), torch.relu(vectors[:, 0]).sum(dim=-1)], dim=1)


class PlantedTokensModel(TextModel):
    """A text classifier whose decision is built in: evidence words add to their class's logit."""

    name: ClassVar[str] = "planted-tokens"
    version: ClassVar[str] = f"1.0.{ARCH_VERSION}"
    description: ClassVar[str] = (
        "Synthetic text classifier built by construction (no training): each strong evidence word adds 2 to its "
        "class's logit, each weak one 1, fillers nothing"
    )
    licence: ClassVar[str] = "Apache-2.0 (constructed by xaibench)"
    synthetic: ClassVar[bool] = True

    def __init__(self) -> None:
        self.module = PlantedTokensNet().eval()
        self.embeddings = planted_embeddings()
        self.pad_id = VOCABULARY.index(PAD)
        self.max_tokens = LENGTH
        self.label_names = LABEL_NAMES
        self._index = {word: i for i, word in enumerate(VOCABULARY)}
        digest = hashlib.sha256(ARCH_VERSION.encode() + self.embeddings.tobytes()).hexdigest()
        self._identity = f"{self.name}@{digest[:12]}"

    @property
    def identity(self) -> str:
        return self._identity

    def tokenize(self, words: Sequence[str]) -> Tokenized:
        """One token per word of the vocabulary; an unknown word is padding (it adds nothing)."""
        ids = tuple(self._index.get(w, self.pad_id) for w in words)
        return Tokenized(ids=ids, word_of=tuple(range(len(words))), tokens=tuple(words))
