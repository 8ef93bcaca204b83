"""Scoring explanations with a PASTA checkpoint: render, embed (cached), predict Q1..Q6.

A :class:`PastaScorer` is built once per checkpoint file (process-wide cache keyed by path,
size and mtime). ``score(batch)`` returns ``(N, 6)`` ratings in [1, 5] with NaN and a reason
where the score does not apply; the six ``pasta_q*`` metrics share one result per batch through
the batch's memo (``MetricInput.memo``, key ``("pasta", checkpoint digest, kind)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from xaibench.api import Encoder, MetricInput
from xaibench.pasta.checkpoint import Checkpoint, load_checkpoint, resolve_checkpoint
from xaibench.pasta.encoders import ENCODERS, EmbeddingCache, embed_images, embed_texts
from xaibench.pasta.network import QUESTIONS
from xaibench.pasta.render import concept_sentence, render_id, render_overlays

__all__ = ["PastaScorer", "ScoredBatch", "get_scorer", "make_encoder"]


@dataclass
class ScoredBatch:
    """Ratings ``(N, Q)`` (NaN where n/a) and one reason per sample (``None`` when scored)."""

    scores: np.ndarray
    reasons: list[str | None]


def make_encoder(name: str, params: dict[str, Any]) -> Encoder:
    """An encoder by registered name (plugins included), falling back on the built-in ones."""
    try:
        from xaibench.plugins.manager import get_registry

        return get_registry().create("encoder", name, **params)
    except Exception:
        for cls in ENCODERS:
            if cls.name == name:
                return cls(**params)
        raise


class PastaScorer:
    """Applies one checkpoint's branches to batches of explanations."""

    def __init__(self, checkpoint: Checkpoint, cache: EmbeddingCache | None = None) -> None:
        self.checkpoint = checkpoint
        self.cache = cache if cache is not None else EmbeddingCache()
        self._encoders: dict[str, Encoder | str] = {}

    def _encoder(self, kind: str) -> Encoder | str:
        """The branch's encoder, or the reason it cannot be used."""
        if kind not in self._encoders:
            branch = self.checkpoint.branch(kind) or {}
            spec = branch.get("encoder") or {}
            try:
                enc = make_encoder(spec["name"], dict(spec.get("params") or {}))
                reason = enc.unavailable()
                if reason is None and spec.get("identity") and enc.identity != spec["identity"]:
                    reason = (
                        f"encoder {spec['name']!r} here is {enc.identity}, but checkpoint {self.checkpoint.name} "
                        f"was trained with {spec['identity']}"
                    )
                self._encoders[kind] = reason if reason else enc
            except Exception as exc:  # noqa: BLE001 - the reason becomes the n/a text
                self._encoders[kind] = f"encoder {spec.get('name')!r} cannot be created: {type(exc).__name__}: {exc}"
        return self._encoders[kind]

    def applicability(self, kind: str) -> str | None:
        """Why this checkpoint cannot score ``kind`` explanations at all, else ``None``."""
        if kind not in self.checkpoint.networks:
            branch = self.checkpoint.branch(kind) or {}
            why = branch.get("reason") or "no network for it"
            return f"PASTA checkpoint {self.checkpoint.name} has no {kind} branch: {why}"
        trained_on = str((self.checkpoint.branch(kind) or {}).get("render") or "")
        current = render_id(kind)
        if trained_on.split("/")[0] == current.split("/")[0] and trained_on != current:
            return (
                f"PASTA checkpoint {self.checkpoint.name} was trained on render {trained_on}; "
                f"this xaibench renders {current}"
            )
        enc = self._encoder(kind)
        return enc if isinstance(enc, str) else None

    def _vocabulary_reasons(self, batch: MetricInput) -> list[str | None]:
        vocab = self.checkpoint.meta.get("label_vocabulary")
        if not vocab:
            return [None] * len(batch.samples)
        names = list(getattr(batch.model, "label_names", []) or [])
        allowed = set(vocab)
        out: list[str | None] = []
        for t in np.asarray(batch.targets).tolist():
            label = names[int(t)] if 0 <= int(t) < len(names) else str(t)
            out.append(
                None
                if label in allowed
                else f"class {label!r} is not in the label vocabulary of checkpoint {self.checkpoint.name} "
                f"({len(allowed)} labels)"
            )
        return out

    def score(self, batch: MetricInput, kind: str) -> ScoredBatch:
        n = len(batch.samples)
        nan = np.full((n, len(QUESTIONS)), np.nan)
        reason = self.applicability(kind)
        if reason:
            return ScoredBatch(nan, [reason] * n)
        reasons = self._vocabulary_reasons(batch)
        ok = [i for i, r in enumerate(reasons) if r is None]
        if not ok:
            return ScoredBatch(nan, reasons)
        enc = self._encoder(kind)
        assert not isinstance(enc, str)
        branch = self.checkpoint.branch(kind) or {}
        if kind == "saliency":
            if batch.saliency is None or batch.inputs is None or batch.model is None:
                return ScoredBatch(nan, ["PASTA needs the saliency maps, the model inputs and the model"] * n)
            from xaibench.imaging import from_model_input

            x = from_model_input(batch.inputs[ok], batch.model.mean, batch.model.std).clamp(0.0, 1.0)
            images01 = x.permute(0, 2, 3, 1).detach().cpu().numpy()
            renders = render_overlays(images01, np.asarray(batch.saliency)[ok], int(branch.get("render_size") or 224))
            emb = embed_images(enc, renders, self.cache)
        else:
            if batch.concepts is None:
                return ScoredBatch(nan, ["PASTA needs the concept explanations"] * n)
            names = list(getattr(batch.model, "label_names", []) or [])
            texts = []
            for i in ok:
                t = int(np.asarray(batch.targets)[i])
                label = names[t] if 0 <= t < len(names) else None
                texts.append(concept_sentence(batch.concepts[i], int(branch.get("top_k") or 20), label))
            emb = embed_texts(enc, texts, self.cache)
        scores = nan.copy()
        scores[ok] = self.checkpoint.networks[kind].scores(emb)
        return ScoredBatch(scores, reasons)

    def describe(self) -> dict[str, Any]:
        """What goes into every result's metric params: checkpoint, label and renders."""
        meta = self.checkpoint.meta
        return {
            "label": self.checkpoint.label,
            "heldout_q1_spearman": self.checkpoint.heldout_q1_spearman(),
            "checkpoint_sha256": self.checkpoint.sha256[:16],
            "render": render_id("saliency"),
            "sentence": render_id("concept"),
            "branches": sorted(self.checkpoint.networks),
            "encoders": {
                k: (meta["branches"][k].get("encoder") or {}).get("identity") for k in self.checkpoint.networks
            },
        }


_SCORERS: dict[tuple[str, int, int], PastaScorer] = {}


def get_scorer(name_or_path: str | Path) -> PastaScorer:
    """The process-wide scorer of a checkpoint (reloaded when the file changes)."""
    path = resolve_checkpoint(name_or_path).resolve()
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _SCORERS:
        _SCORERS[key] = PastaScorer(load_checkpoint(path))
    return _SCORERS[key]
