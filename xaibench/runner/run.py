"""The run lifecycle: tracks -> explanations (cached) -> metric records -> summary (+ examples).

One :class:`Runner` holds the run's state (configuration, registry, explanation cache,
progress, environment); per (track, explainer) it passes one :class:`ExplainerRun` forward
through explain -> score -> examples -> summary. :func:`run` returns a :class:`RunResult`: the
summary (also written to ``<workdir>/summary.json``) and the example explanations that
publishing (:mod:`xaibench.publish`, a layer above) renders into the submissions. The runner
itself writes only the work folder. See docs/architecture.md for the diagram.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import torch
from rich.markup import escape

from xaibench.allocator import tune_allocator
from xaibench.api import Explainer, Metric, TrackSpec, modality_reason
from xaibench.errors import XaibenchError
from xaibench.files import remove_leftovers, write_json_atomic
from xaibench.plugins.manager import Registry
from xaibench.runner.config import RunConfig, executor_options, resolve_device
from xaibench.runner.cost import summarise_costs
from xaibench.runner.distributions import distribution_summary
from xaibench.runner.estimate import (
    REPORT_ABOVE_S,
    Estimate,
    estimate,
    images_per_second,
    input_pixels,
    unknown_line,
)
from xaibench.runner.evaluate import score_track
from xaibench.runner.examples import ExampleSet, collect_examples
from xaibench.runner.executors import Executor, ExplainerHandle, explainer_handles
from xaibench.runner.explain import CachedExplainer, Explanations, cached_costs, explain_track, track_model_spec
from xaibench.runner.health import health_lines
from xaibench.runner.isolation.dataset_worker import open_dataset
from xaibench.runner.isolation.metric_worker import MetricWorkers
from xaibench.runner.isolation.workers import make_executor
from xaibench.runner.pins import check_revisions
from xaibench.runner.progress import Progress
from xaibench.runner.records import (
    RecordMaker,
    explainer_block,
    metric_block,
    old_key_line,
    runtime_key,
    unverified_line,
)
from xaibench.runner.storage.cache import ExplanationCache
from xaibench.runner.storage.store import RecordStore, WorkdirLock, track_journal
from xaibench.runner.track import TrackContext, load_track, supports
from xaibench.sandbox import HIDDEN_VARIABLE, WORKDIR_KEYS, hide
from xaibench.stats import INTERVAL_RULE, summarise
from xaibench.suites.metric_selection import check_selectors, resolve_metrics, track_has_masks
from xaibench.torch_numerics import fix_torch_numerics
from xaibench.version import __version__

SUMMARY_SCHEMA = "xaibench.summary/1"
# `--explainer default`: the built-in baselines plus GradCAM when its plugin is installed.
DEFAULT_EXPLAINERS = ("random", "center", "sobel", "oracle", "gradient", "gradcam")


def environment(device: torch.device | str = "cpu") -> dict[str, Any]:
    """Where the run computes: versions, platform, the processor (``cpu``: its model name;
    ``cpu_capability``: the vector kernels torch uses, e.g. ``AVX512``), torch's intra-op threads
    and the device (``device``: as used, e.g. ``cuda:0``; ``device_type``; ``device_name``: the
    GPU's name). The processor enters no key: it is there for whoever re-runs the numbers
    elsewhere (``submission verify`` names a difference)."""
    device = torch.device(device)
    return {
        "xaibench": __version__,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu_name(),
        "cpu_capability": str(torch.backends.cpu.get_cpu_capability()),
        "torch_threads": torch.get_num_threads(),
        "device": str(device),
        "device_type": device.type,
        "device_name": device_name(device),
    }


@cache
def cpu_name() -> str:
    """The processor's model name (``model name`` in /proc/cpuinfo on Linux, else
    :func:`platform.processor`), or ``unknown``."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith("model name") and ":" in line:
                    return line.split(":", 1)[1].strip() or "unknown"
    except OSError:
        pass
    return platform.processor() or "unknown"


