"""Meta-evaluation of a run, end to end (DESIGN 9, ``xaibench meta``, :func:`xaibench.python_api.meta`).

:func:`run_meta` takes a :class:`MetaContext`: what was asked (explainers, suite, tracks, seed, where
to write, the run options) and the injected ``run``, :func:`xaibench.python_api.run` (the run and
its publishing live above this package, as :mod:`xaibench.metaeval.verify` takes its ``rerun``).
It runs the suite through ``run``, then assesses the run's tracks from the submissions it published
(:func:`xaibench.metaeval.submissions.meta_of_submissions`) with the figures that need runs of
their own, made through ``run`` or the runner into ``<workdir>/meta``:

- validity: the graded-oracle ladder of the alignment metrics (:func:`_ladder`,
  :mod:`xaibench.metaeval.ladder`) and the planted-cue test of the faithfulness metrics
  (:func:`_planted_cue`, :mod:`xaibench.metaeval.planted`), both scored by :func:`reference_values`;
- the human ceiling of the alignment metrics on ``human-attention`` (:func:`_human_ceilings`,
  :mod:`xaibench.metaeval.ceiling`);
- noise resilience and adversarial reactivity (:func:`_consistency`,
  :mod:`xaibench.metaeval.consistency_runs`);
- protocol sensitivity (:func:`_protocol`, :mod:`xaibench.metaeval.protocol_runs`).

:func:`assess_submissions` assesses a submissions folder as it is, without any run.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xaibench.errors import XaibenchError
from xaibench.runner import RunOptions

if TYPE_CHECKING:
    from xaibench.api import TrackSpec
    from xaibench.plugins.manager import Registry

# The workdir of meta's own runs (the reference explainers ``ladder`` and ``planted``), inside the
# run's: their records, summary and cache stay apart from the run they assess.
META_WORKDIR = "meta"
CONSISTENCY_CHOICES = ("synthetic", "all", "none")
RUN_CONFIG_OPTIONS = tuple(f.name for f in fields(RunOptions))
"""The machine options (:class:`xaibench.runner.RunOptions`) meta's own re-runs take from the run's."""

# ``run(explainers, **arguments)``: :func:`xaibench.python_api.run` (its arguments; it returns a
# :class:`xaibench.python_api.RunResults`), injected: the runner's front door lives above this package
RunFunction = Callable[..., Any]


@dataclass
class MetaResults:
    """What :func:`xaibench.python_api.meta` returns: the cards by track
    (:class:`xaibench.metaeval.assess.TrackMeta`), the files written, the run it assessed (a
    :class:`xaibench.python_api.RunResults`; ``None`` when it read existing submissions), and the
    known-answer tests of the mechanism tracks (:class:`xaibench.metaeval.known_answer.KnownAnswer`)."""

    tracks: dict[str, Any]
    json_path: Path
    csv_path: Path
    run: Any = None
    known_answer: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class MetaContext:
    """One meta-evaluation of a run: what :func:`xaibench.python_api.meta` was asked and the ``run``
    it injects. ``explainers``, ``suite`` (a suite plugin's name or a suite file), ``tracks``,
    ``seed``, ``output_path``, ``submissions``, ``data_dir`` and ``run_options`` are ``run``'s
    arguments; ``limit`` is ``run_options``' (samples per track); ``out``: where ``meta.json`` and
    ``meta.csv`` go (default ``<output_path>/meta``, else ``<submissions>/../meta``);
    ``consistency``: one of :data:`CONSISTENCY_CHOICES`; ``protocol``: measure protocol sensitivity.

    :func:`run_meta` fills in the rest once the run is made: ``results`` (the run's
    :class:`xaibench.python_api.RunResults`), ``ran`` (the tracks of its summary, sorted),
    ``suite_name`` and ``specs`` (those tracks resolved, in that order)."""

    registry: Registry
    run: RunFunction
    explainers: str | Sequence[str]
    suite: str | Path
    tracks: str | Sequence[str] | None = None
    seed: int = 0
    limit: int | None = None
    output_path: str | Path | None = None
    submissions: str | Path | None = None
    out: str | Path | None = None
    data_dir: str | Path | None = None
    consistency: str = "synthetic"
    protocol: bool = True
    run_options: Mapping[str, Any] = field(default_factory=dict)
    results: Any = None
    ran: tuple[str, ...] = ()
    suite_name: str = ""
    specs: tuple[TrackSpec, ...] = ()

    @property
    def workdir(self) -> Path:
        """The run's workdir (meta's own runs go to ``<workdir>/meta``, :data:`META_WORKDIR`)."""
        return Path(self.results.workdir)

    def specs_of(self, names: Collection[str]) -> list[TrackSpec]:
        """The run's resolved tracks named in ``names``, in the run's (sorted) order."""
        return [s for s in self.specs if s.name in names]


def assess_submissions(
    folder: Path, out: str | Path | None = None, *, seed: int = 0, tracks: list[str] | None = None
) -> MetaResults:
    """The meta-evaluation of the submissions in ``folder`` as they are (no run): ``meta.json`` and
    ``meta.csv`` go to ``out`` (default ``<folder>/../meta``); ``tracks``: only those (``None``: all)."""
    from xaibench.metaeval.submissions import meta_of_submissions

    target = Path(out) if out is not None else folder.parent / "meta"
    result = meta_of_submissions(folder, target, seed=seed, tracks=tracks)
    return MetaResults(result.tracks, result.json_path, result.csv_path, known_answer=result.known_answer)


def run_meta(context: MetaContext) -> MetaResults:
    """Run ``context``'s suite through its ``run`` and assess the run's tracks (see the module doc):
    ``meta.json`` and ``meta.csv`` go to ``context.out``. Returns the cards, the files and the run."""
    from xaibench.metaeval.submissions import meta_of_submissions
    from xaibench.runner import data_dir as data_dir_set
    from xaibench.runner import record_files, resolve_tracks, suite_tracks

    ctx = context
    results = ctx.run(
        ctx.explainers,
        suite=ctx.suite,
        tracks=ctx.tracks,
        seed=ctx.seed,
        output_path=ctx.output_path,
        submissions=ctx.submissions,
        data_dir=ctx.data_dir,
        **ctx.run_options,
    )
    if results.submissions_dir is None:
        raise XaibenchError("meta: the run published no submissions to assess")
    base = Path(ctx.output_path) if ctx.output_path is not None else results.submissions_dir.parent
    target = Path(ctx.out) if ctx.out is not None else base / "meta"
    ran = sorted(results.summary.get("tracks", {}))
    with data_dir_set(ctx.data_dir):  # a suite plugin's name, or a suite file whose tracks are read from it
        suite_name, given = suite_tracks(str(ctx.suite), None, None)
        specs = resolve_tracks(ctx.registry, suite_name, ran, given)
    ctx = replace(ctx, results=results, ran=tuple(ran), suite_name=suite_name, specs=tuple(specs))
    validity = _ladder(ctx)
    validity.update(_planted_cue(ctx))
    ceilings = _human_ceilings(ctx)
    mc = _consistency(ctx)
    sensitivity = _protocol(ctx) if ctx.protocol else None
    records = record_files(results.workdir / "results")
    result = meta_of_submissions(
        results.submissions_dir,
        target,
        seed=ctx.seed,
        records=records,
        tracks=ran,
        validity=validity,
        ceilings=ceilings,
        consistency=mc,
        protocol=sensitivity,
    )
    return MetaResults(result.tracks, result.json_path, result.csv_path, results, result.known_answer)


def _ladder(ctx: MetaContext) -> dict[tuple[str, str], Any]:
    """The graded-oracle ladder (:mod:`xaibench.metaeval.ladder`) of every alignment metric of the run:
    the reference explainer ``ladder`` at each level, run through the runner into
    ``<workdir>/meta`` (cached like any explainer, never published), then each metric's verdict."""
    from xaibench.results import records

    frame = records(ctx.workdir)
    aligned = frame[(frame["family"] == "alignment") & frame["track"].isin(list(ctx.ran))]
    with_truth = sorted(set(aligned.loc[aligned["explainer"] == "oracle", "track"])) or sorted(set(aligned["track"]))
    metrics = sorted(set(aligned.loc[aligned["track"].isin(with_truth), "metric"]))
    if not metrics:
        return {}
    return ladder_verdicts(
        ctx.workdir / META_WORKDIR,
        with_truth,
        metrics,
        suite=ctx.suite,
        seed=ctx.seed,
        output_path=ctx.output_path,
        data_dir=ctx.data_dir,
        run_options=ctx.run_options,
        run=ctx.run,
    )


