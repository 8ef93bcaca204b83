"""Synthetic results at the field's scale: per-sample records and submission files, seeded.

Nothing computes an explanation. The numbers follow each metric family's usual range and
direction, per sample (``sample difficulty + explainer offset + noise``, so paired comparisons
have power and rankings are not trivial):

- alignment, faithfulness (AUCs), other, synthetic ``m_<k>``: in [0, 1] (a logistic of the sum);
- robustness: positive and right-skewed (a log-normal), lower is better;
- perceptual (``pasta_q*``): ratings in [1, 5];
- sanity: in [-1, 1], lower is better, most explainers well below the 0.5 flag.

An explainer's offset is its quality (spread evenly, then shuffled by the seed); values rise or fall
metric's direction; explainers ``2k`` and ``2k + 1`` with ``k % 5 == 0`` share one quality, so
some pairs tie. Each (track, explainer, metric) has an n/a share drawn in ``[0, na_max]``
(5 % by default) with the family's usual reasons. Deletion and insertion records carry their
51-point probability curve, as the built-in metrics write them.

Metric ids are the built-in metrics' (read from their registration, :func:`builtin_metrics`: the
ranking ones first, with their family and direction), then ``m_<k>`` (family and direction in turn) beyond the
catalogue. Records have the keys and fields of :class:`xaibench.runner.records.RecordMaker` and
are written through :meth:`xaibench.runner.storage.store.RecordStore.append`; submissions are built from
a run summary (:func:`xaibench.stats.summarise`, :func:`~xaibench.runner.distributions.distribution_summary`)
by :func:`xaibench.publish.submission.write_submissions`, so both follow the project's formats.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from xaibench.errors import XaibenchError
from xaibench.publish.submission import write_submissions
from xaibench.publish.submission_files import SCHEMA_V1, per_sample
from xaibench.runner import KEY_VERSION, RECORD_SCHEMA, RecordStore, digest, distribution_summary, track_journal
from xaibench.stats import INTERVAL_RULE, summarise


def builtin_metrics() -> tuple[tuple[str, str, str, bool], ...]:
    """(id, family, direction, ranking) of every built-in metric, read from a registry of the
    built-in plugins (no entry points): the ranking ones first, then by family in display order
    (:func:`xaibench.families.family_index`), then by id. Never a copy: a new built-in metric joins
    the synthetic results by itself."""
    from xaibench.families import family_index
    from xaibench.plugins.manager import Registry

    classes = [e.cls for e in Registry(load_entry_points=False).entries("metric")]
    ordered = sorted(classes, key=lambda c: (not c.ranking, family_index(c.family), c.name))
    return tuple((c.name, c.family, c.direction, bool(c.ranking)) for c in ordered)


BUILTIN_METRICS: tuple[tuple[str, str, str, bool], ...] = builtin_metrics()
"""Built-in metrics as ``xaibench list metrics`` describes them (:func:`builtin_metrics`)."""

BUILTIN_EXPLAINERS: tuple[str, ...] = (
    "gradient", "integrated-gradients", "smoothgrad", "gradcam", "gradcampp", "scorecam", "layercam",
    "xgradcam", "eigencam", "hirescam", "ablationcam", "fullgrad", "deeplift", "gradient-shap",
    "guided-backprop", "input-x-gradient", "kernel-shap", "lime", "occlusion", "rise", "saliency",
    "sobel", "zennit-lrp", "lrp-epsilon-plus-flat", "excitation-backprop", "eigengradcam", "center",
    "random", "oracle",
)  # fmt: skip
"""Built-in explainer names used first; ``x_<k>`` beyond them."""

CURVE_METRICS = ("deletion", "insertion")
CURVE_POINTS = 51  # the built-in deletion and insertion: 50 steps, 51 points
NA_REASONS = {
    "alignment": ("empty ground truth", "mask smaller than one pixel"),
    "faithfulness": ("constant explanation", "model output saturated"),
    "robustness": ("perturbation changed the prediction", "constant explanation"),
    "ground_truth": ("no known answer",),
    "perceptual": ("image too small for the rater",),
    "sanity": ("constant explanation",),
    "other": ("constant explanation",),
}
SYNTHETIC_CYCLE = (("alignment", "higher"), ("faithfulness", "lower"), ("other", "higher"), ("faithfulness", "higher"))


@dataclass(frozen=True)
class MetricSpec:
    """One metric of the synthetic results: its id, family, direction (which values are better),
    whether it ranks, and its version."""

    id: str
    family: str
    direction: str
    ranking: bool
    version: str = "1.0.0"


@dataclass(frozen=True)
class ScaleSpec:
    """How many tracks, explainers, metrics and samples (per track); the seed; the largest n/a
    share of one (track, explainer, metric), in [0, 1]."""

    tracks: int = 20
    explainers: int = 50
    metrics: int = 40
    samples: int = 100
    seed: int = 0
    na_max: float = 0.05

    def __post_init__(self) -> None:
        for name in ("tracks", "explainers", "metrics", "samples"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise XaibenchError(f"scale spec: {name} must be a whole number of at least 1, got {value!r}")
        if not 0.0 <= self.na_max < 1.0:
            raise XaibenchError(f"scale spec: na_max must be in [0, 1), got {self.na_max!r}")

    @property
    def n_records(self) -> int:
        return self.tracks * self.explainers * self.metrics * self.samples


def metric_specs(n: int) -> list[MetricSpec]:
    """``n`` metrics: the built-in ones of :data:`BUILTIN_METRICS` first, then ``m_<k>``."""
    out = [MetricSpec(*m) for m in BUILTIN_METRICS[:n]]
    for k in range(len(out), n):
        family, direction = SYNTHETIC_CYCLE[k % len(SYNTHETIC_CYCLE)]
        out.append(MetricSpec(f"m_{k}", family, direction, False))
    return out


def explainer_names(n: int) -> list[str]:
    """``n`` explainer names: built-in names first, then ``x_<k>``."""
    return list(BUILTIN_EXPLAINERS[:n]) + [f"x_{k}" for k in range(len(BUILTIN_EXPLAINERS), n)]


def track_names(n: int) -> list[str]:
    return [f"synth-{k:02d}" for k in range(n)]


def sample_ids(n: int) -> list[str]:
    return [f"s{k:05d}" for k in range(n)]


class ScaleData:
    """The synthetic results of a :class:`ScaleSpec`: values and n/a reasons, drawn on demand,
    the same for the same spec (each (track, explainer, metric) draws from its own seed)."""

    def __init__(self, spec: ScaleSpec) -> None:
        self.spec = spec
        self.metrics = metric_specs(spec.metrics)
        self.explainers = explainer_names(spec.explainers)
        self.tracks = track_names(spec.tracks)
        self.samples = sample_ids(spec.samples)
        rng = np.random.default_rng([spec.seed, 0])
        quality = np.linspace(-1.0, 1.0, spec.explainers) if spec.explainers > 1 else np.zeros(1)
        quality = quality[rng.permutation(spec.explainers)]
        for k in range(0, spec.explainers - 1, 2):
            if (k // 2) % 5 == 0:
                quality[k + 1] = quality[k]  # a tied pair
        self.quality = {x: float(q) for x, q in zip(self.explainers, quality, strict=True)}
        """Explainer -> quality in [-1, 1] (1 best on every metric)."""

    def _rng(self, *parts: int) -> np.random.Generator:
        return np.random.default_rng([self.spec.seed, *parts])

    def values(self, track: int, explainer: int, metric: int) -> tuple[np.ndarray, list[str | None]]:
        """Per-sample values (NaN for n/a) and n/a reasons (None where there is a value) of one
        (track, explainer, metric), by index."""
        m = self.metrics[metric]
        n = self.spec.samples
        difficulty = self._rng(1, track, metric).normal(0.0, 1.0, n)  # shared by every explainer
        rng = self._rng(2, track, explainer, metric)
        sign = 1.0 if m.direction == "higher" else -1.0
        # z: how well the explainer does on each sample (higher is better, whatever the direction)
        z = difficulty + 0.6 * self.quality[self.explainers[explainer]] + rng.normal(0.0, 0.5, n)
        if m.family == "robustness":
            x = np.exp(-0.8 * z - 1.0)  # positive and right-skewed; doing better is smaller
        elif m.family == "perceptual":
            x = 1.0 + 4.0 / (1.0 + np.exp(-sign * z))
        elif m.family == "sanity":
            x = np.tanh(0.4 * sign * z - (0.3 if sign < 0 else 0.0))
        else:
            x = 1.0 / (1.0 + np.exp(-sign * z))
        x = np.round(x, 6)
        share = rng.uniform(0.0, self.spec.na_max)
        na = rng.random(n) < share
        reasons_of = NA_REASONS.get(m.family, NA_REASONS["other"])
        picks = rng.integers(0, len(reasons_of), n)
        x[na] = np.nan
        reasons = [reasons_of[p] if missing else None for missing, p in zip(na, picks, strict=True)]
        return x, reasons

    def curve(self, value: float, metric: MetricSpec) -> dict[str, Any]:
        """A deletion (falling) or insertion (rising) probability curve whose area is about ``value``."""
        f = np.linspace(0.0, 1.0, CURVE_POINTS)
        k = max(0.05, min(20.0, (1.0 - value) / max(value, 1e-3)))
        y = (1.0 - f) ** k if metric.id == "deletion" else 1.0 - (1.0 - f) ** (1.0 / k)
        return {"fraction": [round(float(v), 6) for v in f], "probability": [float(f"{v:.6g}") for v in y], "steps": 50}

    # ------------------------------------------------------------------------------ provenance

    def explainer_block(self, name: str) -> dict[str, Any]:
        return {
            "name": name,
            "version": "1.0.0",
            "kind": "saliency",
            "params": {},
            "params_digest": digest({})[:12],
            "distribution": "xaibench-scale",
            "distribution_version": "0.0.0",
            "reference_only": name == "oracle",
            "tuned_on_benchmark": False,
        }

    def provenance(self, track: str) -> dict[str, Any]:
        return {
            "track": track,
            "synthetic": True,
            "dataset": {"name": "shapes", "revision": f"rev-{track}", "params": {}},
            "model": {"name": "shapes-cnn", "identity": f"shapes-cnn@{track}", "params": {}},
            "target": "predicted",
            "n_samples": self.spec.samples,
        }

    def metric_block(self, m: MetricSpec) -> dict[str, Any]:
        return {"id": m.id, "version": m.version, "family": m.family, "direction": m.direction, "params": {}}

    # -------------------------------------------------------------------------------- records

    def records(self, track: int, explainer: int) -> Iterator[dict[str, Any]]:
        """The records of one (track, explainer), in :class:`~xaibench.runner.records.RecordMaker`'s shape."""
        t, name = self.tracks[track], self.explainers[explainer]
        block = self.explainer_block(name)
        prov = self.provenance(t)
        for mi, m in enumerate(self.metrics):
            values, reasons = self.values(track, explainer, mi)
            info = self.metric_block(m)
            for si, sample in enumerate(self.samples):
                value = None if math.isnan(values[si]) else float(values[si])
                key = {
                    "track": t,
                    "explainer": [name, "1.0.0", {}],
                    "model": prov["model"]["identity"],
                    "dataset": prov["dataset"]["revision"],
                    "metric": [m.id, m.version, {}],
                    "seed": self.spec.seed,
                    "sample": [sample, digest(sample)[:16]],
                    "batch_size": 16,
                }
                record: dict[str, Any] = {
                    "key": digest(key),
                    "key_version": KEY_VERSION,
                    "metric": m.id,
                    "sample_id": sample,
                    "value": value,
                    "na_reason": reasons[si],
                    "wall_time_s": 0.001,
                    "forward_passes": 51 if m.id in CURVE_METRICS else 0,
                }
                if value is not None and m.id in CURVE_METRICS:
                    record["curve"] = self.curve(value, m)
                record.update(
                    {
                        "schema": RECORD_SCHEMA,
                        "track": t,
                        "explainer": block,
                        "model": prov["model"]["identity"],
                        "dataset": {"name": prov["dataset"]["name"], "revision": prov["dataset"]["revision"]},
                        "seed": self.spec.seed,
                        "xaibench": "0.0.0-scale",
                        "platform": "linux",
                        "device": "cpu",
                        "torch": "2",
                        "torch_threads": 1,
                        "batch_size": 16,
                        "metric_info": info,
                        "target": {"class": si % 10, "source": "predicted"},
                    }
                )
                yield record

    def write_records(self, workdir: Path, *, batch: int = 10_000) -> int:
        """Append every record to ``<workdir>/results/<track>.jsonl`` through
        :meth:`RecordStore.append`; returns how many were written."""
        written = 0
        for ti, track in enumerate(self.tracks):
            store = RecordStore(track_journal(workdir / "results", track))
            pending: list[dict[str, Any]] = []
            for xi in range(len(self.explainers)):
                for record in self.records(ti, xi):
                    pending.append(record)
                    if len(pending) >= batch:
                        store.append(pending)
                        written += len(pending)
                        pending = []
            if pending:
                store.append(pending)
                written += len(pending)
        return written

    # ---------------------------------------------------------------------------- submissions

    def summary(self, explainer: int) -> dict[str, Any]:
        """The run summary (``summary.json``'s shape) of one explainer on every track."""
        name = self.explainers[explainer]
        tracks: dict[str, Any] = {}
        for ti, t in enumerate(self.tracks):
            metrics: dict[str, Any] = {}
            for mi, m in enumerate(self.metrics):
                values, reasons = self.values(ti, explainer, mi)
                records = [
                    {
                        "sample_id": s,
                        "value": None if math.isnan(v) else float(v),
                        "na_reason": r,
                        "forward_passes": 51 if m.id in CURVE_METRICS else 0,
                    }
                    for s, v, r in zip(self.samples, values.tolist(), reasons, strict=True)
                ]
                if m.id in CURVE_METRICS:  # the mean curve and its quartiles, as a run summarises them
                    for record in records:
                        if record["value"] is not None:
                            record["curve"] = self.curve(record["value"], m)
                metrics[m.id] = {
                    **self.metric_block(m),
                    "ranking": m.ranking,
                    **summarise(records, seed=self.spec.seed, track=t),
                    **distribution_summary(records),
                }
            tracks[t] = {
                "provenance": self.provenance(t),
                "explainers": {
                    name: {
                        "explainer": self.explainer_block(name),
                        "explain_seconds": 1.0,
                        "explained": {"computed": self.spec.samples, "cached": 0, "failed": 0},
                        "metrics": metrics,
                    }
                },
            }
        run = {
            "xaibench": "0.0.0-scale",
            "python": "3.11",
            "torch": "2",
            "platform": "linux",
            "device": "cpu",
            "torch_threads": 1,
            "suite": "scale",
            "seed": self.spec.seed,
            "intervals": INTERVAL_RULE,
            "limit": self.spec.samples,
            "started": "2026-01-01T00:00:00+00:00",
            "batch_size": 16,
            "plugins": [],
        }
        return {"schema": "xaibench.summary/1", "run": run, "tracks": tracks}

    def write_submissions(
        self, folder: Path, explainers: int | None = None, *, only: Sequence[int] | None = None
    ) -> list[Path]:
        """Write the submission of each of the first ``explainers`` explainers (all by default;
        ``only``: these explainer indices instead) into ``folder`` with the project's writer;
        returns the files."""
        folder.mkdir(parents=True, exist_ok=True)
        registry: Any = _DefaultParams()
        written: list[Path] = []
        chosen = only if only is not None else range(len(self.explainers) if explainers is None else explainers)
        for xi in chosen:
            written += write_submissions(self.summary(xi), registry, folder)  # type: ignore[arg-type]
        return written


