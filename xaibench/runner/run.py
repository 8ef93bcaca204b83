"""The run lifecycle: tracks -> explanations (cached) -> metric records -> summary + submissions.

See docs/architecture.md for the diagram.
"""

from __future__ import annotations

import datetime as dt
import platform
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from xaibench import __version__
from xaibench.api import Explainer, Metric, TrackSpec
from xaibench.errors import XaibenchError
from xaibench.files import write_json_atomic
from xaibench.plugins.manager import Registry
from xaibench.runner.cache import ExplanationCache, digest
from xaibench.runner.distributions import distribution_summary
from xaibench.runner.evaluate import RecordKeyer, metric_record, score_track
from xaibench.runner.explain import explain_track
from xaibench.runner.progress import Progress
from xaibench.runner.store import RECORD_SCHEMA, RecordStore
from xaibench.runner.track import TrackContext, load_track
from xaibench.stats import summarise

SUMMARY_SCHEMA = "xaibench.summary/1"
# `--explainer default`: the built-in baselines plus GradCAM when its plugin is installed.
DEFAULT_EXPLAINERS = ("random", "center", "sobel", "oracle", "gradient", "gradcam")


@dataclass
class RunConfig:
    """What ``xaibench run`` does; every field is an option of the CLI."""

    explainers: Sequence[str]
    suite: str = "default"
    tracks: Sequence[str] | None = None
    metrics: Sequence[str] | None = None
    explainer_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    seed: int = 0
    limit: int | None = None
    workdir: Path = Path(".xaibench")
    submissions_dir: Path | None = Path("submissions")
    forward_batch: int = 64
    explain_batch: int = 16
    metric_batch: int = 16
    timeout: float | None = 300.0
    threads: int = 1
    progress: bool = True
    use_cache: bool = True
    examples: int = 4  # example overlays per track and explainer stored with the submissions


def environment() -> dict[str, Any]:
    return {
        "xaibench": __version__,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "torch_threads": torch.get_num_threads(),
    }


def resolve_explainers(registry: Registry, names: Sequence[str]) -> list[str]:
    """Expand ``all`` and ``default`` and validate names up front (unknown names suggest close matches)."""
    out: list[str] = []
    installed = registry.names("explainer")
    for name in names:
        if name == "all":
            expanded = installed
        elif name == "default":
            expanded = [n for n in DEFAULT_EXPLAINERS if n in installed]
        else:
            expanded = [name]
        for item in expanded:
            registry.entry("explainer", item)
            if item not in out:
                out.append(item)
    if not out:
        raise XaibenchError("no explainer given; try --explainer gradient")
    return out


def resolve_tracks(registry: Registry, suite: str, wanted: Sequence[str] | None) -> list[TrackSpec]:
    tracks = registry.create("suite", suite).tracks()
    if wanted:
        by_name = {t.name: t for t in tracks}
        missing = [w for w in wanted if w not in by_name]
        if missing:
            raise XaibenchError(f"suite {suite!r} has no track {missing[0]!r}; it has {', '.join(by_name) or 'none'}")
        tracks = [by_name[w] for w in wanted]
    if not tracks:
        raise XaibenchError(f"suite {suite!r} has no tracks here: {registry.create('suite', suite).status()}")
    return tracks


def resolve_metrics(registry: Registry, track: TrackSpec, wanted: Sequence[str] | None) -> list[Metric]:
    """The metric ids asked for, else the track's (``family:<name>`` selects a whole family), else all."""
    names: list[str] = []
    for item in list(wanted) if wanted else list(track.metrics or registry.names("metric")):
        if item.startswith("family:"):
            family = item.split(":", 1)[1]
            names += [e.info.name for e in registry.entries("metric") if e.cls.family == family]
        else:
            names.append(item)
    names = list(dict.fromkeys(names))
    return [registry.create("metric", n, **dict(track.metric_params.get(n, {}))) for n in names]


def run(config: RunConfig, registry: Registry) -> dict[str, Any]:
    """Run every explainer on every track of the suite; returns the run summary."""
    # One intra-op thread by default: measured here, two torch threads on 2 cores ran the shapes
    # CNN 10x and EfficientNet-Lite0 1.6x slower than one as soon as anything else ran, and a
    # fixed count keeps float reductions, hence numbers, identical between runs.
    torch.set_num_threads(max(1, config.threads))
    explainer_names = resolve_explainers(registry, config.explainers)
    explainers = {n: registry.create("explainer", n, **config.explainer_params.get(n, {})) for n in explainer_names}
    if config.metrics:
        for m in config.metrics:
            registry.entry("metric", m)
    specs = resolve_tracks(registry, config.suite, config.tracks)
    cache = ExplanationCache(config.workdir / "cache" / "explanations") if config.use_cache else None
    env = environment()
    started = dt.datetime.now(dt.UTC)
    summary: dict[str, Any] = {
        "schema": SUMMARY_SCHEMA,
        "run": {
            **env,
            "suite": config.suite,
            "seed": config.seed,
            "limit": config.limit,
            "started": started.isoformat(timespec="seconds"),
            "plugins": plugin_versions(registry),
        },
        "tracks": {},
    }
    with Progress(enabled=config.progress) as progress:
        for spec in specs:
            summary["tracks"][spec.name] = run_track(spec, explainers, config, registry, cache, progress)
    summary["run"]["wall_time_s"] = round((dt.datetime.now(dt.UTC) - started).total_seconds(), 3)
    config.workdir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(config.workdir / "summary.json", summary)
    if config.submissions_dir is not None:
        from xaibench.publish.submission import write_submissions

        summary["submissions"] = [str(p) for p in write_submissions(summary, registry, config.submissions_dir)]
    return summary