def ladder_verdicts(
    workdir: Path,
    tracks: list[str],
    metrics: list[str],
    *,
    suite: str | Path,
    seed: int,
    output_path: str | Path | None,
    data_dir: str | Path | None,
    run_options: Mapping[str, Any],
    run: RunFunction,
) -> dict[tuple[str, str], Any]:
    """The ladder's verdict on each of ``metrics`` on ``tracks``: the reference explainer ``ladder``
    run at each level into ``workdir`` (:func:`reference_values`), then
    :func:`xaibench.metaeval.ladder.ladder_validity` by (track, metric)."""
    from xaibench.metaeval.ladder import LEVELS, ladder_validity

    scored = reference_values(
        "ladder", "a", LEVELS, workdir, tracks, metrics, suite, seed, output_path, data_dir, run_options, run=run
    )
    return {
        key: ladder_validity(values, direction, seed=seed, track=key[0], metric=key[1])
        for key, (direction, values) in scored.items()
    }


def reference_values(
    explainer: str,
    key: str,
    settings: Sequence[Any],
    workdir: Path,
    tracks: list[str],
    metrics: list[str],
    suite: str | Path,
    seed: int,
    output_path: str | Path | None,
    data_dir: str | Path | None,
    run_options: Mapping[str, Any],
    *,
    run: RunFunction,
) -> dict[tuple[str, str], tuple[str, dict[Any, dict[str, float | None]]]]:
    """Run the reference ``explainer`` once per value of its parameter ``key`` in ``settings`` on
    ``tracks`` with ``metrics``, through the runner into ``workdir`` (a run's ``<workdir>/meta``:
    cached, never published), and return, by (track, metric), the metric's direction and its per-sample values
    by setting (``None`` for n/a). ``run``: :func:`xaibench.python_api.run`, which makes each run."""
    from xaibench.results import records

    options = {k: v for k, v in run_options.items() if k not in ("publish", "params", "metrics")}
    for setting in settings:
        run(
            explainer,
            suite=suite,
            tracks=tracks,
            metrics=metrics,
            params={explainer: {key: setting}},
            seed=seed,
            output_path=output_path,
            workdir=workdir,
            publish=False,
            data_dir=data_dir,
            **options,
        )
    frame = records(workdir)
    rows = frame[(frame["explainer"] == explainer) & frame["track"].isin(tracks) & frame["metric"].isin(metrics)]
    out: dict[tuple[str, str], tuple[str, dict[Any, dict[str, float | None]]]] = {}
    for (track, metric), group in rows.groupby(["track", "metric"]):
        values: dict[Any, dict[str, float | None]] = {}
        for params, sample, value in zip(group["explainer_params"], group["sample_id"], group["value"], strict=True):
            setting = params.get(key)
            if setting in settings:
                values.setdefault(setting, {})[str(sample)] = None if value != value else float(value)
        out[(str(track), str(metric))] = (str(group["direction"].iloc[0]), values)
    return out