def device_name(device: torch.device) -> str:
    """``cpu``, ``mps``, or the CUDA device's name (e.g. ``NVIDIA H100 80GB HBM3``)."""
    if device.type == "cuda":
        return str(torch.cuda.get_device_name(device))
    return device.type


def explanation_cache(workdir: str | Path, runtime: dict[str, Any] | None = None) -> ExplanationCache:
    """The explanation cache of ``workdir`` (``<workdir>/cache/explanations``), in the scope of
    ``runtime`` (a run's :func:`environment`; this process's on the CPU when omitted): the one
    place the cache's scope is made, for a run and for tools that read or fill a run's cache."""
    return ExplanationCache(Path(workdir) / "cache" / "explanations", scope=runtime_key(runtime or environment()))


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


def resolve_tracks(
    registry: Registry, suite: str, wanted: Sequence[str] | None, tracks: Sequence[TrackSpec] | None = None
) -> list[TrackSpec]:
    """The tracks to run: ``tracks`` when given (ad-hoc tracks, a suite file's; ``suite`` only
    names them), else those of the suite plugin ``suite``; then only those named in ``wanted``.
    An unknown or repeated track name raises :class:`XaibenchError`."""
    if tracks is None:
        tracks = registry.create("suite", suite).tracks()
    else:
        tracks = list(tracks)
        names = [t.name for t in tracks]
        repeated = next((n for n in names if names.count(n) > 1), None)
        if repeated is not None:
            raise XaibenchError(f"suite {suite!r}: two tracks are named {repeated!r}; give each its own name")
        if not tracks:
            raise XaibenchError(f"suite {suite!r} has no tracks")
    if wanted:
        by_name = {t.name: t for t in tracks}
        missing = [w for w in wanted if w not in by_name]
        if missing:
            raise XaibenchError(f"suite {suite!r} has no track {missing[0]!r}; it has {', '.join(by_name) or 'none'}")
        tracks = [by_name[w] for w in wanted]
    if not tracks:
        raise XaibenchError(f"suite {suite!r} has no tracks here: {registry.create('suite', suite).status()}")
    return tracks


def check_suite_data(registry: Registry, suite: str, specs: Sequence[TrackSpec], *, timeout: float | None) -> None:
    """Stop with one line when a track's dataset differs from the copy suite ``suite`` pins
    (:meth:`xaibench.api.Suite.revisions`; the official suite pins all of its tracks)."""
    pinned = getattr(registry.create("suite", suite), "revisions", dict)()
    if pinned:
        check_revisions(
            suite,
            specs,
            pinned,
            lambda spec: open_dataset(registry, spec.dataset, spec.dataset_params, timeout=timeout),
        )


@dataclass
class RunResult:
    """What :func:`run` hands to publishing: the run summary and, per (track, explainer), the
    example explanations of the first ``RunConfig.examples`` samples (none when that is 0)."""

    summary: dict[str, Any]
    examples: list[ExampleSet] = field(default_factory=list)


@dataclass
class ExplainerRun:
    """The state of one explainer on one track, passed forward from step to step."""

    track: TrackContext
    explainer: Explainer
    metrics: list[Metric]
    store: RecordStore
    block: dict[str, Any]  # the explainer's provenance (records, summary, submissions)
    records: RecordMaker
    explanations: Explanations | None = None

    @property
    def label(self) -> str:
        return f"{self.track.spec.name} · {self.explainer.name}"

    def missing_samples(self) -> set[str]:
        """Samples with at least one metric record not in the store yet (resume skips the rest)."""
        key = self.records.key
        return {s.id for s in self.track.samples for m in self.metrics if key(m, s.id) not in self.store}


