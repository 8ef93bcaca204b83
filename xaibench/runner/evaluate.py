"""Scoring explanations with metrics, batch by batch, into per-sample records."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xaibench.api import Explainer, Metric, MetricInput, MetricOutput
from xaibench.runner.cache import digest
from xaibench.runner.track import TrackContext
from xaibench.seeds import derive_seed


@dataclass(frozen=True)
class RecordKeyer:
    """Stable keys: a record is reused only for identical explainer, model, data, metric and seed."""

    track: TrackContext
    explainer_name: str
    explainer_version: str
    explainer_params: dict[str, Any]
    seed: int

    def __call__(self, metric: Metric, sample_id: str) -> str:
        return digest(
            {
                "track": self.track.spec.name,
                "explainer": [self.explainer_name, self.explainer_version, self.explainer_params],
                "model": self.track.model.identity,
                "dataset": self.track.dataset.revision,
                "metric": [metric.name, metric.version, dict(metric.params)],
                "seed": self.seed,
                "sample": [sample_id, self.track.digests[sample_id]],
            }
        )


def metric_record(metric: Metric) -> dict[str, Any]:
    return {
        "id": metric.name,
        "version": metric.version,
        "family": metric.family,
        "direction": metric.direction,
        "params": dict(metric.params),
    }


def score_track(
    track: TrackContext,
    metrics: Sequence[Metric],
    explanations: dict[str, Any],
    failures: dict[str, str],
    *,
    explainer: Explainer | None,
    keyer: Callable[[Metric, str], str],
    done: Callable[[str], bool],
    seed: int,
    kind: str = "saliency",
    batch_size: int = 16,
) -> Iterator[list[dict[str, Any]]]:
    """Yield lists of records (one list per batch) for every (metric, sample) not ``done``.

    Samples whose explanation failed get n/a with the explainer's reason. A metric
    that raises gives n/a for that batch with its error; the others go on.
    """
    index = track.sample_index()
    ids = [s.id for s in track.samples]
    failed = [sid for sid in ids if sid in failures]
    if failed:
        records = [
            _record(keyer(m, sid), m, sid, None, failures[sid], None, None, 0.0)
            for m in metrics
            for sid in failed
            if not done(keyer(m, sid))
        ]
        if records:
            yield records
    valid = [sid for sid in ids if sid in explanations]
    for start in range(0, len(valid), batch_size):
        chunk = valid[start : start + batch_size]
        pending = [m for m in metrics if any(not done(keyer(m, sid)) for sid in chunk)]
        if not pending:
            continue
        rows = [index[sid] for sid in chunk]
        saliency = np.stack([explanations[sid] for sid in chunk]) if kind == "saliency" else None
        concepts = [explanations[sid] for sid in chunk] if kind == "concept" else None
        batch = MetricInput(
            saliency=saliency,
            concepts=concepts,
            samples=[track.samples[r] for r in rows],
            targets=track.targets[rows],
            inputs=track.inputs[rows],
            model=track.model,
            forward=track.forward,
            explainer=explainer,
            seed=derive_seed(seed, "metrics"),
        )
        records: list[dict[str, Any]] = []
        for metric in pending:
            started = time.perf_counter()
            before = track.forward.images
            output = _safe_score(metric, batch, kind)
            seconds = (time.perf_counter() - started) / len(chunk)
            passes = output.forward_passes or (track.forward.images - before)
            for j, sid in enumerate(chunk):
                key = keyer(metric, sid)
                if done(key):
                    continue
                value = float(output.values[j])
                reason = output.reasons[j] if j < len(output.reasons) else None
                if not np.isfinite(value):
                    value, reason = None, reason or "metric returned NaN"
                else:
                    reason = None
                curve = output.curves[j] if output.curves else None
                extras = output.extras[j] if output.extras else None
                records.append(_record(key, metric, sid, value, reason, curve, extras, seconds, passes / len(chunk)))
        yield records


def _round_floats(obj: Any, digits: int = 6) -> Any:
    """Curves keep 6 significant digits: plenty for plots, a third of the bytes."""
    if isinstance(obj, dict):
        return {k: _round_floats(v, digits) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_round_floats(v, digits) for v in obj]
    if isinstance(obj, np.ndarray):
        return _round_floats(obj.tolist(), digits)
    if isinstance(obj, float | np.floating):
        return float(f"{float(obj):.{digits}g}")
    return obj


def _safe_score(metric: Metric, batch: MetricInput, kind: str) -> MetricOutput:
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
    return output


def _record(
    key: str,
    metric: Metric,
    sample_id: str,
    value: float | None,
    reason: str | None,
    curve: dict[str, Any] | None,
    extras: dict[str, Any] | None,
    seconds: float,
    forward_passes: float = 0.0,
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "key": key,
        "metric": metric.name,
        "sample_id": sample_id,
        "value": value,
        "na_reason": reason,
        "wall_time_s": round(seconds, 6),
        "forward_passes": forward_passes,
    }
    if curve:
        record["curve"] = _round_floats(curve)
    if extras:
        record["extras"] = extras
    return record
