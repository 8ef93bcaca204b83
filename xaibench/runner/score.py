"""``xaibench score``: metrics on precomputed saliency maps (``<sample_id>.npy``).

It runs the runner's own code: the track is built by :func:`~xaibench.runner.track.build_track`
(model inputs and the same target rules), maps are checked like an explainer's output (a
constant or non-finite map is n/a), and :func:`~xaibench.runner.evaluate.score_track` scores
them with the same batches, metric seed and n/a rules. So ``score`` and ``run`` give identical
per-sample values for identical maps and seed (``tests/test_score_cli.py`` shows it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from xaibench.api import Dataset, Metric, Model, TrackSpec
from xaibench.errors import XaibenchError
from xaibench.imaging import resize_bilinear
from xaibench.plugins.manager import Registry
from xaibench.runner.evaluate import score_track
from xaibench.runner.guard import check_saliency
from xaibench.runner.isolation import component_worker
from xaibench.runner.isolation.dataset_worker import open_dataset as load_dataset
from xaibench.runner.track import TrackContext, build_track
from xaibench.suites.metric_selection import select_metrics

# The runner's defaults (RunConfig.metric_batch, RunConfig.forward_batch): the same batches.
METRIC_BATCH = 16
FORWARD_BATCH = 16


def open_dataset(registry: Registry, dataset: str) -> Dataset:
    """A dataset plugin by name, or a folder in the folder-dataset layout (DESIGN 8). A
    third-party dataset is loaded in a worker (:mod:`xaibench.runner.isolation.dataset_worker`)."""
    path = Path(dataset)
    if path.is_dir():
        return registry.create("dataset", "folder", root=str(path))
    return load_dataset(registry, dataset)


def load_map(path: Path) -> np.ndarray:
    try:
        arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise XaibenchError(f"{path}: not a readable .npy array ({exc})") from exc
    arr = np.squeeze(np.asarray(arr, dtype=np.float32))
    if arr.ndim != 2:
        raise XaibenchError(f"{path}: expected a 2-D saliency map, got shape {tuple(arr.shape)}")
    return arr


def check_maps(track: TrackContext, maps: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Maps as the runner scores them, and n/a reasons for those it would refuse.

    With a model every map is resized (bilinear) to the model's input size, the size of a run's
    maps; without one it keeps its size (alignment metrics resize maps to the ground truth).
    Then the runner's output check applies: a non-finite or constant map is n/a.
    """
    size = track.input_size
    values: dict[str, np.ndarray] = {}
    failures: dict[str, str] = {}
    for sid, arr in maps.items():
        value, reason = check_saliency(arr, arr.shape)  # a constant map stays n/a after resizing
        if value is not None and size is not None:
            value, reason = check_saliency(resize_bilinear(arr, size), size)
        if value is None:
            failures[sid] = reason or "invalid map"
        else:
            values[sid] = value
    return values, failures


def score_folder(
    registry: Registry,
    dataset_name: str,
    explanations: Path,
    model_name: str | None,
    metric_ids: list[str] | None,
    seed: int = 0,
) -> dict[str, Any]:
    """Score every sample's map; missing maps count as n/a. Returns the DESIGN 8 JSON shape:
    ``{"metrics": {id: {"mean", "n", "n_na", "per_sample": {sample_id: value or null}}}}``."""
    dataset = open_dataset(registry, dataset_name)
    component_worker.install()  # a plugin's model: a proxy, its code in a worker
    model: Model | None = registry.create("model", model_name) if model_name else None
    if metric_ids is None:
        metric_ids = [
            e.info.name for e in registry.entries("metric") if e.cls.default and (model or e.cls.family == "alignment")
        ]
    chosen = select_metrics(registry, metric_ids)  # selectors as for `xaibench run --metric`
    metrics: list[Metric] = [registry.create("metric", m, **dict(params)) for m, params in chosen.items()]
    samples = list(dataset.samples())
    maps: dict[str, np.ndarray] = {}
    failures: dict[str, str] = {}
    for s in samples:
        path = explanations / f"{s.id}.npy"
        if path.exists():
            maps[s.id] = load_map(path)
        else:
            failures[s.id] = "no explanation file"
    known = {s.id for s in samples}
    strays = sorted(p.stem for p in explanations.glob("*.npy") if p.stem not in known)
    if strays and not maps:
        raise XaibenchError(f"{explanations}: no file matches a sample id of {dataset_name!r} (e.g. {strays[0]}.npy)")
    spec = TrackSpec(name=f"score:{dataset_name}", dataset=dataset_name, model=model_name or "")
    track = build_track(spec, dataset, model, samples, batch_size=FORWARD_BATCH)
    values, refused = check_maps(track, maps)
    failures.update(refused)
    per_sample: dict[str, dict[str, float | None]] = {m.name: {} for m in metrics}
    for scores in score_track(
        track, metrics, values, failures, explainer=None, seed=seed, kind="saliency", batch_size=METRIC_BATCH
    ):
        for score in scores:
            per_sample[score.metric.name][score.sample_id] = score.value
    result: dict[str, Any] = {"metrics": {}}
    for m in metrics:
        values = {s.id: per_sample[m.name].get(s.id) for s in samples}
        found = [v for v in values.values() if v is not None]  # in sample order, as a run summary averages
        result["metrics"][m.name] = {
            "mean": float(np.mean(found)) if found else None,
            "n": len(found),
            "n_na": len(values) - len(found),
            "per_sample": values,
        }
    return result
