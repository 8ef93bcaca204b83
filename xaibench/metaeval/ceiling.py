"""The human ceiling of alignment metrics on ``human-attention`` (DESIGN 9, reported).

The dataset measures several kinds of human map per image (eye fixations in three tasks, serial
reproduction, discrimination, patch ratings). How well can one human map "explain" another? For
every ordered pair (A, B) of the measured kinds (``humanPC``, derived from the others, is left out),
each alignment metric scores the kind-A maps as explanations against the kind-B maps as ground
truth, through the runner's own scoring (:func:`xaibench.runner.evaluate.score_track`, as
``xaibench score`` does; no model). The ceiling is the mean over the pairs of each pair's mean.
An explainer's alignment is then also reported as a fraction of it: value / ceiling for a metric
where higher is better, ceiling / value where lower is better (1 = as good as a human's map).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xaibench.api import TrackSpec
from xaibench.datasets.real.human_attention import MAP_KINDS
from xaibench.plugins.manager import Registry
from xaibench.runner import build_track, check_maps, open_dataset, score_track

DATASET = "human-attention"
DERIVED = ("humanPC",)
MEASURED: tuple[str, ...] = tuple(k for k in MAP_KINDS if k not in DERIVED)
TEST = "human-ceiling"


@dataclass
class Ceiling:
    """One metric's human ceiling: the mean over ordered pairs of kinds, each pair's mean, and
    the explainers' fractions of it (see the module doc)."""

    value: float
    pairs: dict[str, float]
    n: int
    fractions: dict[str, float] = field(default_factory=dict)


def human_ceiling(
    registry: Registry,
    metric_names: Sequence[str],
    *,
    dataset_params: Mapping[str, Any] | None = None,
    limit: int | None = None,
    seed: int = 0,
) -> dict[str, Ceiling]:
    """The ceiling of each metric of ``metric_names`` on ``human-attention`` built with
    ``dataset_params`` (its ``map_kind`` replaced by each measured kind; the root must be found,
    e.g. through ``XAIBENCH_DATA_DIR``), over its first ``limit`` images."""
    metrics = [registry.create("metric", name) for name in metric_names]
    base = {k: v for k, v in (dataset_params or {}).items() if k != "map_kind"}
    datasets = {kind: open_dataset(registry, DATASET, {**base, "map_kind": kind}, limit=limit) for kind in MEASURED}
    samples = {kind: list(dataset.samples(limit)) for kind, dataset in datasets.items()}
    totals: dict[str, dict[str, float]] = {m.name: {} for m in metrics}
    counts: dict[str, int] = {m.name: 0 for m in metrics}
    for truth in MEASURED:
        spec = TrackSpec(name=f"ceiling:{truth}", dataset=DATASET, model="", dataset_params={**base, "map_kind": truth})
        track = build_track(spec, datasets[truth], None, samples[truth])
        for explained in MEASURED:
            if explained == truth:
                continue
            maps = {s.id: s.ground_truth.multilevel() for s in samples[explained] if s.ground_truth is not None}
            values, failures = check_maps(track, {k: v for k, v in maps.items() if v is not None})
            per: dict[str, list[float]] = {m.name: [] for m in metrics}
            for batch in score_track(track, metrics, values, failures, explainer=None, seed=seed, kind="saliency"):
                for score in batch:
                    if score.value is not None:
                        per[score.metric.name].append(float(score.value))
            for name, found in per.items():
                if found:
                    totals[name][f"{explained}->{truth}"] = float(np.mean(found))
                    counts[name] = max(counts[name], len(found))
    return {
        name: Ceiling(float(np.mean(list(pairs.values()))), pairs, counts[name])
        for name, pairs in totals.items()
        if pairs
    }


def fractions(ceiling: Ceiling, direction: str, means: Iterable[tuple[str, Any]]) -> dict[str, float]:
    """Each explainer's mean as a fraction of ``ceiling`` (see the module doc); ``None`` means left out."""
    out: dict[str, float] = {}
    for explainer, mean in means:
        if mean is None:
            continue
        if direction == "lower":
            if mean > 0:
                out[explainer] = ceiling.value / float(mean)
        elif ceiling.value:
            out[explainer] = float(mean) / ceiling.value
    return out
