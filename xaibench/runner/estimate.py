"""A rough time estimate of a track's work, printed before a run that will take more than a minute.

The unit is the model *forward pass of one image*. Each metric costs a number of them per sample
(:func:`metric_cost`), read from what the bundled metrics record as ``forward_passes`` (a
summary's ``forward_passes_per_sample``): curve metrics (a ``steps`` parameter) about ``steps``,
ROAD (``thresholds``) 5 per threshold, metrics that re-run the explainer (``blocks``, ``n``)
that many explanations of :data:`EXPLANATION_COST` forward passes each (a forward and a
backward), ground-truth-only metrics none. A third-party metric that needs the model and has
none of those parameters gets :data:`UNKNOWN_COST`, a conservative guess. Explaining a sample
costs :data:`EXPLANATION_COST` too. The seconds per image come from timing one small batch of
the track's clean forward (:func:`images_per_second`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from xaibench.api import Metric
from xaibench.runner.track import TrackContext

EXPLANATION_COST = 3.0
"""Forward-pass equivalents of one explanation of one image (a gradient: forward + backward)."""
UNKNOWN_COST = 50.0
"""Forward passes per sample assumed for a model-based metric that declares nothing we can read."""
ROAD_PASSES_PER_THRESHOLD = 5.0
"""Forward passes per sample and ROAD threshold (measured: 50 for the 10 default thresholds)."""
REPORT_ABOVE_S = 60.0
"""An estimate above this many seconds is printed."""


def metric_cost(metric: Metric) -> float:
    """Forward-pass equivalents ``metric`` needs per sample (see the module doc)."""
    needs = set(metric.needs)
    params = dict(metric.params)
    if "model" not in needs and "explainer" not in needs:
        return 0.0
    if isinstance(params.get("steps"), int) and not isinstance(params["steps"], bool):
        return float(params["steps"]) + 1.0
    if isinstance(params.get("thresholds"), list | tuple):
        return ROAD_PASSES_PER_THRESHOLD * len(params["thresholds"])
    for key in ("blocks", "n", "nr_samples"):
        if isinstance(params.get(key), int) and not isinstance(params[key], bool):
            return (params[key] + 1) * EXPLANATION_COST
    if metric.family in ("alignment", "perceptual") or metric.name == "average_drop":
        return 1.0  # a clean or masked forward at most (PASTA's encoder: one image)
    return UNKNOWN_COST


def shared_pass(metric: Metric) -> tuple[Any, ...] | None:
    """The key of a perturbation pass ``metric`` shares with others of a batch, or ``None``: the
    robustness family's members with the same ``(n, radius)`` share one pass (DESIGN 3b;
    :mod:`xaibench.metrics.robustness.context`), whose cost is counted once."""
    if metric.family != "robustness":
        return None
    params = dict(metric.params)
    return ("robustness", params.get("n"), params.get("radius"))


def metrics_cost(metrics: Sequence[Metric]) -> float:
    """Forward-pass equivalents per sample of all of ``metrics``, a shared pass counted once."""
    seen: set[tuple[Any, ...]] = set()
    total = 0.0
    for metric in metrics:
        key = shared_pass(metric)
        if key is not None:
            if key in seen:
                continue
            seen.add(key)
        total += metric_cost(metric)
    return total


@dataclass(frozen=True)
class Estimate:
    """The work of one track: ``forward_passes`` (image forwards, explanations included) at
    ``images_per_second``; ``seconds`` = forward_passes / images_per_second."""

    metrics: int
    explainers: int
    samples: int
    forward_passes: float
    images_per_second: float

    @property
    def seconds(self) -> float:
        return self.forward_passes / self.images_per_second if self.images_per_second > 0 else math.inf

    def line(self, track: str) -> str:
        """``estimate: about 3 min for track T (5 metrics x 3 explainers x 8 samples, ~2400
        forward passes at 40 images/s)``."""
        return (
            f"estimate: about {duration(self.seconds)} for track {track} ({self.metrics} metrics x "
            f"{self.explainers} explainers x {self.samples} samples, ~{round(self.forward_passes)} forward passes "
            f"at {self.images_per_second:.3g} images/s)"
        )


def estimate(
    metrics: Sequence[Metric], samples: Sequence[int], images_per_second: float, *, explain: bool = True
) -> Estimate:
    """The work of scoring ``metrics`` for explainers that have ``samples[i]`` samples to do each
    (0: nothing left, e.g. resumed): per (explainer, sample) one explanation (when ``explain``)
    plus the cost of every metric."""
    per_sample = metrics_cost(metrics) + (EXPLANATION_COST if explain else 0.0)
    todo = [n for n in samples if n > 0]
    return Estimate(len(metrics), len(todo), max(todo, default=0), sum(todo) * per_sample, images_per_second)


def duration(seconds: float) -> str:
    """``45 s``, ``3 min``, ``1 h 20 min`` (rounded; ``?`` when unknown)."""
    if not math.isfinite(seconds):
        return "? min"
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def images_per_second(track: TrackContext, batch: int = 4) -> float | None:
    """Images per second of the track's model, from timing one clean forward of up to ``batch``
    of its inputs (a copy of its counter: the track's forward-pass counts stay as they were);
    ``None`` without a model."""
    if track.forward is None or track.inputs is None or len(track.inputs) == 0:
        return None
    forward = dataclasses.replace(track.forward, images=0, calls=0)
    x = track.inputs[:batch]
    started = time.perf_counter()
    forward(x)
    elapsed = time.perf_counter() - started
    return len(x) / max(elapsed, 1e-6)
