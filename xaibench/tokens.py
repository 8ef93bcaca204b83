"""Text samples as a text model sees them (DESIGN 12): words tokenised, cut or padded to the
model's length, ground truth spread from each word to its tokens."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from xaibench.api import GroundTruth, Sample

__all__ = ["spread_to_tokens", "tokenized"]


def spread_to_tokens(values: np.ndarray | None, word_of: np.ndarray, length: int) -> np.ndarray | None:
    """A ``(1, n_words)`` ground truth as ``(1, length)`` per token: each token takes its word's
    value (``word_of``: the word index of each token, at most ``length`` of them), padding 0."""
    if values is None:
        return None
    words = np.asarray(values).reshape(-1)
    out = np.zeros((1, length), dtype=words.dtype)
    n = min(len(word_of), length)
    out[0, :n] = words[np.asarray(word_of[:n], dtype=np.int64)]
    return out


def tokenized(model: Any, sample: Sample) -> Sample:
    """``sample`` (its ``image``: the words) as ``model`` (a :class:`~xaibench.api.TextModel`)
    sees it: ``image`` its ``max_tokens`` token ids (the first tokens, padded with ``pad_id``),
    the ground truth per token, and in ``meta`` the tokens as text (``tokens``), the number of
    real tokens (``n_tokens``) and the words (``words``)."""
    words = [str(w) for w in np.asarray(sample.image).reshape(-1)]
    found = model.tokenize(words)
    length = int(model.max_tokens)
    ids = np.full(length, int(model.pad_id), dtype=np.int64)
    n = min(len(found.ids), length)
    ids[:n] = np.asarray(found.ids[:n], dtype=np.int64)
    word_of = np.asarray(found.word_of[:n], dtype=np.int64)
    truth = sample.ground_truth
    if truth is not None:
        truth = GroundTruth(
            mask=spread_to_tokens(truth.mask, word_of, length),
            levels=spread_to_tokens(truth.levels, word_of, length),
            notes=truth.notes,
        )
    meta = {**sample.meta, "tokens": list(found.tokens[:n]), "n_tokens": n, "words": words}
    return replace(sample, image=ids, ground_truth=truth, meta=meta)