class Runner:
    """One run of explainers over the tracks of a suite (``xaibench run``).

    Construction resolves everything that can be wrong before any work starts: explainer names
    (``all``, ``default``), metric ids and tracks; it also sets torch's intra-op threads. Then
    :meth:`run` loads each track (:meth:`run_track`) and runs each explainer on it
    (:meth:`run_one`: :meth:`explain`, :meth:`score`, :meth:`collect_examples`, :meth:`summarise`).
    Every step is resumable: records already in ``<workdir>/results`` are not recomputed.
    """

    def __init__(self, config: RunConfig, registry: Registry, *, explanations_from: Path | None = None) -> None:
        """``explanations_from``: another workdir whose explanation cache this run reads and fills
        (a re-scoring of that run's explanations, :mod:`xaibench.metaeval.protocol_runs`);
        by default the run's own workdir."""
        prepare_process(config.threads)  # before the workers start: they inherit it
        # the workdir's integrity keys (records, explanation cache) unreadable in every sandbox
        # started while this runner lives (the variable is restored by close())
        self._hidden_before = os.environ.get(HIDDEN_VARIABLE)
        hide(*(Path(config.workdir) / folder / ".key" for folder in WORKDIR_KEYS))
        # Worker processes first: they fork from a process that has run no torch work and not
        # initialised CUDA yet (see runner/isolation/workers.py); closed by close() (the `with` block's end).
        self.executor: Executor = make_executor(config.executor, registry, **executor_options(config))
        try:
            # after the executor: resolving "auto" may initialise CUDA, which forked workers must not inherit.
            # The one resolution of the run's device: tracks, workers and metrics get it from here.
            self.device = resolve_device(config.device)
            self.config = config
            self.registry = registry
            names = resolve_explainers(registry, config.explainers)
            check_selectors(registry, config.metrics or ())
            self.specs = resolve_tracks(registry, config.suite, config.tracks, config.suite_tracks)
            if config.suite_tracks is None:  # a suite plugin that pins its data: checked before any work
                check_suite_data(registry, config.suite, self.specs, timeout=config.timeout)
            # explainers are constructed where they run; bad parameters still stop the run here
            self.explainers: dict[str, ExplainerHandle] = explainer_handles(
                self.executor, registry, {n: config.explainer_params.get(n, {}) for n in names}, timeout=config.timeout
            )
        except BaseException:
            self.close()
            raise
        # third-party metrics are scored in worker processes of their own (runner/isolation/metric_worker.py)
        self.metric_workers = MetricWorkers(timeout=config.timeout, threads=config.threads)
        self.environment = environment(self.device)
        # what confines the workers (sandbox.py), local or Ray; "none" for the in-process executor
        self.environment["sandbox"] = getattr(self.executor, "sandbox", "none")
        # "inprocess" runs (and so imports) the plugins it calls in this process: trusted code only
        self.environment["executor"] = config.executor
        self.cache = (
            explanation_cache(explanations_from or config.workdir, self.environment) if config.use_cache else None
        )
        self.progress = Progress(enabled=False)
        self.examples: list[ExampleSet] = []
        self.loaded: dict[str, TrackContext] = {}  # tracks loaded ahead by load(), taken by run_track()
        self.unknown_costs_said: set[str] = set()  # metrics stating no cost, said once (announce_estimate)

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the executor's workers (and a Ray instance it started) and the metric workers; safe
        to call twice."""
        self.executor.close()
        workers = getattr(self, "metric_workers", None)
        if workers is not None:
            workers.close()
        if hasattr(self, "_hidden_before"):  # the process environment as it was (hide() extended it)
            if self._hidden_before is None:
                os.environ.pop(HIDDEN_VARIABLE, None)
            else:
                os.environ[HIDDEN_VARIABLE] = self._hidden_before

    def load(self, spec: TrackSpec) -> TrackContext:
        """Load the track ``spec`` ahead of :meth:`run` (which then uses it rather than loading it
        again), e.g. to check its provenance first; :class:`XaibenchError` when it cannot be loaded.
        The samples are the first ``config.limit``, restricted to ``config.samples[spec.name]``
        when that names the track."""
        if spec.name not in self.loaded:
            self.loaded[spec.name] = self._load_track(spec)
        return self.loaded[spec.name]

    def _load_track(self, spec: TrackSpec) -> TrackContext:
        config = self.config
        only = config.samples.get(spec.name) if config.samples is not None else None
        return load_track(
            spec,
            self.registry,
            limit=config.limit,
            batch_size=config.forward_batch,
            device=self.device,
            only=only,
            timeout=config.timeout,
        )

    def run(self) -> RunResult:
        """Run every explainer on every track; write ``<workdir>/summary.json``; return the result.

        The workdir is locked for the whole run (a second run on it fails at once, naming this
        one's pid); what a crashed run left behind (temporary files of atomic writes, staging
        folders) is removed first."""
        try:
            lock = WorkdirLock(self.config.workdir).acquire()
        except BaseException:
            self.close()
            raise
        with lock:
            self.leftovers_removed = remove_leftovers(self.config.workdir)
            return self._run_locked()

    def _run_locked(self) -> RunResult:
        config = self.config
        started = dt.datetime.now(dt.UTC)
        summary: dict[str, Any] = {
            "schema": SUMMARY_SCHEMA,
            "run": {
                **self.environment,
                "suite": config.suite,
                "seed": config.seed,
                "intervals": INTERVAL_RULE,
                "limit": config.limit,
                "batch_size": config.forward_batch,
                "started": started.isoformat(timespec="seconds"),
                "plugins": plugin_versions(self.registry),
            },
            "tracks": {},
        }
        self.examples = []
        try:
            with Progress(enabled=config.progress) as self.progress:
                for spec in self.specs:
                    summary["tracks"][spec.name] = self.run_track(spec)
        finally:
            self.close()
        self.progress = Progress(enabled=False)
        summary["run"]["repairs"] = self.repairs()
        summary["run"]["wall_time_s"] = round((dt.datetime.now(dt.UTC) - started).total_seconds(), 3)
        errors, warnings = health_lines(summary)
        summary["health"] = {"errors": errors, "warnings": warnings}
        config.workdir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(config.workdir / "summary.json", summary)
        return RunResult(summary=summary, examples=list(self.examples))

    def repairs(self) -> dict[str, Any]:
        """What the run found wrong in its workdir and repaired: leftovers of a crash removed,
        cache entries rejected on reading (recomputed), by reason."""
        rejected = self.cache.rejected if self.cache is not None else {}
        report = {
            "leftovers_removed": getattr(self, "leftovers_removed", 0),
            "cache_rejected": sum(rejected.values()),
            "cache_rejected_reasons": dict(sorted(rejected.items(), key=lambda kv: -kv[1])[:5]),
        }
        if report["cache_rejected"]:
            Progress(enabled=self.config.progress).log(
                f"[yellow]cache: {report['cache_rejected']} invalid entries recomputed "
                f"({', '.join(report['cache_rejected_reasons'])})"
            )
        return report

    def run_track(self, spec: TrackSpec) -> dict[str, Any]:
        """One track: load it, then run each explainer on it; a track that fails to load gives ``{"error"}``."""
        config = self.config
        try:
            # a track loaded ahead is used once, then released with the others
            track = self.loaded.pop(spec.name, None) or self._load_track(spec)
        except XaibenchError as exc:
            self.progress.log(f"[red]track {spec.name}: {exc}")
            return {"error": str(exc)}
        metrics = resolve_metrics(
            self.registry, spec, config.metrics, masks=track_has_masks(track.samples), modality=track.modality
        )
        store = RecordStore(track_journal(config.workdir / "results", spec.name))
        out: dict[str, Any] = {"provenance": track.provenance, "explainers": {}}
        if store.old_keys:
            out["old_key_records"] = store.old_keys
            self.progress.log(f"[yellow]{escape(old_key_line(store.path, store.old_keys))}")
        if store.unverified:
            out["unverified_records"] = store.unverified
            self.progress.log(f"[yellow]{escape(unverified_line(store.path, store.unverified))}")
        states = {name: self.start(track, explainer, metrics, store) for name, explainer in self.explainers.items()}
        if line := modality_line(track, states.values(), metrics):
            self.progress.log(f"[yellow]{escape(line)}")
            out["modality_na"] = line
        self.announce_estimate(track, states.values())
        for name, state in states.items():
            out["explainers"][name] = self.run_one(state)
        return out

    def announce_estimate(self, track: TrackContext, states: Iterable[ExplainerRun]) -> Estimate | None:
        """Log one line with the estimated time of the track's remaining work when it exceeds
        :data:`~xaibench.runner.estimate.REPORT_ABOVE_S` (a minute); ``None`` without a model or
        without work left (a resumed run that has every record). A metric that states no cost is
        said once per run (``unknown_costs_said``), the first time it has work."""
        states = list(states)
        todo = [len(s.missing_samples()) for s in states]
        speed = images_per_second(track) if any(todo) else None
        if speed is None:
            return None
        found = estimate(states[0].metrics, todo, speed, pixels=input_pixels(track))
        unsaid = [name for name in found.unknown if name not in self.unknown_costs_said]
        if unsaid:
            self.unknown_costs_said.update(unsaid)
            self.progress.log(f"[yellow]{escape(unknown_line(unsaid))}")
        if found.seconds > REPORT_ABOVE_S:
            self.progress.log(found.line(track.spec.name))
        return found

    def start(
        self, track: TrackContext, explainer: Explainer | ExplainerHandle, metrics: list[Metric], store: RecordStore
    ) -> ExplainerRun:
        """The state of ``explainer`` on ``track``, before any work (a handle is bound to the
        track's model, so that metrics re-running the explainer reach it in its executor)."""
        if isinstance(explainer, ExplainerHandle):
            explainer = explainer.bind(track_model_spec(track))
        block = explainer_block(explainer, self.registry.info("explainer", explainer.name))
        config = self.config
        records = RecordMaker.for_run(track, explainer, block, config.seed, self.environment, config.forward_batch)
        return ExplainerRun(track, explainer, metrics, store, block, records)

    def run_one(self, state: ExplainerRun) -> dict[str, Any]:
        """Explain and score what is missing, pick the examples; return the explainer's summary."""
        missing = state.missing_samples()
        if missing:
            self.explain(state, missing)
            self.score(state, len(missing))
        if self.config.examples > 0:
            self.examples.append(self.collect_examples(state))
        return self.summarise(state)

    def explain(self, state: ExplainerRun, only: set[str]) -> Explanations:
        """Explanations of the samples ``only`` (cached, batched, guarded); kept in ``state``. An
        explainer that does not support the track's modality explains nothing: each sample is n/a
        with :func:`~xaibench.api.modality_reason`."""
        config = self.config
        modality = state.track.modality
        if not supports(state.explainer, modality):
            reason = modality_reason("explainer", state.explainer.name, state.explainer.modalities, modality)
            state.explanations = Explanations(failures=dict.fromkeys(sorted(only), reason))
            return state.explanations
        task = self.progress.add(f"{state.label}: explain", total=len(only))
        state.explanations = explain_track(
            state.track,
            state.explainer,
            cache=self.cache,
            seed=config.seed,
            batch_size=config.explain_batch,
            timeout=config.timeout,
            only=only,
            on_progress=lambda k: self.progress.advance(task, k),
            executor=self.executor,
        )
        self.progress.done(task)
        return state.explanations

    def score(self, state: ExplainerRun, n_samples: int) -> None:
        """Score ``state.explanations`` with every metric; append the records not stored yet.
        ``n_samples`` (samples with a missing record) sizes the progress bar. Metrics that re-run
        the explainer on the track's samples (``model_randomisation``) go through the explanation
        cache too (:class:`~xaibench.runner.explain.CachedExplainer`)."""
        assert state.explanations is not None
        store, records = state.store, state.records
        index = state.track.sample_index()
        explainer: Any = state.explainer
        if self.cache is not None:
            explainer = CachedExplainer(explainer, state.track, self.cache)
        task = self.progress.add(f"{state.label}: score", total=len(state.metrics) * n_samples)
        for scores in score_track(
            state.track,
            state.metrics,
            state.explanations.values,
            state.explanations.failures,
            explainer=explainer,
            seed=self.config.seed,
            kind=state.explainer.kind,
            batch_size=self.config.metric_batch,
            wanted=lambda metric, sample_id: records.key(metric, sample_id) not in store,
            workers=self.metric_workers,
        ):
            store.append([records.record(s, index) for s in scores])
            self.progress.advance(task, len(scores))
        self.progress.done(task)

    def collect_examples(self, state: ExplainerRun) -> ExampleSet:
        """The first ``config.examples`` samples with their explanations, from this run or the cache."""
        explanations = state.explanations
        return collect_examples(
            state.track,
            state.explainer,
            state.block,
            explanations.values if explanations else {},
            failed=explanations.failures if explanations else {},
            cache=self.cache,
            seed=self.config.seed,
            timeout=self.config.timeout,
            k=self.config.examples,
            executor=self.executor,
        )

    def summarise(self, state: ExplainerRun) -> dict[str, Any]:
        """The explainer's block of the run summary: provenance, explanation counts, metric summaries."""
        track, seed = state.track, self.config.seed
        metric_summaries: dict[str, Any] = {}
        for metric in state.metrics:
            keys = (state.records.key(metric, s.id) for s in track.samples)
            records = state.store.get(keys)
            metric_summaries[metric.name] = {
                **metric_block(metric),
                "ranking": metric.ranking,
                **summarise(records, seed=seed, track=track.spec.name),
                **distribution_summary(records),
            }
        explanations = state.explanations
        costs = dict(explanations.costs) if explanations else {}
        if self.cache is not None and len(costs) < len(track.samples):  # a resumed run: read what it did not
            costs.update(cached_costs(track, state.explainer, self.cache, seed, known=costs))
        return {
            "explainer": state.block,
            "explain_seconds": round(explanations.seconds if explanations else 0.0, 3),
            "cost": summarise_costs((costs.get(s.id) for s in track.samples), len(track.samples)),
            "explained": {
                "computed": explanations.computed if explanations else 0,
                "cached": explanations.cached if explanations else 0,
                "failed": len(explanations.failures) if explanations else 0,
            },
            "metrics": metric_summaries,
        }


def modality_line(track: TrackContext, states: Iterable[ExplainerRun], metrics: Sequence[Metric]) -> str | None:
    """One line naming the explainers and metrics of ``track`` that do not support its modality
    (their records are n/a, each with its reason); ``None`` when all do."""
    modality = track.modality
    explainers = [s.explainer.name for s in states if not supports(s.explainer, modality)]
    scorers = [m.name for m in metrics if not supports(m, modality)]
    if not explainers and not scorers:
        return None
    parts = [f"explainers {', '.join(explainers)}"] if explainers else []
    parts += [f"metrics {', '.join(scorers)}"] if scorers else []
    return f"track {track.spec.name} ({modality}): n/a for {' and '.join(parts)}: they do not support {modality}"


def run(config: RunConfig, registry: Registry) -> RunResult:
    """Run every explainer on every track of the suite; see :class:`Runner`."""
    with Runner(config, registry) as runner:
        return runner.run()


def prepare_process(threads: int) -> None:
    """The process-wide set-up of a run, in one place, before any worker starts (they inherit it):

    - glibc's allocator kept from returning tensor memory to the OS (:mod:`xaibench.allocator`);
    - torch's intra-op threads: one by default. Measured here, two torch threads on 2 cores ran
      the shapes CNN 10x and EfficientNet-Lite0 1.6x slower than one as soon as anything else
      ran; cuDNN deterministic, without autotuning and without TF32
      (:mod:`xaibench.torch_numerics`).
    """
    tune_allocator()
    fix_torch_numerics(threads)


def plugin_versions(registry: Registry) -> list[dict[str, Any]]:
    return [
        {"name": p.name, "distribution": p.distribution, "version": p.version, "ok": p.ok}
        for p in registry.plugins.values()
    ]
