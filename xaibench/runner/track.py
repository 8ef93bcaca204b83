"""Loading one track: its dataset, its model, model inputs and the explained classes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from xaibench.api import Dataset, ForwardCounter, Model, Sample, TrackSpec
from xaibench.errors import XaibenchError
from xaibench.plugins.manager import Registry
from xaibench.runner.cache import image_digest


@dataclass
class TrackContext:
    """Everything the runner needs for one track, loaded once."""

    spec: TrackSpec
    dataset: Dataset
    model: Model
    samples: list[Sample]
    inputs: torch.Tensor
    targets: np.ndarray
    target_sources: list[str]
    digests: dict[str, str]
    forward: ForwardCounter
    provenance: dict[str, Any] = field(default_factory=dict)

    def sample_index(self) -> dict[str, int]:
        return {s.id: i for i, s in enumerate(self.samples)}


def load_track(spec: TrackSpec, registry: Registry, *, limit: int | None = None, batch_size: int = 64) -> TrackContext:
    """Instantiate the dataset and model of a track and compute the explained classes.

    The target is ``Sample.target`` when the dataset maps its label onto the model's
    classes, else the most probable of ``meta["target_candidates"]`` when the label
    spans several model classes, else the label when the track says ``target="label"``, else the
    model's prediction on the clean image (DESIGN 1).
    """
    dataset: Dataset = registry.create("dataset", spec.dataset, **dict(spec.dataset_params))
    model: Model = registry.create("model", spec.model, **dict(spec.model_params))
    effective_limit = min(x for x in (limit, spec.limit) if x is not None) if (limit or spec.limit) else None
    samples = list(dataset.samples(effective_limit))
    if not samples:
        raise XaibenchError(f"track {spec.name!r}: dataset {spec.dataset!r} yielded no samples")
    try:
        inputs = model.preprocess([s.image for s in samples])
    except Exception as exc:
        raise XaibenchError(f"track {spec.name!r}: model preprocessing failed: {exc}") from exc
    forward = ForwardCounter(model.module, batch_size=batch_size)
    probs = forward(inputs).numpy()
    targets = probs.argmax(axis=1)
    sources = ["predicted"] * len(samples)
    for i, sample in enumerate(samples):
        candidates = sample.meta.get("target_candidates") or []
        if sample.target is not None:
            targets[i], sources[i] = sample.target, "mapped"
        elif candidates:  # a label spanning several model classes: its most probable member
            targets[i], sources[i] = max(candidates, key=lambda c: probs[i, c]), "mapped-candidate"
        elif spec.target == "label" and sample.label is not None:
            targets[i], sources[i] = sample.label, "label"
    forward.images = forward.calls = 0
    digests = {s.id: image_digest(s.image) for s in samples}
    provenance = {
        "track": spec.name,
        "synthetic": bool(spec.synthetic or dataset.synthetic or model.synthetic),
        "dataset": {"name": spec.dataset, "revision": dataset.revision, "params": dict(spec.dataset_params)},
        "model": {"name": spec.model, "identity": model.identity, "params": dict(spec.model_params)},
        "target": spec.target,
        "n_samples": len(samples),
    }
    return TrackContext(
        spec=spec,
        dataset=dataset,
        model=model,
        samples=samples,
        inputs=inputs,
        targets=targets.astype(np.int64),
        target_sources=sources,
        digests=digests,
        forward=forward,
        provenance=provenance,
    )