def plugin_versions(registry: Registry) -> list[dict[str, Any]]:
    return [
        {"name": p.name, "distribution": p.distribution, "version": p.version, "ok": p.ok}
        for p in registry.plugins.values()
    ]


def run_track(
    spec: TrackSpec,
    explainers: dict[str, Explainer],
    config: RunConfig,
    registry: Registry,
    cache: ExplanationCache | None,
    progress: Progress,
) -> dict[str, Any]:
    """One track: load it, then explain and score with each explainer; resumable."""
    try:
        track = load_track(spec, registry, limit=config.limit, batch_size=config.forward_batch)
    except XaibenchError as exc:
        progress.log(f"[red]track {spec.name}: {exc}")
        return {"error": str(exc)}
    metrics = resolve_metrics(registry, spec, config.metrics)
    store = RecordStore(config.workdir / "results" / f"{spec.name}.jsonl")
    env = environment()
    out: dict[str, Any] = {"provenance": track.provenance, "explainers": {}}
    for name, explainer in explainers.items():
        out["explainers"][name] = run_explainer(
            track, explainer, metrics, config, registry, cache, store, progress, env
        )
    return out


def run_explainer(
    track: TrackContext,
    explainer: Explainer,
    metrics: list[Metric],
    config: RunConfig,
    registry: Registry,
    cache: ExplanationCache | None,
    store: RecordStore,
    progress: Progress,
    env: dict[str, Any],
) -> dict[str, Any]:
    info = registry.info("explainer", explainer.name)
    keyer = RecordKeyer(track, explainer.name, explainer.version, dict(explainer.params), config.seed)
    missing_samples = {s.id for s in track.samples for m in metrics if keyer(m, s.id) not in store}
    label = f"{track.spec.name} · {explainer.name}"
    explanations = None
    explain_seconds = 0.0
    if missing_samples:
        task = progress.add(f"{label}: explain", total=len(missing_samples))
        explanations = explain_track(
            track,
            explainer,
            cache=cache,
            seed=config.seed,
            batch_size=config.explain_batch,
            timeout=config.timeout,
            only=missing_samples,
            on_progress=lambda k: progress.advance(task, k),
        )
        explain_seconds = explanations.seconds
        progress.done(task)
        explainer_block = explainer_provenance(explainer, info)
        common = {
            "schema": RECORD_SCHEMA,
            "track": track.spec.name,
            "explainer": explainer_block,
            "model": track.provenance["model"]["identity"],
            "dataset": {"name": track.spec.dataset, "revision": track.provenance["dataset"]["revision"]},
            "seed": config.seed,
            "xaibench": env["xaibench"],
            "platform": env["platform"],
        }
        metric_blocks = {m.name: metric_record(m) for m in metrics}
        index = track.sample_index()
        n_batches = len(metrics) * len(missing_samples)
        task = progress.add(f"{label}: score", total=n_batches)
        for records in score_track(
            track,
            metrics,
            explanations.values,
            explanations.failures,
            explainer=explainer,
            keyer=keyer,
            done=store.__contains__,
            seed=config.seed,
            kind=explainer.kind,
            batch_size=config.metric_batch,
        ):
            for r in records:
                r.update(common)
                r["metric_info"] = metric_blocks[r["metric"]]
                row = index[r["sample_id"]]
                r["target"] = {"class": int(track.targets[row]), "source": track.target_sources[row]}
            store.append(records)
            progress.advance(task, len(records))
        progress.done(task)
    metric_summaries: dict[str, Any] = {}
    for metric in metrics:
        records = [store.records[k] for k in (keyer(metric, s.id) for s in track.samples) if k in store.records]
        metric_summaries[metric.name] = {
            **metric_record(metric),
            "ranking": metric.ranking,
            **summarise(records, seed=config.seed, label=f"{track.spec.name}/{explainer.name}/{metric.name}"),
            **distribution_summary(records),
        }
    out: dict[str, Any] = {
        "explainer": explainer_provenance(explainer, info),
        "explain_seconds": round(explain_seconds, 3),
        "explained": {
            "computed": explanations.computed if explanations else 0,
            "cached": explanations.cached if explanations else 0,
            "failed": len(explanations.failures) if explanations else 0,
        },
        "metrics": metric_summaries,
    }
    if config.submissions_dir is not None and config.examples > 0:
        from xaibench.publish.examples import save_examples

        out["examples"] = save_examples(
            track,
            explainer,
            out["explainer"],
            explanations.values if explanations else {},
            config.submissions_dir,
            failed=explanations.failures if explanations else {},
            cache=cache,
            seed=config.seed,
            timeout=config.timeout,
            k=config.examples,
        )
    return out


def explainer_provenance(explainer: Explainer, info: Any) -> dict[str, Any]:
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