def _planted_cue(ctx: MetaContext) -> dict[tuple[str, str], Any]:
    """The planted-cue test (:mod:`xaibench.metaeval.planted`) of every faithfulness metric of the
    run, on its tracks whose samples carry a planted cue: the model's reliance, measured on the
    track as the run loaded it, then the reference explainer ``planted`` (cue and object) run
    through the runner into ``<workdir>/meta``, and each metric's verdict."""
    from xaibench.results import records
    from xaibench.runner import data_dir as data_dir_set
    from xaibench.runner import load_track

    frame = records(ctx.workdir)
    faithful = frame[(frame["family"] == "faithfulness") & frame["track"].isin(list(ctx.ran))]
    if faithful.empty:
        return {}
    figures: dict[str, dict[str, float]] = {}
    with data_dir_set(ctx.data_dir):
        for spec in ctx.specs_of(set(faithful["track"])):
            track = load_track(spec, ctx.registry, limit=ctx.limit)
            measured = dict(track.provenance.get("cue_reliance") or {})  # runner/track.py measures it
            measured.pop("relies_on", None)
            figures[spec.name] = measured
    figures = {t: f for t, f in figures.items() if f}
    if not figures:
        return {}
    metrics = sorted(set(faithful.loc[faithful["track"].isin(figures), "metric"]))
    return planted_verdicts(
        ctx.workdir / META_WORKDIR,
        figures,
        metrics,
        suite=ctx.suite,
        seed=ctx.seed,
        output_path=ctx.output_path,
        data_dir=ctx.data_dir,
        run_options=ctx.run_options,
        run=ctx.run,
    )


