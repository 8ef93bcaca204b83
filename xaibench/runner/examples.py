"""The example explanations of a run: the first few samples of each track and explainer.

The runner hands them over with its summary (:class:`ExampleSet`); publishing renders them
(:mod:`xaibench.publish.examples` writes the overlays that submissions show). Choosing and
computing them belongs to the runner, which owns the explanation cache and the explainer guards.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xaibench.api import Explainer
from xaibench.runner.config import EXAMPLES_PER_TRACK
from xaibench.runner.executors import Executor
from xaibench.runner.explain import explain_track
from xaibench.runner.storage.cache import ExplanationCache
from xaibench.runner.track import TrackContext

# Explanation kinds that have a canonical rendering (an overlay or a sentence).
RENDERED_KINDS = ("saliency", "concept")


@dataclass(frozen=True)
class Example:
    """One sample as shown to people: its image (``H x W x 3``; on text its token ids), the
    explained class and its name, and its explanation (a saliency map or concept weights), or
    ``na_reason``. On text (DESIGN 12) also ``tokens``, the sample's real tokens as text (padding
    left out), and ``truth``, its ground-truth mask per token (``(1, L)``; ``None`` without one)."""

    sample_id: str
    image: np.ndarray
    target: int
    target_name: str | None
    explanation: np.ndarray | dict[str, float] | None
    na_reason: str | None = None
    tokens: tuple[str, ...] | None = None
    truth: np.ndarray | None = None


@dataclass(frozen=True)
class ExampleSet:
    """The examples of one explainer on one track; ``explainer`` is its provenance block,
    ``modality`` the track's (``"image"`` or ``"text"``)."""

    track: str
    explainer: dict[str, Any]
    kind: str
    examples: list[Example] = field(default_factory=list)
    modality: str = "image"


def collect_examples(
    track: TrackContext,
    explainer: Explainer,
    explainer_block: dict[str, Any],
    have: Mapping[str, Any],
    *,
    cache: ExplanationCache | None,
    seed: int,
    timeout: float | None,
    k: int = EXAMPLES_PER_TRACK,
    failed: Mapping[str, str] | None = None,
    executor: Executor | None = None,
) -> ExampleSet:
    """The first ``k`` samples of ``track`` with their explanations.

    ``have`` holds explanations already computed this run (sample id -> map) and ``failed``
    the reasons of those that failed this run (not retried); the others are read from the
    explanation cache or, without one, computed again (``k`` samples only). A sample whose
    explanation failed gets its ``na_reason``. Kinds without a rendering get no examples. On a
    text track each example also carries its tokens and ground-truth mask (:class:`Example`).
    """
    text = track.modality == "text"
    out = ExampleSet(track=track.spec.name, explainer=explainer_block, kind=explainer.kind, modality=track.modality)
    if k <= 0 or explainer.kind not in RENDERED_KINDS:
        return out
    chosen = track.samples[:k]
    maps: dict[str, Any] = {s.id: have[s.id] for s in chosen if s.id in have}
    failures: dict[str, str] = dict(failed or {})
    missing = {s.id for s in chosen if s.id not in maps and s.id not in failures}
    if missing:
        more = explain_track(
            track, explainer, cache=cache, seed=seed, batch_size=k, timeout=timeout, only=missing, executor=executor
        )
        maps.update(more.values)
        failures.update(more.failures)
    index = track.sample_index()
    labels = list(getattr(track.model, "label_names", ()) or ())
    for sample in chosen:
        target = int(track.targets[index[sample.id]])
        out.examples.append(
            Example(
                sample_id=sample.id,
                image=sample.image,
                target=target,
                target_name=labels[target] if 0 <= target < len(labels) else None,
                explanation=maps.get(sample.id),
                na_reason=None if sample.id in maps else failures.get(sample.id, "no explanation"),
                tokens=tuple(str(t) for t in sample.meta.get("tokens", ())) if text else None,
                truth=sample.ground_truth.binary() if text and sample.ground_truth is not None else None,
            )
        )
    return out
