"""Training items from a technique-level ratings table: explain, render, embed, label.

For each chosen table row, the mapped explainer explains every image of a track (one dataset x
one model, loaded like the runner loads it, explanations cached in the runner's explanation
cache); each explanation is rendered (overlay for saliency, sentence for concepts), embedded by
the branch's encoder (embedding cache) and labelled with the row's ratings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from xaibench.api import Encoder, TrackSpec
from xaibench.errors import XaibenchError
from xaibench.pasta.encoders import EmbeddingCache, embed_images, embed_texts
from xaibench.pasta.render import concept_sentence, render_id, render_overlays
from xaibench.pasta.training.data import Items, TableRow
from xaibench.plugins.manager import Registry

__all__ = ["TrackChoice", "generate_items", "track_images01"]


@dataclass(frozen=True)
class TrackChoice:
    """The model and image set on which training explanations are generated."""

    dataset: str
    model: str
    dataset_params: dict[str, Any] = field(default_factory=dict)
    model_params: dict[str, Any] = field(default_factory=dict)
    limit: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def track_images01(track: Any) -> np.ndarray:
    """The track's model inputs back in [0, 1] pixel space, ``(B, S, S, 3)`` float32."""
    from xaibench.imaging import from_model_input

    x = from_model_input(track.inputs, track.model.mean, track.model.std).clamp(0.0, 1.0)
    return x.permute(0, 2, 3, 1).numpy()


def generate_items(
    rows: Sequence[TableRow],
    mapping: Mapping[str, str],
    *,
    kind: str,
    choice: TrackChoice,
    encoder: Encoder,
    registry: Registry,
    workdir: Path,
    seed: int = 0,
    render_size: int = 224,
    top_k: int = 20,
    batch_size: int = 8,
    log: Callable[[str], None] | None = None,
) -> Items:
    """Explanations of every chosen technique on every image of the track, embedded and labelled.

    Runs with one torch thread: threaded float reductions make explanations differ at the 1e-6 level
    between thread counts, enough to move held-out statistics over a dozen techniques, and
    ``xaibench pasta evaluate`` must reproduce a card's numbers.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _generate(
            rows,
            mapping,
            kind=kind,
            choice=choice,
            encoder=encoder,
            registry=registry,
            workdir=workdir,
            seed=seed,
            render_size=render_size,
            top_k=top_k,
            batch_size=batch_size,
            log=log,
        )
    finally:
        torch.set_num_threads(threads)


def _generate(
    rows: Sequence[TableRow],
    mapping: Mapping[str, str],
    *,
    kind: str,
    choice: TrackChoice,
    encoder: Encoder,
    registry: Registry,
    workdir: Path,
    seed: int,
    render_size: int,
    top_k: int,
    batch_size: int,
    log: Callable[[str], None] | None,
) -> Items:
    from xaibench.runner import explain_track, explanation_cache, load_track

    reason = encoder.unavailable()
    if reason:
        raise XaibenchError(reason)
    spec = TrackSpec(
        name=f"pasta-{kind}",
        dataset=choice.dataset,
        model=choice.model,
        dataset_params=dict(choice.dataset_params),
        model_params=dict(choice.model_params),
    )
    track = load_track(spec, registry, limit=choice.limit)
    cache = explanation_cache(workdir)
    emb_cache = EmbeddingCache(Path(workdir) / "cache" / "embeddings")
    images01 = track_images01(track) if kind == "saliency" else None
    renders: list[Any] = []
    images: list[str] = []
    techniques: list[str] = []
    labels: list[tuple[float, ...]] = []
    failures: dict[str, int] = {}
    explainers: dict[str, str] = {}
    for row in rows:
        name = mapping[row.technique]
        explainer = registry.create("explainer", name, materialise=True)  # explained in this process (trusted)
        if (explainer.kind == "concept") != (kind == "concept"):
            raise XaibenchError(f"explainer {name!r} gives {explainer.kind} explanations, not {kind}")
        explainers[row.technique] = f"{name} {explainer.version}"
        result = explain_track(track, explainer, cache=cache, seed=seed, batch_size=batch_size, timeout=None)
        failures[row.technique] = len(result.failures)
        ok = [i for i, s in enumerate(track.samples) if s.id in result.values]
        if kind == "saliency":
            assert images01 is not None
            maps = np.stack([result.values[track.samples[i].id] for i in ok]) if ok else np.zeros((0, 1, 1))
            renders.extend(render_overlays(images01[ok], maps, render_size))
        else:
            names = list(track.model.label_names)
            for i in ok:
                target = int(track.targets[i])
                label = names[target] if 0 <= target < len(names) else None
                renders.append(concept_sentence(result.values[track.samples[i].id], top_k, label))
        images.extend(track.samples[i].id for i in ok)
        techniques.extend([row.technique] * len(ok))
        labels.extend([row.ratings] * len(ok))
        if log is not None:
            log(
                f"{row.technique} -> {name}: {len(ok)} explanations "
                f"({result.cached} cached, {len(result.failures)} failed)"
            )
    if not renders:
        raise XaibenchError(f"no {kind} explanations were produced")
    if kind == "saliency":
        emb = embed_images(encoder, np.stack(renders), emb_cache)
    else:
        emb = embed_texts(encoder, renders, emb_cache)
    return Items(
        embeddings=emb,
        labels=np.array(labels, dtype=np.float64),
        images=images,
        techniques=techniques,
        kind=kind,
        info={
            "track": choice.to_dict(),
            "model_identity": track.model.identity,
            "dataset_revision": track.revision,
            "n_images": len(track.samples),
            "explainers": explainers,
            "failures": {k: v for k, v in failures.items() if v},
            "render": render_id(kind),
            "render_size": render_size if kind == "saliency" else None,
            "top_k": top_k if kind == "concept" else None,
            "seed": seed,
        },
    )