def planted_verdicts(
    workdir: Path,
    figures: Mapping[str, Mapping[str, float]],
    metrics: list[str],
    *,
    suite: str | Path,
    seed: int,
    output_path: str | Path | None,
    data_dir: str | Path | None,
    run_options: Mapping[str, Any],
    run: RunFunction,
) -> dict[tuple[str, str], Any]:
    """The planted-cue test's verdict on each of ``metrics`` on the tracks of ``figures`` (track ->
    the model's measured reliance): the reference explainer ``planted`` on the cue and on the
    object, run into ``workdir`` (:func:`reference_values`), then
    :func:`xaibench.metaeval.planted.planted_validity` by (track, metric)."""
    from xaibench.metaeval.planted import planted_validity

    scored = reference_values(
        "planted",
        "region",
        ("cue", "object"),
        workdir,
        sorted(figures),
        metrics,
        suite,
        seed,
        output_path,
        data_dir,
        run_options,
        run=run,
    )
    return {
        (track, metric): planted_validity(
            values.get("cue", {}),
            values.get("object", {}),
            direction,
            dict(figures[track]),
            seed=seed,
            track=track,
            metric=metric,
        )
        for (track, metric), (direction, values) in scored.items()
    }


def _protocol(ctx: MetaContext) -> dict[tuple[str, str], Any]:
    """Protocol sensitivity (:mod:`xaibench.metaeval.protocol_runs`) of the run's ranking metrics."""
    from xaibench.metaeval.protocol_runs import protocol_runs
    from xaibench.runner import data_dir as data_dir_set

    with data_dir_set(ctx.data_dir):
        return protocol_runs(
            ctx.registry,
            ctx.results.records,
            ctx.specs_of(ctx.ran),
            workdir=ctx.workdir,
            suite=ctx.suite_name,
            seed=ctx.seed,
            options=ctx.run_options,
        )


def _human_ceilings(ctx: MetaContext) -> dict[tuple[str, str], Any]:
    """The human ceiling (:mod:`xaibench.metaeval.ceiling`) of the alignment metrics of the run's
    tracks on ``human-attention``."""
    from xaibench.metaeval.ceiling import DATASET, human_ceiling
    from xaibench.results import records
    from xaibench.runner import data_dir as data_dir_set

    out: dict[tuple[str, str], Any] = {}
    with data_dir_set(ctx.data_dir):
        specs = [s for s in ctx.specs_of(ctx.ran) if s.dataset == DATASET]
        if not specs:
            return {}
        frame = records(ctx.workdir)
        for spec in specs:
            aligned = frame[(frame["track"] == spec.name) & (frame["family"] == "alignment")]
            names = sorted(set(aligned["metric"]))
            if not names:
                continue
            limit = min(x for x in (ctx.limit, spec.limit) if x) if (ctx.limit or spec.limit) else None
            ceiling = human_ceiling(ctx.registry, names, dataset_params=spec.dataset_params, limit=limit, seed=ctx.seed)
            for metric, value in ceiling.items():
                out[(spec.name, metric)] = value
    return out


def _consistency(ctx: MetaContext) -> dict[tuple[str, str], Any]:
    """Noise resilience and adversarial reactivity (:mod:`xaibench.metaeval.consistency_runs`) of
    the ranking metrics of the alignment and faithfulness families on the run's tracks that
    ``ctx.consistency`` selects, from the run's submissions and perturbed runs into ``<workdir>/meta``."""
    from xaibench.metaeval.consistency_runs import FAMILIES, Unperturbed, meta_consistency
    from xaibench.publish.leaderboard import entries_from_submissions, resolve_duplicates
    from xaibench.publish.submission import read_submissions
    from xaibench.runner import data_dir as data_dir_set

    which = ctx.consistency
    if which == "none" or ctx.results.submissions_dir is None:
        return {}
    kept = resolve_duplicates(read_submissions(ctx.results.submissions_dir))
    explainers = {
        s.key: (str(s.data["explainer"]["name"]), dict(s.data["explainer"].get("params") or {}))
        for s in kept
        if not s.data.get("explainer", {}).get("reference_only")
    }
    unperturbed: dict[tuple[str, str], Unperturbed] = {}
    for e in entries_from_submissions(kept):
        if e.explainer in explainers and e.track in ctx.ran and e.family in FAMILIES and e.ranking and e.samples:
            unperturbed.setdefault((e.track, e.metric), Unperturbed(e.direction, {})).values[e.explainer] = e.samples
    options = {k: v for k, v in ctx.run_options.items() if k in RUN_CONFIG_OPTIONS}
    with data_dir_set(ctx.data_dir):
        specs = [s for s in ctx.specs_of({t for t, _ in unperturbed}) if which == "all" or s.synthetic]
        if not specs:
            return {}
        return meta_consistency(
            ctx.registry,
            specs,
            {k: v for k, v in unperturbed.items() if k[0] in {s.name for s in specs}},
            explainers,
            seed=ctx.seed,
            limit=ctx.limit,
            workdir=ctx.workdir / META_WORKDIR,
            run_options=options,
        )
