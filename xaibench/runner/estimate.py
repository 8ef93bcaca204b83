"""A rough time estimate of a track's work, printed before a run that will take more than a minute.

The unit is the model *forward pass of one image*. Each metric states what one sample costs it
(``Metric.cost``, :mod:`xaibench.metric_cost`): forward passes and explanations, from its
parameters and the model input's size; this module only adds them up. An explanation counts
:data:`EXPLANATION_COST` forward passes (a forward and a backward), explaining a sample one more,
and a pass that metrics of a batch share (the robustness family's perturbed inputs, ROAD's
curves) is counted once. A metric that states no cost (a plugin's) is left out of the count and
said once per run (:func:`unknown_line`): the estimate is then a lower bound ("at least"), never
a guess. The seconds per image come from timing one small batch of the track's clean forward
(:func:`images_per_second`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from xaibench.api import Metric
from xaibench.metric_cost import PartCost, evaluate_cost
from xaibench.runner.track import TrackContext

EXPLANATION_COST = 3.0
"""Forward-pass equivalents of one explanation of one image (a gradient: forward + backward)."""
REPORT_ABOVE_S = 60.0
"""An estimate above this many seconds is printed."""
DEFAULT_PIXELS = 224 * 224
"""The input size (pixels) a cost is computed for when no track gives one (a 224 px model)."""


def metric_parts(metric: Metric, pixels: int = DEFAULT_PIXELS) -> tuple[PartCost, ...] | None:
    """The parts of what one sample costs ``metric`` with its parameters on inputs of ``pixels``
    pixels, as it states them; ``None`` when it states none (or its statement cannot be computed
    from these parameters)."""
    try:
        return evaluate_cost(getattr(metric, "cost", None), dict(metric.params), pixels)
    except (TypeError, ValueError):
        return None


def part_cost(part: PartCost) -> float:
    """Forward-pass equivalents of one part: its forward passes plus its explanations."""
    return part.forward_passes + part.explanations * EXPLANATION_COST


def metric_cost(metric: Metric, pixels: int = DEFAULT_PIXELS) -> float | None:
    """Forward-pass equivalents ``metric`` needs per sample; ``None`` when it states no cost."""
    parts = metric_parts(metric, pixels)
    return None if parts is None else sum(part_cost(p) for p in parts)


def metrics_cost(metrics: Sequence[Metric], pixels: int = DEFAULT_PIXELS) -> float:
    """Forward-pass equivalents per sample of those of ``metrics`` that state a cost, a shared
    pass counted once (:attr:`~xaibench.metric_cost.MetricCost.shared`)."""
    seen: set[tuple[str, str]] = set()
    total = 0.0
    for metric in metrics:
        for part in metric_parts(metric, pixels) or ():
            if part.shared is not None:
                if part.shared in seen:
                    continue
                seen.add(part.shared)
            total += part_cost(part)
    return total


def unknown_costs(metrics: Sequence[Metric], pixels: int = DEFAULT_PIXELS) -> tuple[str, ...]:
    """The names of those of ``metrics`` that state no cost (left out of :func:`metrics_cost`)."""
    return tuple(m.name for m in metrics if metric_parts(m, pixels) is None)


def unknown_line(names: Sequence[str]) -> str:
    """The one line a run says about metrics that state no cost."""
    plural = len(names) > 1
    return (
        f"estimate: metric{'s' if plural else ''} {', '.join(names)} state{'' if plural else 's'} no cost "
        f"(Metric.cost): the time estimates leave {'them' if plural else 'it'} out"
    )


@dataclass(frozen=True)
class Estimate:
    """The work of one track: ``forward_passes`` (image forwards, explanations included) at
    ``images_per_second``; ``seconds`` = forward_passes / images_per_second. ``unknown``: the
    metrics left out for stating no cost (the estimate is then a lower bound)."""

    metrics: int
    explainers: int
    samples: int
    forward_passes: float
    images_per_second: float
    unknown: tuple[str, ...] = ()

    @property
    def seconds(self) -> float:
        return self.forward_passes / self.images_per_second if self.images_per_second > 0 else math.inf

    def line(self, track: str) -> str:
        """``estimate: about 3 min for track T (5 metrics x 3 explainers x 8 samples, ~2400
        forward passes at 40 images/s)``; ``at least``, and the metrics of unknown cost counted,
        when some are left out."""
        bound = f"at least {duration(self.seconds)}" if self.unknown else f"about {duration(self.seconds)}"
        left_out = f"; {len(self.unknown)} of unknown cost left out" if self.unknown else ""
        return (
            f"estimate: {bound} for track {track} ({self.metrics} metrics x "
            f"{self.explainers} explainers x {self.samples} samples, ~{round(self.forward_passes)} forward passes "
            f"at {self.images_per_second:.3g} images/s{left_out})"
        )


def estimate(
    metrics: Sequence[Metric],
    samples: Sequence[int],
    images_per_second: float,
    *,
    explain: bool = True,
    pixels: int = DEFAULT_PIXELS,
) -> Estimate:
    """The work of scoring ``metrics`` for explainers that have ``samples[i]`` samples to do each
    (0: nothing left, e.g. resumed): per (explainer, sample) one explanation (when ``explain``)
    plus the cost every metric states for inputs of ``pixels`` pixels."""
    per_sample = metrics_cost(metrics, pixels) + (EXPLANATION_COST if explain else 0.0)
    todo = [n for n in samples if n > 0]
    return Estimate(
        len(metrics),
        len(todo),
        max(todo, default=0),
        sum(todo) * per_sample,
        images_per_second,
        unknown_costs(metrics, pixels),
    )


def duration(seconds: float) -> str:
    """``45 s``, ``3 min``, ``1 h 20 min`` (rounded; ``?`` when unknown)."""
    if not math.isfinite(seconds):
        return "? min"
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def input_pixels(track: TrackContext) -> int:
    """Pixels per model input of ``track`` (``H * W``), :data:`DEFAULT_PIXELS` without inputs."""
    if track.inputs is None:
        return DEFAULT_PIXELS
    return int(track.inputs.shape[-2]) * int(track.inputs.shape[-1])


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
