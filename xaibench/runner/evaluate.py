"""Scoring explanations with metrics, batch by batch, into per-sample scores.

The one scoring path of ``xaibench run`` and ``xaibench score``: the same batches, the same
metric seed (``derive_seed(seed, "metrics")``) and the same n/a rules, so identical maps get
identical values from both. Records are made from these scores in :mod:`xaibench.runner.records`.

A metric whose class is a stand-in for a third-party distribution
(:func:`~xaibench.plugins.manager.remote_distribution`) is never scored in this process: its
batches go to that distribution's worker process
(:class:`~xaibench.runner.isolation.metric_worker.MetricWorkers`), which rebuilds the batch from data and
runs the same :func:`score_batch`; the records come out the same shape. Every other metric (the
built-ins, and third-party code that this process imported, which only the in-process tests do)
is scored here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xaibench.api import Explainer, Metric, MetricInput, MetricOutput, modality_reason
from xaibench.kit import CONSTANT_MAP
from xaibench.plugins.manager import remote_distribution
from xaibench.runner.isolation.metric_worker import MetricWorkers, checked_output
from xaibench.runner.track import TrackContext, supports
from xaibench.seeds import derive_seed

Explanation = np.ndarray | dict[str, float]


@dataclass(frozen=True)
class SampleScore:
    """One metric's result on one sample: ``value`` is ``None`` when n/a, with ``na_reason``.

    ``wall_time_s`` is the metric's wall time per sample of its batch (seconds) and
    ``forward_passes`` the model forward passes (images) per sample of its batch.
    """

    metric: Metric
    sample_id: str
    value: float | None
    na_reason: str | None
    curve: dict[str, Any] | None = None
    extras: dict[str, Any] | None = None
    wall_time_s: float = 0.0
    forward_passes: float = 0.0


def metrics_seed(seed: int) -> int:
    """The seed every metric batch of a run (and of ``xaibench score``) gets."""
    return derive_seed(seed, "metrics")


def score_batch(metric: Metric, batch: MetricInput, kind: str) -> MetricOutput:
    """``metric.score(batch)``, isolated: a metric that does not apply to ``kind``, raises, or
    returns the wrong number of values gives n/a for the whole batch with the reason."""
    n = len(batch.samples)
    if kind not in metric.explanation_kinds:
        return MetricOutput.not_applicable(n, f"{metric.name} does not apply to {kind} explanations")
    try:
        output = metric.score(batch)
    except Exception as exc:  # noqa: BLE001 - isolate plugin and user code failures
        text = str(exc).splitlines()[0] if str(exc) else ""
        return MetricOutput.not_applicable(n, f"metric raised {type(exc).__name__}: {text}"[:300])
    if len(output.values) != n:
        return MetricOutput.not_applicable(n, f"metric returned {len(output.values)} values for {n} samples")
    return checked_output(output, n)  # absurd values or counts: the batch n/a in one line (issue 42)


def score_track(
    track: TrackContext,
    metrics: Sequence[Metric],
    explanations: Mapping[str, Explanation],
    failures: Mapping[str, str],
    *,
    explainer: Explainer | None,
    seed: int,
    kind: str = "saliency",
    batch_size: int = 16,
    wanted: Callable[[Metric, str], bool] | None = None,
    workers: MetricWorkers | None = None,
    timeout: float | None = None,
) -> Iterator[list[SampleScore]]:
    """Yield the scores of every (metric, sample) that is ``wanted`` (default: all), one list per batch.

    Samples whose explanation failed (``failures``: sample id -> reason) get n/a with that
    reason, first. The others are scored in track order, ``batch_size`` samples at a time (maps
    of different sizes, possible only in ``xaibench score`` without a model, go in separate
    batches). A metric that raises gives n/a for that batch with its error; the others go on.

    Stand-in metrics of third-party distributions are scored by ``workers`` (the run's, kept
    across tracks); without it, by metric workers started here (each batch limited to
    ``timeout`` seconds) and stopped when the iteration ends.
    """
    own = None
    if workers is None and any(remote_distribution(m) is not None for m in metrics):
        workers = own = MetricWorkers(timeout=timeout)
    try:
        yield from _score_track(
            track, metrics, explanations, failures, explainer, seed, kind, batch_size, wanted, workers
        )
    finally:
        if own is not None:
            own.close()


def _score_track(
    track: TrackContext,
    metrics: Sequence[Metric],
    explanations: Mapping[str, Explanation],
    failures: Mapping[str, str],
    explainer: Explainer | None,
    seed: int,
    kind: str,
    batch_size: int,
    wanted: Callable[[Metric, str], bool] | None,
    workers: MetricWorkers | None,
) -> Iterator[list[SampleScore]]:
    want = wanted or (lambda metric, sample_id: True)
    index = track.sample_index()
    ids = [s.id for s in track.samples]
    modality = track.modality
    unsupported = [m for m in metrics if not supports(m, modality)]
    if unsupported:  # n/a on every sample (a failed explanation's reason first; DESIGN 12)
        scores = [
            SampleScore(m, sid, None, failures.get(sid) or modality_reason("metric", m.name, m.modalities, modality))
            for m in unsupported
            for sid in ids
            if want(m, sid)
        ]
        if scores:
            yield scores
        metrics = [m for m in metrics if supports(m, modality)]
    failed = [sid for sid in ids if sid in failures]
    size = _map_size(track, explanations)
    constant = _constant_maps(failed, failures, kind) if size is not None else []
    if failed:
        scores = [
            SampleScore(m, sid, None, failures[sid])
            for m in metrics
            for sid in failed
            if want(m, sid) and not (sid in constant and m.scores_constant_maps)
        ]
        if scores:
            yield scores
    scorers = [m for m in metrics if m.scores_constant_maps]
    if constant and scorers:  # DESIGN 11: a constant map scores the worst value there, not n/a
        maps = dict.fromkeys(constant, np.zeros(size, dtype=np.float32))  # type: ignore[arg-type]
        yield from _score_track(track, scorers, maps, {}, explainer, seed, kind, batch_size, wanted, workers)
    valid = [sid for sid in ids if sid in explanations]
    for start in range(0, len(valid), batch_size):
        chunk = valid[start : start + batch_size]
        scores = []
        for group in _by_shape(chunk, explanations, kind):
            pending = [m for m in metrics if any(want(m, sid) for sid in group)]
            if not pending:
                continue
            rows = [index[sid] for sid in group]
            batch = MetricInput(
                saliency=np.stack([explanations[sid] for sid in group]) if kind == "saliency" else None,
                concepts=[explanations[sid] for sid in group] if kind == "concept" else None,
                samples=[track.samples[r] for r in rows],
                targets=track.targets[rows],
                inputs=track.inputs[rows] if track.inputs is not None else None,
                model=track.model,
                forward=track.forward,
                explainer=explainer,
                seed=metrics_seed(seed),
            )
            for metric in pending:
                scores += _score_metric(track, metric, batch, group, kind, want, workers)
        if scores:
            yield scores


def _constant_maps(failed: list[str], failures: Mapping[str, str], kind: str) -> list[str]:
    """The failed samples whose map was refused for being constant (saliency maps only)."""
    if kind != "saliency":
        return []
    return [sid for sid in failed if failures[sid] == CONSTANT_MAP]


def _map_size(track: TrackContext, explanations: Mapping[str, Explanation]) -> tuple[int, int] | None:
    """The size of the track's maps: the model's input, else any explanation's (``None``: neither)."""
    if track.inputs is not None:
        return int(track.inputs.shape[-2]), int(track.inputs.shape[-1])
    for value in explanations.values():
        return int(np.shape(value)[-2]), int(np.shape(value)[-1])
    return None


