"""``xaibench submission verify``: re-run a random subset of a submission's records, drawn afresh.

A submission records, per track and metric, every sample's value (``/2``: ``values`` aligned with
the track's ``sample_ids``, n/a as NaN or ``null``; ``/1``: ``samples``, sample id -> value,
``null`` for n/a) and the provenance that produced it: suite, seed, run limit, the
explainer's name, version and parameters, each track's dataset revision and model identity,
each metric's version and parameters, the device and torch's thread count. Verification:

1. lists every (track, metric, sample) record, n/a ones included, sorted, and picks ``k`` of them
   with ``numpy.random.default_rng(seed).choice`` without replacement (all of them when there are
   no more than ``k``, or with ``--samples all``). The seed is fresh by default
   (:func:`fresh_seed`, from the operating system's randomness), printed first and recorded with
   the verdict, so nobody can know beforehand which records a verification re-runs, and an
   explicit ``--seed`` draws the same records again. (With n/a records left out and seed 0 by
   default, a submitter could set the records that hurt a ranking to n/a, or edit values the
   known draw would not touch, and still verify.);
2. checks, before any work, that the submission can be re-run as recorded: the installed
   explainer's version and resolved parameters, each metric's version and the parameters the
   suite gives it, and each track's dataset (name, revision, parameters) and model (name,
   identity, parameters) equal the recorded ones. A difference is a failure naming it, and
   nothing is re-run;
3. re-runs exactly the samples of the chosen records (:attr:`RunConfig.samples`), each from the
   track's first ``limit`` samples as the original run had them, in a fresh temporary work
   folder without the explanation cache, on the recorded device (the CPU when that device is
   not available here, which is said) with the recorded thread count, explainer code in the
   default local worker process, with the recorded batch size (``run.batch_size``: images per
   forward pass, which changes values by float rounding; 16, noted, when not recorded);
4. compares each re-run value with the recorded one: a match when ``|a - b| <= 1e-6``
   (absolute) where the submission records the same processor as here (``environment.cpu`` and
   ``cpu_capability``); where it records another one, or none (files written before they were
   recorded), ``|a - b| <= max(1e-6, 1e-3 |a|)`` (:data:`CROSS_CPU_TOLERANCE`, said in the notes):
   DESIGN 6 promises the same ranks on any x86-64 CPU and values within a tolerance measured
   across CPU kernels, not the same bits (measured: a DFF record of ``shapes``'s average
   sensitivity, 0.0921083 recorded, 0.0921177 re-run on another machine, 1e-4 relative).
   A recorded n/a matches only a re-run n/a whose reason is one the submission records
   for that metric: ``na_reasons`` counts n/a per reason per metric, not per sample, so the
   re-run's reason must be among that metric's recorded reasons. When the file cannot say (no
   ``na_reasons``, or the runner kept only the :data:`~xaibench.publish.recompute.NA_REASONS_KEPT`
   commonest and they count fewer than ``n_na``), any reason matches; the re-run must still be n/a.
   A record that the re-run did not produce at all never matches;
5. re-runs each record that differs once more, inside its original batch (the ``batch_size``
   samples of the track's order it was computed with), and compares again (said in the notes):
   a batch rounds differently from one image, and a metric that ranks pixels with near-ties
   (model randomisation's Spearman correlation) moves by a few 1e-6 with that rounding.

Explainers and metrics draw their randomness per sample (:mod:`xaibench.seeds`), so a sample's
value does not depend on the other samples of its batch but through float rounding: re-running a
subset reproduces it, or, where that rounding matters, re-running its batch does (step 5).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import secrets
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from xaibench.api import TrackSpec
from xaibench.errors import XaibenchError
from xaibench.files import write_json_atomic
from xaibench.plugins.manager import Registry
from xaibench.publish.recompute import NA_REASONS_KEPT
from xaibench.publish.submission import load_submission
from xaibench.publish.submission_files import metric_values
from xaibench.runner import (
    CLI_EXECUTORS,
    IN_PROCESS_EXECUTORS,
    RUN_DEFAULTS,
    RunConfig,
    Runner,
    RunOptions,
    make_run_config,
    resolve_tracks,
)
from xaibench.suites.metric_selection import resolve_metrics
from xaibench.version import __version__

TOLERANCE = 1e-6
"""Largest absolute difference between a recorded and a re-run value that still matches."""
CROSS_CPU_TOLERANCE = 1e-3
"""Relative tolerance of a match when the submission was computed on another (or an unrecorded)
processor (module doc, step 4)."""
DEFAULT_SAMPLES = 16
"""Records re-run by default (``--samples``)."""
ALL = "all"
"""``--samples all``: re-run every record (no draw)."""
SEED_BITS = 32
"""A fresh seed is one of ``2**SEED_BITS``."""
MISSING = "the re-run produced no record"
"""The re-run reason of a record the re-run did not produce (never a match)."""
DEFAULT_BATCH_SIZE = RUN_DEFAULTS.batch_size
"""The batch size re-run for a submission that does not record its own (``xaibench run``'s default)."""
VOLATILE_METRIC_PARAMS = ("checkpoint",)
"""Metric parameters not compared: a PASTA checkpoint's name or path (its content is compared,
as ``checkpoint_sha256``)."""


@dataclass(frozen=True, order=True)
class Record:
    """One recorded value (``None``: n/a): ``track/metric/sample``."""

    track: str
    metric: str
    sample_id: str
    value: float | None

    def __str__(self) -> str:
        return f"{self.track}/{self.metric}/{self.sample_id}"


def _key(record: Record) -> tuple[str, str, str]:
    return (record.track, record.metric, record.sample_id)


@dataclass(frozen=True)
class Mismatch:
    """A record whose re-run differs from the recorded one: a value by more than the tolerance, a
    value where n/a was recorded or the other way round, or an n/a whose reason ``reason`` is not
    among the metric's recorded ones (``recorded_reasons``; ``None``: unknown)."""

    record: Record
    rerun: float | None
    reason: str | None = None
    recorded_reasons: frozenset[str] | None = None

    def __str__(self) -> str:
        recorded = _number(self.record.value)
        if self.record.value is None and self.recorded_reasons:
            recorded += f" ({' or '.join(sorted(self.recorded_reasons))})"
        rerun = _number(self.rerun)
        if self.rerun is None and self.reason:
            rerun += f" ({self.reason})"
        return f"{self.record}: recorded {recorded}, re-run {rerun}"


@dataclass
class Verification:
    """The outcome of verifying one submission file.

    ``checked`` records were chosen (``chosen``, drawn with ``seed``; ``None`` when every
    record was) and ``matched`` of them were reproduced within ``tolerance``; ``differences``
    lists provenance that differs from what is installed here (then nothing was re-run and
    ``matched`` is 0); ``notes`` say how the records were drawn (first), what was re-run and how
    (device, threads) and what may make numbers differ without being a failure.
    """

    path: Path
    explainer: str
    checked: int
    seed: int | None = None
    chosen: list[Record] = field(default_factory=list, repr=False)
    matched: int = 0
    tolerance: float = TOLERANCE
    relative_tolerance: float = 0.0
    """:data:`CROSS_CPU_TOLERANCE` when the submission was computed on another processor, else 0."""
    mismatches: list[Mismatch] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    verified_at: str = ""
    submission: dict[str, Any] = field(default_factory=dict, repr=False)  # the content verified

    @property
    def passed(self) -> bool:
        return not self.differences and self.matched == self.checked

    def block(self) -> dict[str, Any]:
        """The submission's top-level ``verification`` object."""
        return {
            "verified_at": self.verified_at,
            "checked": self.checked,
            "seed": self.seed,
            "matched": self.matched,
            "tolerance": self.tolerance,
            "relative_tolerance": self.relative_tolerance,
            "passed": self.passed,
            "xaibench": __version__,
        }

    def lines(self) -> list[str]:
        """What the command prints after the notes: one line per difference or mismatch, then the verdict."""
        if self.differences:
            return [
                *self.differences,
                f"FAILED: {self.path} cannot be re-run as recorded ({len(self.differences)} "
                f"difference{'s' if len(self.differences) != 1 else ''} above); none of {self.checked} records re-run",
            ]
        out = [str(m) for m in self.mismatches]
        within = f"{self.tolerance:g}"
        if self.relative_tolerance:
            within += f" or {self.relative_tolerance:g} relative"
        if self.passed:
            out.append(f"verified: {self.matched} of {self.checked} records match to {within}")
        else:
            differ = self.checked - self.matched
            out.append(
                f"FAILED: {differ} of {self.checked} records differ by more than {within} ({self.matched} match)"
            )
        return out


def _number(value: float | None) -> str:
    return "n/a" if value is None else repr(float(value))


def _json(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists), to compare with a recorded value."""
    return json.loads(json.dumps(value, default=str))


def recorded_values(path: Path, data: Mapping[str, Any]) -> list[Record]:
    """Every (track, metric, sample) record of the submission ``data``, n/a ones (value
    ``None``) included, sorted by track, metric and sample; the per-sample values are a ``/1``
    ``samples`` map or ``/2`` ``values`` against ``sample_ids``.

    Raises :class:`XaibenchError` naming ``path`` when per-sample values are malformed, or when
    the submission has no per-sample values at all (written before they were recorded)."""
    out: list[Record] = []
    maps = 0
    for track, block in data["tracks"].items():
        metrics = block.get("metrics") if isinstance(block, dict) else None
        if not isinstance(metrics, dict):
            raise XaibenchError(f"{path}: track {track!r} has no metrics object")
        for metric, summary in metrics.items():
            where = f"tracks/{track}/metrics/{metric}"
            if not isinstance(summary, dict):
                continue
            if "values" in summary:
                try:
                    got = metric_values(block, summary)
                except ValueError as exc:
                    raise XaibenchError(f"{path}: {where}: {exc}") from None
                assert got is not None
                ids, values = got
                maps += 1
                infinite = np.flatnonzero(np.isinf(values))
                if infinite.size:
                    k = int(infinite[0])
                    bad = float(values[k])
                    raise XaibenchError(f"{path}: {where}/values/{ids[k]} is {bad!r}, not a number or null")
                t, m = str(track), str(metric)
                out += [
                    Record(t, m, i, None if math.isnan(v) else v) for i, v in zip(ids, values.tolist(), strict=True)
                ]
                continue
            if summary.get("samples") is None:
                continue
            if not isinstance(summary["samples"], dict):
                raise XaibenchError(f"{path}: {where}/samples is not an object")
            maps += 1
            for sample_id, value in summary["samples"].items():
                if value is None:
                    out.append(Record(str(track), str(metric), str(sample_id), None))
                    continue
                if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                    raise XaibenchError(f"{path}: {where}/samples/{sample_id} is {value!r}, not a number or null")
                out.append(Record(str(track), str(metric), str(sample_id), float(value)))
    if not maps:
        raise XaibenchError(
            f"{path}: no per-sample values to verify (no metric has 'samples' or 'values'); "
            "re-run the explainer with this xaibench to record them"
        )
    if not out:
        raise XaibenchError(f"{path}: no per-sample records to verify (every metric has no samples)")
    return sorted(out, key=_key)


def fresh_seed() -> int:
    """A seed nobody can know beforehand: ``SEED_BITS`` bits of the operating system's randomness."""
    return secrets.randbits(SEED_BITS)


def parse_samples(value: int | str) -> int | str:
    """``--samples``: a positive number of records, or :data:`ALL`; :class:`ValueError` otherwise."""
    if isinstance(value, str) and value.strip().lower() == ALL:
        return ALL
    try:
        k = int(value)
    except (TypeError, ValueError):
        k = 0
    if isinstance(value, bool | float) or k < 1:
        raise ValueError(f"{value!r} is not a positive integer or {ALL!r}")
    return k


def choose(records: Sequence[Record], k: int | str, seed: int) -> list[Record]:
    """``k`` of ``records`` (sorted by track, metric and sample first), drawn with
    ``numpy.random.default_rng(seed)`` without replacement and returned in sorted order; all of
    them when there are no more than ``k`` or ``k`` is :data:`ALL`."""
    ordered = sorted(records, key=_key)
    if parse_samples(k) == ALL or int(k) >= len(ordered):
        return ordered
    picked = np.random.default_rng(seed).choice(len(ordered), size=int(k), replace=False)
    return [ordered[i] for i in sorted(int(i) for i in picked)]


def recorded_reasons(data: Mapping[str, Any], track: str, metric: str) -> frozenset[str] | None:
    """The n/a reasons the submission records for ``track``/``metric`` (``na_reasons``: counts per
    reason, not per sample); ``None`` when it cannot say: no ``na_reasons``, or only the
    :data:`NA_REASONS_KEPT` commonest kept and counting fewer than ``n_na``."""
    block = _object(_object(_object(_object(data.get("tracks")).get(track)).get("metrics")).get(metric))
    reasons = block.get("na_reasons")
    if not isinstance(reasons, dict) or not reasons:
        return None
    counts = [v for v in reasons.values() if isinstance(v, int) and not isinstance(v, bool)]
    n_na = block.get("n_na")
    if len(reasons) >= NA_REASONS_KEPT and isinstance(n_na, int) and sum(counts) < n_na:
        return None
    return frozenset(str(r) for r, v in reasons.items() if not isinstance(v, int) or v > 0)


def _field(path: Path, data: Mapping[str, Any], key: str, kind: type, default: Any, label: str = "") -> Any:
    value = data.get(key, default)
    if value is None:
        value = default
    if isinstance(value, bool) or not isinstance(value, kind):
        raise XaibenchError(f"{path}: {label or key} is {value!r}; cannot re-run it")
    return value


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _batch_size(path: Path, data: Mapping[str, Any]) -> int | None:
    """The recorded ``run.batch_size`` (images per forward pass; values depend on it), ``None``
    for a submission made before it was recorded."""
    size = _object(data.get("run")).get("batch_size")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
        raise XaibenchError(f"{path}: run.batch_size is {size!r}; cannot re-run it")
    return size


def _limit(path: Path, data: Mapping[str, Any], tracks: Sequence[str]) -> int | None:
    """The sample limit that gives each of ``tracks`` its recorded samples: the largest recorded
    ``n_samples`` (datasets yield their samples in a fixed order, so the first ``n`` of a larger
    limit are the same), else the run's recorded ``limit``."""
    counts = [_object(data["tracks"][t].get("provenance")).get("n_samples") for t in tracks]
    if all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in counts):
        return max(counts)
    limit = _object(data.get("run")).get("limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise XaibenchError(f"{path}: run.limit is {limit!r}; cannot re-run it")
    return limit


def _differs(what: str, recorded: Any, here: Any) -> str | None:
    if _json(recorded) == _json(here):
        return None
    return f"{what}: recorded {json.dumps(_json(recorded))}, here {json.dumps(_json(here))}"


def recorded_tracks(path: Path, data: Mapping[str, Any], tracks: Sequence[str], registry: Registry) -> list[TrackSpec]:
    """The tracks of a run whose suite is no installed plugin (``adhoc`` command-line tracks, a
    suite file), rebuilt from each track's recorded provenance: dataset and model with their
    parameters, target, and the recorded parameters of its metrics."""
    classes = {e.info.name: e.cls for e in registry.entries("metric")}
    specs: list[TrackSpec] = []
    for track in tracks:
        entry = _object(data["tracks"].get(track))
        provenance = _object(entry.get("provenance"))
        dataset, model = _object(provenance.get("dataset")), _object(provenance.get("model"))
        if not isinstance(dataset.get("name"), str) or not isinstance(model.get("name"), str):
            raise XaibenchError(f"{path}: track {track!r} records no dataset and model names; cannot re-run it")
        metric_params: dict[str, dict[str, Any]] = {}
        for metric, recorded in _object(entry.get("metrics")).items():
            params = _object(_object(recorded).get("params"))
            known = getattr(classes.get(metric), "default_params", {})
            metric_params[metric] = {k: v for k, v in params.items() if k in known and k not in VOLATILE_METRIC_PARAMS}
        target = provenance.get("target") if provenance.get("target") in ("predicted", "label") else "predicted"
        specs.append(
            TrackSpec(
                name=track,
                dataset=dataset["name"],
                model=model["name"],
                dataset_params=_object(dataset.get("params")),
                model_params=_object(model.get("params")),
                target=target,
                synthetic=bool(provenance.get("synthetic", False)),
                metric_params=metric_params,
            )
        )
    return specs


def _metric_differences(
    path: Path, data: Mapping[str, Any], chosen: Sequence[Record], registry: Registry, specs: Mapping[str, Any]
) -> list[str]:
    """Each (track, metric) of ``chosen`` whose installed version or suite-given parameters differ."""
    out: list[str] = []
    for track, metric in sorted({(r.track, r.metric) for r in chosen}):
        recorded = data["tracks"][track]["metrics"][metric]
        try:
            (instance,) = resolve_metrics(registry, specs[track], [metric])
        except XaibenchError as exc:
            raise XaibenchError(f"{path}: {track}/{metric}: {exc}") from None
        where = f"{track}/{metric}"
        if isinstance(recorded.get("version"), str):
            out.append(_differs(f"{where}: metric version", recorded["version"], instance.version) or "")
        params = recorded.get("params")
        if isinstance(params, dict):
            mine = dict(instance.params)
            if "checkpoint_sha256" in params and "checkpoint_sha256" in mine:
                params = {k: v for k, v in params.items() if k not in VOLATILE_METRIC_PARAMS}
                mine = {k: v for k, v in mine.items() if k not in VOLATILE_METRIC_PARAMS}
            out.append(_differs(f"{where}: metric params", params, mine) or "")
    return [line for line in out if line]


def _track_differences(recorded: Mapping[str, Any], here: Mapping[str, Any], track: str) -> list[str]:
    """The recorded provenance of ``track`` against the one loaded here: dataset name, revision,
    parameters; model name, identity, parameters; the target rule."""
    out = []
    for part, keys in (("dataset", ("name", "revision", "params")), ("model", ("name", "identity", "params"))):
        mine, theirs = here.get(part) or {}, recorded.get(part) or {}
        for key in keys:
            if key in theirs:
                out.append(_differs(f"{track}: {part} {key}", theirs[key], mine.get(key)))
    if "target" in recorded:
        out.append(_differs(f"{track}: target", recorded["target"], here.get("target")))
    return [line for line in out if line]


def verify_submission(
    path: Path,
    registry: Registry,
    *,
    samples: int | str = DEFAULT_SAMPLES,
    seed: int | None = None,
    log: Callable[[str], None] | None = None,
) -> Verification:
    """Verify the submission file ``path`` by re-running ``samples`` of its records (a number, or
    :data:`ALL`; see the module doc); ``seed`` draws them, ``None`` (the default) a fresh seed
    (:func:`fresh_seed`), which the first note says and the verdict records. ``log`` gets the
    notes (how the records were drawn, what is re-run, where) as they come. The file is not
    changed (see :func:`record_verification`).

    Bad input raises :class:`XaibenchError` naming ``path``: a missing or unreadable file,
    invalid JSON, not a submission, no per-sample values, an explainer, suite, track or metric
    that is not installed here. Provenance that differs is not an error but a failed
    :class:`Verification` listing the differences."""
    say = log or (lambda line: None)
    started = time.perf_counter()
    samples = parse_samples(samples)
    if seed is None:
        seed = fresh_seed()
    elif isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed {seed!r} is not a non-negative integer")
    data = load_submission(path)
    records = recorded_values(path, data)
    chosen = choose(records, samples, seed)
    drawn = len(chosen) < len(records)
    block = data["explainer"]
    name = block["name"]
    result = Verification(
        path=path,
        explainer=name,
        checked=len(chosen),
        seed=seed if drawn else None,
        chosen=chosen,
        submission=data,
    )
    params = _field(path, block, "params", dict, {}, "explainer.params")
    run_seed = _field(path, data, "seed", int, 0)
    suite = _field(path, data, "suite", str, "default")
    environment = _object(data.get("environment"))
    if environment.get("executor") in IN_PROCESS_EXECUTORS:
        sandboxed = " or ".join(CLI_EXECUTORS)
        raise XaibenchError(
            f"{path}: computed with --executor {environment['executor']} (plugin code in the runner's own process, "
            f"unsandboxed): verify accepts sandboxed runs only; run it again with --executor {sandboxed}"
        )
    threads = environment.get("torch_threads", _object(data.get("run")).get("torch_threads", 1))
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise XaibenchError(f"{path}: environment.torch_threads is {threads!r}; cannot re-run it")
    device = environment.get("device") if isinstance(environment.get("device"), str) else "cpu"
    tracks = sorted({r.track for r in chosen})
    try:
        info = registry.info("explainer", name)
        given = recorded_tracks(path, data, tracks, registry) if suite not in registry.names("suite") else None
        specs = {s.name: s for s in resolve_tracks(registry, suite, tracks, given)}
    except XaibenchError as exc:
        raise XaibenchError(f"{path}: {exc}") from None
    result.notes.append(
        f"seed {seed} (--seed {seed} draws the same records again)"
        if drawn
        else f"all {len(records)} records are re-run (--samples {samples}; no draw)"
    )
    say(result.notes[0])  # before any work: a verification that fails is repeated with it

    # 1. What can be checked without loading anything: versions and parameters.
    if isinstance(block.get("version"), str):
        result.differences += [_differs(f"explainer {name} version", block["version"], info.version) or ""]
    result.differences += _metric_differences(path, data, chosen, registry, specs)
    result.differences = [d for d in result.differences if d]
    if result.differences:
        return _done(result, started)

    ids = {t: sorted({r.sample_id for r in chosen if r.track == t}) for t in tracks}
    metrics = sorted({r.metric for r in chosen})
    batch_size = _batch_size(path, data)
    if batch_size is None:
        batch_size = DEFAULT_BATCH_SIZE
        result.notes.append(f"the submission does not record its batch size: re-running with {batch_size}")
    # the recorded machine options; no progress bars, no cache (every value is computed again)
    options = RunOptions(batch_size=batch_size, threads=threads, progress=False, cache=False, device=device)

    def configure(workdir: str, samples: Mapping[str, list[str]], metric_ids: list[str]) -> RunConfig:
        try:
            return make_run_config(
                [name],
                suite=suite,
                tracks=sorted(samples),
                metrics=metric_ids,
                explainer_params={name: params},
                seed=run_seed,
                limit=_limit(path, data, sorted(samples)),
                workdir=Path(workdir),
                options=options,
                examples=0,
                samples=dict(samples),
                suite_tracks=given,
            )
        except XaibenchError as exc:
            raise XaibenchError(f"{path}: the recorded run cannot be configured here: {exc}") from None

    with tempfile.TemporaryDirectory(prefix="xaibench-verify-") as workdir:
        config = configure(workdir, ids, metrics)
        with _runner(path, config, registry, result) as runner:
            # 2. The explainer as constructed here, and each track's dataset and model.
            handle = runner.explainers[name]
            if handle.error is not None:
                result.differences.append(f"explainer {name} cannot be constructed here: {handle.error}")
            diff = _differs(f"explainer {name} params", params, dict(handle.params))
            result.differences += [diff] if diff else []
            for spec in runner.specs:
                try:
                    loaded = runner.load(spec)
                except XaibenchError as exc:
                    raise XaibenchError(f"{path}: cannot re-run track {spec.name!r}: {exc}") from None
                recorded = _object(data["tracks"][spec.name].get("provenance"))
                result.differences += _track_differences(recorded, loaded.provenance, spec.name)
            if result.differences:
                return _done(result, started)
            here = runner.environment
            _environment_notes(environment, here, result, same_device=config.device == device)
            if any(environment.get(k) != here.get(k) for k in ("cpu", "cpu_capability")):  # here names both
                result.relative_tolerance = CROSS_CPU_TOLERANCE
                result.notes.append(
                    f"computed on {'another' if environment.get('cpu') else 'an unrecorded'} processor: values "
                    f"match within {CROSS_CPU_TOLERANCE:g} relative (float rounding moves with the CPU's kernels)"
                )
            n_samples = sum(len(v) for v in ids.values())
            result.notes.insert(
                1,
                f"re-running {len(chosen)} of the records of {name} in {path} ({n_samples} samples of "
                f"{len(tracks)} track{'s' if len(tracks) != 1 else ''}, metrics {', '.join(metrics)}; "
                f"seed {run_seed}, batch size {batch_size}, device {here['device']}, {here['torch_threads']} "
                f"thread{'s' if here['torch_threads'] != 1 else ''})",
            )
            for note in result.notes[1:]:
                say(note)
            summary = runner.run().summary
        outcomes = _outcomes(summary, chosen, name, config.workdir)
    differing = []
    for record in chosen:
        mismatch = _compare(record, outcomes[record], data, result.tolerance, result.relative_tolerance)
        if mismatch is None:
            result.matched += 1
        else:
            differing.append(mismatch)
    if differing:
        differing = _in_their_batches(differing, data, batch_size, name, result, configure, registry, path)
    result.mismatches += differing
    return _done(result, started)


def _in_their_batches(
    differing: list[Mismatch],
    data: Mapping[str, Any],
    batch_size: int,
    name: str,
    result: Verification,
    configure: Callable[[str, Mapping[str, list[str]], list[str]], RunConfig],
    registry: Registry,
    path: Path,
) -> list[Mismatch]:
    """Re-run each differing record's sample again inside its original batch (the ``batch_size``
    samples of the track's order it was computed with), and return those that still differ.

    A forward pass over a batch rounds differently from one over a single image, and a metric
    that ranks pixels with near-ties (the model randomisation's Spearman correlation) can move by
    a few 1e-6 with that rounding: re-run with the samples it was batched with, the value is
    reproduced bit for bit. Said in the notes."""
    batches: dict[str, list[str]] = {}
    for m in differing:
        order = _track_order(data, m.record.track)
        if m.record.sample_id not in order:
            continue
        start = order.index(m.record.sample_id) // batch_size * batch_size
        batch = batches.setdefault(m.record.track, [])
        batch += [s for s in order[start : start + batch_size] if s not in batch]
    if not batches:
        return differing
    metrics = sorted({m.record.metric for m in differing})
    with tempfile.TemporaryDirectory(prefix="xaibench-verify-batch-") as workdir:
        config = configure(workdir, batches, metrics)
        with _runner(path, config, registry, result) as runner:
            summary = runner.run().summary
        outcomes = _outcomes(summary, [m.record for m in differing], name, config.workdir)
    still = []
    for m in differing:
        mismatch = _compare(m.record, outcomes[m.record], data, result.tolerance, result.relative_tolerance)
        if mismatch is None:
            result.matched += 1
            result.notes.append(f"{m.record}: matches when re-run in its original batch of {batch_size}")
        else:
            still.append(mismatch)
    return still


def _track_order(data: Mapping[str, Any], track: str) -> list[str]:
    """The track's samples in the order the run computed them (its ``sample_ids``, else the first
    metric's samples)."""
    block = _object(_object(data.get("tracks")).get(track))
    ids = block.get("sample_ids")
    if isinstance(ids, list):
        return [str(i) for i in ids]
    for metric in _object(block.get("metrics")).values():
        samples = _object(metric).get("samples")
        if samples:
            return [str(i) for i in samples]
    return []


def _runner(path: Path, config: RunConfig, registry: Registry, result: Verification) -> Runner:
    """The runner of ``config``; on the CPU when the recorded device is not available here (noted)."""
    try:
        return Runner(config, registry)
    except XaibenchError as exc:
        if not str(exc).startswith("--device") or config.device == "cpu":
            raise XaibenchError(f"{path}: {exc}") from None
        reason = str(exc).split(":", 1)[1].split(";")[0].strip()
        result.notes.append(
            f"the recorded device {config.device} is not available here ({reason}): re-running on cpu, "
            "where values may differ"
        )
        config.device = "cpu"
    try:
        return Runner(config, registry)
    except XaibenchError as exc:
        raise XaibenchError(f"{path}: {exc}") from None


def _environment_notes(
    recorded: Mapping[str, Any], here: Mapping[str, Any], result: Verification, *, same_device: bool
) -> None:
    """Notes on what differs from the recorded environment and may change numbers (not failures);
    a device already replaced by the CPU (``same_device`` false) has its note."""
    keys = (
        ("device_name", "device"),
        ("torch", "torch"),
        ("xaibench", "xaibench"),
        ("cpu", "the CPU"),
        ("cpu_capability", "CPU kernels"),
    )
    for key, what in keys if same_device else keys[1:]:
        theirs, mine = recorded.get(key), here.get(key)
        if theirs is not None and mine is not None and theirs != mine:
            result.notes.append(f"recorded with {what} {theirs}, re-run with {mine}: values may differ")


Outcome = tuple[float | None, str | None]
"""A re-run record: its value, and its n/a reason when the value is ``None`` (:data:`MISSING`
when the re-run did not produce the record)."""


def _outcomes(
    summary: Mapping[str, Any], records: Sequence[Record], explainer: str, workdir: Path
) -> dict[Record, Outcome]:
    """What the re-run of ``workdir`` (its ``summary``) gave for each of ``records``: the value from
    the summary; for an n/a, its reason from the per-sample records the re-run wrote (the summary
    counts reasons per metric only)."""
    out: dict[Record, Outcome] = {}
    for record in records:
        try:
            samples = summary["tracks"][record.track]["explainers"][explainer]["metrics"][record.metric]["samples"]
            value = samples[record.sample_id]
        except (KeyError, TypeError):
            out[record] = (None, MISSING)
            continue
        out[record] = (None, None) if value is None else (float(value), None)
    if any(value is None and reason is None for value, reason in out.values()):
        reasons = _na_reasons(workdir)
        for record, (value, reason) in out.items():
            if value is None and reason is None:
                out[record] = (None, reasons.get(_key(record), MISSING))
    return out


def _na_reasons(workdir: Path) -> dict[tuple[str, str, str], str]:
    """``(track, metric, sample) -> na_reason`` of every n/a record a re-run wrote into ``workdir``
    (it runs one explainer)."""
    from xaibench.runner import RecordStore, journals

    out: dict[tuple[str, str, str], str] = {}
    for journal in journals(workdir / "results"):
        for record in RecordStore(journal).iter_records():
            reason = record.get("na_reason")
            if record.get("value") is None and isinstance(reason, str):
                out[(str(record.get("track")), str(record.get("metric")), str(record.get("sample_id")))] = reason
    return out


def _matches(recorded: float | None, rerun: float | None, tolerance: float, relative: float = 0.0) -> bool:
    """Two values within ``max(tolerance, relative |recorded|)``, or both n/a (the reasons are
    compared by :func:`_compare`)."""
    if recorded is None or rerun is None:
        return recorded is None and rerun is None
    return abs(recorded - rerun) <= max(tolerance, relative * abs(recorded))


def _compare(
    record: Record, outcome: Outcome, data: Mapping[str, Any], tolerance: float, relative: float = 0.0
) -> Mismatch | None:
    """``None`` when the re-run ``outcome`` reproduces ``record`` (module doc, step 4), else the mismatch."""
    value, reason = outcome
    expected = recorded_reasons(data, record.track, record.metric) if record.value is None else None
    if reason != MISSING and _matches(record.value, value, tolerance, relative):
        if record.value is None and expected is not None and reason not in expected:
            return Mismatch(record, value, reason, expected)
        return None
    return Mismatch(record, value, reason, expected)


def _done(result: Verification, started: float) -> Verification:
    result.seconds = time.perf_counter() - started
    result.verified_at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return result


def record_verification(path: Path, result: Verification, verified: Mapping[str, Any] | None = None) -> None:
    """Write ``result.block()`` as the top-level ``verification`` object of the submission file
    ``path`` (atomically; an earlier one is replaced). ``verified`` is the content that was
    verified: when the file no longer holds it (rewritten meanwhile), nothing is written and
    :class:`XaibenchError` says so."""
    data = load_submission(path)
    if verified is not None:
        strip = {k: v for k, v in verified.items() if k != "verification"}
        if {k: v for k, v in data.items() if k != "verification"} != strip:
            raise XaibenchError(f"{path}: changed while it was being verified; verification not recorded")
    data["verification"] = result.block()
    try:
        write_json_atomic(path, data, inline_scalars=True)
    except OSError as exc:
        raise XaibenchError(f"{path}: cannot record the verification ({exc.strerror or exc})") from None