class _DefaultParams:
    """The one part of a registry the submission writer asks: an explainer's default parameters
    (here ``{}``, so each file is ``<name>.json``)."""

    def entry(self, kind: str, name: str) -> Any:
        return SimpleNamespace(cls=SimpleNamespace(default_params={}))


def write_scale_records(workdir: Path, spec: ScaleSpec) -> int:
    """Write the records of ``spec`` into ``workdir`` (see :meth:`ScaleData.write_records`)."""
    return ScaleData(spec).write_records(workdir)


def write_scale_submissions(folder: Path, spec: ScaleSpec, explainers: int | None = None) -> list[Path]:
    """Write the submissions of ``spec`` into ``folder`` (see :meth:`ScaleData.write_submissions`)."""
    return ScaleData(spec).write_submissions(folder, explainers)


def as_v1(data: dict[str, Any]) -> dict[str, Any]:
    """The same submission in the ``xaibench.submission/1`` layout (a sample id -> value map per
    metric instead of ``/2``'s ``sample_ids`` and ``values``): what an older xaibench wrote."""
    out = copy.deepcopy(data)
    out["schema"] = SCHEMA_V1
    for track in out["tracks"].values():
        for block in track["metrics"].values():
            block["samples"] = per_sample(track, block)
            del block["values"]
        del track["sample_ids"]
    return out