def _by_shape(chunk: list[str], explanations: Mapping[str, Explanation], kind: str) -> list[list[str]]:
    """``chunk`` split by map shape, in order of first appearance (one group for a run's maps)."""
    if kind != "saliency":
        return [chunk]
    groups: dict[tuple[int, ...], list[str]] = {}
    for sid in chunk:
        groups.setdefault(np.shape(explanations[sid]), []).append(sid)
    return list(groups.values())


def _score_metric(
    track: TrackContext,
    metric: Metric,
    batch: MetricInput,
    group: list[str],
    kind: str,
    want: Callable[[Metric, str], bool],
    workers: MetricWorkers | None,
) -> list[SampleScore]:
    """``metric``'s scores of ``group``: in its worker when it is a stand-in, else here. The wall
    time (seconds per sample, the worker's round trip included) and forward passes (images per
    sample; a worker reports its own count) are measured here."""
    started = time.perf_counter()
    before = track.forward.images if track.forward is not None else 0
    if workers is not None and remote_distribution(metric) is not None:
        output = workers.score(metric, batch, kind, track)
    else:
        output = score_batch(metric, batch, kind)
    seconds = (time.perf_counter() - started) / len(group)
    after = track.forward.images if track.forward is not None else 0
    passes = output.forward_passes or (after - before)
    scores: list[SampleScore] = []
    for j, sid in enumerate(group):
        if not want(metric, sid):
            continue
        value: float | None = float(output.values[j])
        reason = output.reasons[j] if j < len(output.reasons) else None
        if not np.isfinite(value):
            value, reason = None, reason or "metric returned NaN"
        else:
            reason = None
        curve = output.curves[j] if output.curves else None
        extras = output.extras[j] if output.extras else None
        scores.append(SampleScore(metric, sid, value, reason, curve, extras, seconds, passes / len(group)))
    return scores
