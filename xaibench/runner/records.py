"""Per-sample result records (``xaibench.record/1``, docs/results.md): built here and nowhere else.

A record joins one :class:`~xaibench.runner.evaluate.SampleScore` with the provenance of its
(track, explainer): the record key, the explainer block, model identity, dataset revision,
seed, xaibench version, platform, device, torch version and thread count, the metric block and
the explained class.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from xaibench.api import ComponentInfo, Explainer, Metric
from xaibench.runner.config import IN_PROCESS_EXECUTORS
from xaibench.runner.evaluate import SampleScore
from xaibench.runner.storage.cache import digest
from xaibench.runner.track import TrackContext

RECORD_SCHEMA = "xaibench.record/1"
KEY_VERSION = 2
"""What a record key covers, as records say in ``key_version``: 2 added the forward batch size
(``--batch-size``), which changes faithfulness values by float rounding; records without the
field were keyed by xaibench before that and are never reused (:func:`old_key_line`)."""


@dataclass(frozen=True)
class RecordKeyer:
    """Stable keys: a record is reused only for identical explainer, model, data, metric, seed,
    runtime (device, torch version, thread count: :func:`runtime_key`) and forward batch size."""

    track: TrackContext
    explainer_name: str
    explainer_version: str
    explainer_params: dict[str, Any]
    seed: int
    runtime: dict[str, Any] | None = None  # :func:`runtime_key` of the run: device, torch version, threads
    batch_size: int | None = None  # images per model forward pass: BLAS kernels, hence values, depend on it

    def __call__(self, metric: Metric, sample_id: str) -> str:
        model = self.track.model
        key: dict[str, Any] = {
            "track": self.track.spec.name,
            "explainer": [self.explainer_name, self.explainer_version, self.explainer_params],
            "model": model.identity if model is not None else None,
            "dataset": self.track.revision,
            "metric": [metric.name, metric.version, dict(metric.params)],
            "seed": self.seed,
            "sample": [sample_id, self.track.digests[sample_id]],
        }
        if self.runtime is not None:
            key["runtime"] = self.runtime
        if self.batch_size is not None:
            key["batch_size"] = self.batch_size
        return digest(key)


def runtime_key(environment: dict[str, Any]) -> dict[str, Any]:
    """What of the run's environment can change a number, hence enters record and cache keys: the
    device (its type and, for GPUs, the model name; not its index), the torch version and torch's
    intra-op thread count; and, for a run whose explainers ran in the runner's own process
    (``--executor inprocess``, trusted code only), that executor, so that its records and maps are
    never read by a sandboxed run (issue 42)."""
    key = {
        "device": [environment.get("device_type", "cpu"), environment.get("device_name", "cpu")],
        "torch": environment.get("torch"),
        "threads": environment.get("torch_threads"),
    }
    if environment.get("executor") in IN_PROCESS_EXECUTORS:
        key["executor"] = environment["executor"]
    return key


def metric_block(metric: Metric) -> dict[str, Any]:
    """The metric as records and summaries describe it (``metric_info``)."""
    return {
        "id": metric.name,
        "version": metric.version,
        "family": metric.family,
        "direction": metric.direction,
        "params": dict(metric.params),
    }


def explainer_block(explainer: Explainer, info: ComponentInfo) -> dict[str, Any]:
    """The explainer as records, summaries and submissions describe it (its provenance)."""
    return {
        "name": explainer.name,
        "version": explainer.version,
        "kind": explainer.kind,
        "params": dict(explainer.params),
        "params_digest": digest(dict(explainer.params))[:12],
        "distribution": info.distribution,
        "distribution_version": info.distribution_version,
        "reference_only": explainer.reference_only,
        "tuned_on_benchmark": explainer.tuned_on_benchmark,
    }


@dataclass(frozen=True)
class RecordMaker:
    """Makes the records of one (track, explainer) of a run."""

    track: TrackContext
    keyer: RecordKeyer
    explainer: dict[str, Any]  # the explainer block
    seed: int
    environment: dict[str, Any]  # the run's :func:`~xaibench.runner.run.environment`
    batch_size: int | None = None  # images per model forward pass (``--batch-size``)

    @classmethod
    def for_run(
        cls,
        track: TrackContext,
        explainer: Explainer,
        block: dict[str, Any],
        seed: int,
        environment: dict[str, Any],
        batch_size: int,
    ) -> RecordMaker:
        keyer = RecordKeyer(
            track, explainer.name, explainer.version, dict(explainer.params), seed, runtime_key(environment), batch_size
        )
        return cls(track=track, keyer=keyer, explainer=block, seed=seed, environment=environment, batch_size=batch_size)

    def key(self, metric: Metric, sample_id: str) -> str:
        return self.keyer(metric, sample_id)

    def record(self, score: SampleScore, index: dict[str, int]) -> dict[str, Any]:
        """The record of ``score``; ``index`` maps sample ids to rows of the track."""
        track = self.track
        record: dict[str, Any] = {
            "key": self.key(score.metric, score.sample_id),
            "key_version": KEY_VERSION,
            "metric": score.metric.name,
            "sample_id": score.sample_id,
            "value": score.value,
            "na_reason": score.na_reason,
            "wall_time_s": round(score.wall_time_s, 6),
            "forward_passes": score.forward_passes,
        }
        if score.curve:
            record["curve"] = round_floats(score.curve)
        if score.extras:
            record["extras"] = score.extras
        provenance = track.provenance
        record.update(
            {
                "schema": RECORD_SCHEMA,
                "track": track.spec.name,
                "explainer": self.explainer,
                "model": provenance["model"]["identity"],
                "dataset": {"name": track.spec.dataset, "revision": provenance["dataset"]["revision"]},
                "seed": self.seed,
                "xaibench": self.environment["xaibench"],
                "platform": self.environment["platform"],
                "device": self.environment.get("device", "cpu"),
                "torch": self.environment.get("torch"),
                "torch_threads": self.environment.get("torch_threads"),
                "batch_size": self.batch_size,
                "metric_info": metric_block(score.metric),
            }
        )
        row = index[score.sample_id]
        record["target"] = {"class": int(track.targets[row]), "source": track.target_sources[row]}
        return record


def old_key_line(path: Path, n: int) -> str:
    """The one line a run says about ``n`` records of ``path`` keyed before :data:`KEY_VERSION`."""
    return (
        f"{path}: {n} record{'s' if n != 1 else ''} from before the batch size was part of the record key "
        "(an older xaibench); they are kept but not reused: this run computes its own beside them "
        "(delete the file or pass another --workdir to drop them)"
    )


def unverified_line(path: Path, n: int) -> str:
    """The one line a run says about ``n`` records of ``path`` whose integrity tag is missing or wrong."""
    return (
        f"{path}: {n} record{'s' if n != 1 else ''} fail{'s' if n == 1 else ''} their integrity check "
        "(written by another process, or by an xaibench before records were tagged); "
        "they are ignored and recomputed"
    )


def round_floats(obj: Any, digits: int = 6) -> Any:
    """Curves keep 6 significant digits: plenty for plots, a third of the bytes."""
    if isinstance(obj, dict):
        return {k: round_floats(v, digits) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [round_floats(v, digits) for v in obj]
    if isinstance(obj, np.ndarray):
        return round_floats(obj.tolist(), digits)
    if isinstance(obj, float | np.floating):
        return float(f"{float(obj):.{digits}g}")
    return obj
