"""``xaibench score``: metrics on precomputed saliency maps (``<sample_id>.npy``)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from xaibench.api import Dataset, ForwardCounter, Metric, MetricInput, Model, Sample
from xaibench.errors import XaibenchError
from xaibench.imaging import resize_bilinear
from xaibench.plugins.manager import Registry
from xaibench.runner.evaluate import _safe_score


def open_dataset(registry: Registry, dataset: str) -> Dataset:
    """A dataset plugin by name, or a folder in the folder-dataset layout (DESIGN 8)."""
    path = Path(dataset)
    if path.is_dir():
        return registry.create("dataset", "folder", root=str(path))
    return registry.create("dataset", dataset)


def load_map(path: Path) -> np.ndarray:
    try:
        arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise XaibenchError(f"{path}: not a readable .npy array ({exc})") from exc
    arr = np.squeeze(np.asarray(arr, dtype=np.float32))
    if arr.ndim != 2:
        raise XaibenchError(f"{path}: expected a 2-D saliency map, got shape {tuple(arr.shape)}")
    return arr


def score_folder(
    registry: Registry,
    dataset_name: str,
    explanations: Path,
    model_name: str | None,
    metric_ids: list[str] | None,
    seed: int = 0,
) -> dict[str, Any]:
    """Score every sample's map; missing maps count as n/a. Returns the DESIGN 8 JSON shape."""
    dataset = open_dataset(registry, dataset_name)
    model: Model | None = registry.create("model", model_name) if model_name else None
    if metric_ids is None:
        metric_ids = [e.info.name for e in registry.entries("metric") if model or e.cls.family == "alignment"]
    metrics: list[Metric] = [registry.create("metric", m) for m in metric_ids]
    samples = list(dataset.samples())
    maps: dict[str, np.ndarray] = {}
    missing: list[str] = []
    for s in samples:
        path = explanations / f"{s.id}.npy"
        if path.exists():
            maps[s.id] = load_map(path)
        else:
            missing.append(s.id)
    known = {s.id for s in samples}
    strays = sorted(p.stem for p in explanations.glob("*.npy") if p.stem not in known)
    if strays and not maps:
        raise XaibenchError(f"{explanations}: no file matches a sample id of {dataset_name!r} (e.g. {strays[0]}.npy)")
    per_sample: dict[str, dict[str, float | None]] = {m.name: {} for m in metrics}
    reasons: dict[str, dict[str, str]] = {m.name: {} for m in metrics}
    for sid in missing:
        for m in metrics:
            per_sample[m.name][sid] = None
            reasons[m.name][sid] = "no explanation file"
    for group in _groups(samples, maps, model):
        batch = _batch(group, maps, model, seed)
        for m in metrics:
            out = _safe_score(m, batch, "saliency")
            for j, s in enumerate(group):
                v = float(out.values[j])
                per_sample[m.name][s.id] = v if np.isfinite(v) else None
                if not np.isfinite(v):
                    reasons[m.name][s.id] = out.reasons[j] or "n/a"
    result: dict[str, Any] = {"metrics": {}}
    for m in metrics:
        values = [v for v in per_sample[m.name].values() if v is not None]
        result["metrics"][m.name] = {
            "mean": float(np.mean(values)) if values else None,
            "n": len(values),
            "n_na": len(per_sample[m.name]) - len(values),
            "per_sample": {s.id: per_sample[m.name].get(s.id) for s in samples},
        }
    return result


def _groups(samples: list[Sample], maps: dict[str, np.ndarray], model: Model | None) -> list[list[Sample]]:
    """With a model every map is resized to its input size (one group per 16); without, group by map shape."""
    present = [s for s in samples if s.id in maps]
    if model is not None:
        return [present[i : i + 16] for i in range(0, len(present), 16)]
    by_shape: dict[tuple[int, ...], list[Sample]] = defaultdict(list)
    for s in present:
        by_shape[maps[s.id].shape].append(s)
    return list(by_shape.values())


def _batch(group: list[Sample], maps: dict[str, np.ndarray], model: Model | None, seed: int) -> MetricInput:
    if model is None:
        return MetricInput(
            saliency=np.stack([maps[s.id] for s in group]),
            concepts=None,
            samples=group,
            targets=np.array([s.target if s.target is not None else -1 for s in group]),
            seed=seed,
        )
    size = model.input_size
    resized = [resize_bilinear(maps[s.id], (size, size)) for s in group]
    inputs = model.preprocess([s.image for s in group])
    forward = ForwardCounter(model.module)
    predicted = forward(inputs).argmax(dim=1).numpy()
    targets = np.array([s.target if s.target is not None else int(p) for s, p in zip(group, predicted, strict=True)])
    return MetricInput(
        saliency=np.stack(resized),
        concepts=None,
        samples=group,
        targets=targets,
        inputs=inputs,
        model=model,
        forward=forward,
        seed=seed,
    )
