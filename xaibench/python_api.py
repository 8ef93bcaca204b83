"""``xaibench.run(...)``: the command ``xaibench run`` as a Python function, for notebooks.

The command line's ``run`` calls it (:func:`run_with`), so both are one operation: the
:class:`~xaibench.runner.config.RunConfig` is made by :func:`xaibench.runner.config.make_run_config`,
run by a :class:`~xaibench.runner.run.Runner`, then published (submission files, the
leaderboard files and the site) when given where (``output_path=``; the command line publishes
in its current folder by default), and returns a :class:`RunResults`: the run summary, the paths
written, and the records and the leaderboard as pandas DataFrames (:mod:`xaibench.results`).
Nothing is printed but the progress bars (``progress=False`` hides them). Every bad argument
raises :class:`~xaibench.errors.XaibenchError` with one line naming the argument, before any work.
See docs/python-api.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xaibench.errors import XaibenchError
from xaibench.files import check_writable_folder
from xaibench.publish.record_bundle import join_record
from xaibench.run_results import RunResults, run_board
from xaibench.runner import (
    ADHOC_SUITE,
    API,
    EXECUTORS,
    RUN_DEFAULTS,
    RunOptions,
    Spelling,
    make_run_config,
    parameter_mapping,
    run_outputs,
    suite_tracks,
)
from xaibench.runner import data_dir as with_data_dir
from xaibench.site.publishing import publish_leaderboard

if TYPE_CHECKING:
    from xaibench.plugins.manager import Registry

__all__ = ["ADHOC_SUITE", "EXECUTORS", "MetaResults", "RunResults", "meta", "run"]


# ----------------------------------------------------------------------------- arguments


def _names(value: str | Sequence[str] | None, argument: str) -> list[str]:
    """``"a,b"`` or ``["a", "b,c"]`` -> ``["a", "b", "c"]``, as the CLI splits repeated options."""
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, Sequence) or not all(isinstance(v, str) for v in items):
        raise XaibenchError(f"{argument}={value!r}: expected a name, a comma-separated string or a list of names")
    return [v.strip() for item in items for v in item.split(",") if v.strip()]


def explainer_params(value: Any, running: Sequence[str], spelling: Spelling = API) -> dict[str, dict[str, Any]]:
    """``params={"gradient": {"smooth": True}}`` (``--param gradient.smooth=true``): the one check of
    explainer parameters, for both front doors; every explainer named must be run (a typo would
    be silently ignored). The line names the parameter as ``spelling`` spells it:
    ``params['gradient']`` in Python, ``gradient.smooth`` on the command line."""
    out: dict[str, dict[str, Any]] = {}
    for name, values in parameter_mapping(value, "params").items():
        if name not in running:
            where = f"{name}.{next(iter(values))}" if spelling("params").startswith("-") else f"params[{name!r}]"
            raise XaibenchError(f"{where}: explainer {name!r} is not run (running: {', '.join(running)})")
        out[name] = parameter_mapping(values, f"params[{name!r}]")
    return out


def _writable_folder(path: Path, argument: str, spelling: Spelling) -> None:
    """Fail at once, naming the argument as ``spelling`` spells it, when ``path`` cannot be a
    folder we write in (the messages match those of the runner's workdir lock)."""
    check_writable_folder(path, spelling.value(argument, str(path)))


def check_publish_targets(
    submissions: Path, board_dir: Path | None, spelling: Spelling, *, board_folder: bool = True
) -> None:
    """Folders that cannot be written, a leaderboard folder holding files xaibench did not write
    (``board_folder``: it is replaced whole) and a bad submission already in the folder would
    fail the publishing after the run: fail before it, changing nothing (``xaibench.run`` and
    ``xaibench run``; ``xaibench tune --submit``). The runner's workdir lock checks the workdir the same way."""
    from xaibench.publish.validation import require_valid, submission_files

    _writable_folder(submissions, "submissions", spelling)
    if board_dir is not None:
        _writable_folder(board_dir, "leaderboard_dir", spelling)
        if board_folder:
            from xaibench.site.board_folder import check_board_dir

            check_board_dir(board_dir)
    require_valid(submission_files([submissions]))


# ----------------------------------------------------------------------------- run


def run(
    explainers: str | Sequence[str],
    *,
    suite: str | Path | None = None,
    tracks: str | Sequence[str] | None = None,
    metrics: str | Sequence[str] | None = None,
    model: str | None = None,
    dataset: str | None = None,
    model_params: Mapping[str, Any] | None = None,
    dataset_params: Mapping[str, Any] | None = None,
    target: str = "predicted",
    track_name: str | None = None,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    limit: int | None = None,
    seed: int = 0,
    output_path: str | Path | None = None,
    workdir: str | Path | None = None,
    submissions: str | Path | None = None,
    leaderboard_dir: str | Path | None = None,
    publish: bool = True,
    site: bool = True,
    data_dir: str | Path | None = None,
    timeout: float | None = RUN_DEFAULTS.timeout,
    batch_size: int = RUN_DEFAULTS.batch_size,
    threads: int = RUN_DEFAULTS.threads,
    cache: bool = RUN_DEFAULTS.cache,
    executor: str = RUN_DEFAULTS.executor,
    workers: int = RUN_DEFAULTS.workers,
    ray_address: str | None = RUN_DEFAULTS.ray_address,
    device: str = RUN_DEFAULTS.device,
    progress: bool = RUN_DEFAULTS.progress,
) -> RunResults:
    """Run explainers on a suite, or on one ad-hoc track, and publish, as ``xaibench run`` does.

    The arguments are the options of ``xaibench run`` (``xaibench run --help``):

    - ``explainers``: names, a list or a comma-separated string (``"gradient,random"``); ``"all"``
      and ``"default"`` as on the command line.
    - ``suite``: a suite plugin's name (``"default"`` when nothing else is given) or a suite file
      (``*.toml``). ``tracks`` runs only those of its tracks; ``metrics`` only those metric ids
      (``family:<name>`` selects a family, ``all`` every default metric,
      ``default`` the quick set ad-hoc tracks run; docs/suites.md).
    - An ad-hoc track instead of a suite: ``model`` and ``dataset`` as ``NAME`` or ``NAME:ARG``
      (``"timm:resnet18"``, ``"folder:/data/cats"``, ``"hf:/data/parquet"``), with
      ``model_params`` / ``dataset_params`` (e.g. ``{"checkpoint": "resnet18.pth"}``), ``target``
      (``"predicted"`` or ``"label"``) and ``track_name`` (default ``<model>-on-<dataset>``).
    - ``params``: explainer parameters by explainer, ``{"gradient": {"smooth": True}}`` (``--param``).
    - ``limit`` (samples per track), ``seed``.
    - Where it writes: ``output_path`` DIR puts the workdir in ``DIR/.xaibench``, the submissions
      in ``DIR/submissions`` and the leaderboard in ``DIR/leaderboard``; ``workdir``,
      ``submissions`` and ``leaderboard_dir`` put one of them elsewhere (the leaderboard needs
      the submissions). Without ``output_path`` the workdir is ``<cache>/runs``
      (``$XAIBENCH_CACHE``, else ``~/.cache/xaibench``: explanations are reused across calls) and
      only the folders given are published, so nothing is written in the current folder.
      ``publish=False``: no submissions, leaderboard or site (``--no-publish``); ``site``: also
      build the static site in ``<leaderboard_dir>/site``.
    - ``data_dir``: root of the real datasets (``XAIBENCH_DATA_DIR``, set for this call only).
    - ``timeout`` (seconds per explainer call; ``None`` or 0: none), ``batch_size``, ``threads``,
      ``cache``, ``executor`` (``"local"`` worker processes, ``"ray"``, or ``"inprocess"`` for
      trusted code), ``workers``, ``ray_address``, ``device`` (``auto``, ``cpu``, ``cuda[:N]``, ``mps``),
      ``progress`` (progress bars). The plugins are the installed ones (``xaibench list plugins``).

    Returns a :class:`RunResults`. A track that cannot be loaded is reported in
    ``RunResults.failed`` (the command line exits 1 for it); the other tracks still run. A run
    whose answer cannot be read (tracks mostly n/a) is reported in ``RunResults.errors``, and
    what to doubt (e.g. a model at chance) in ``RunResults.warnings``; neither raises.
    """
    options = RunOptions(
        batch_size=batch_size,
        timeout=timeout,
        threads=threads,
        progress=progress,
        cache=cache,
        executor=executor,
        workers=workers,
        ray_address=ray_address,
        device=device,
    )
    return run_with(
        API,
        explainers,
        suite=suite,
        tracks=tracks,
        metrics=metrics,
        model=model,
        dataset=dataset,
        model_params=model_params,
        dataset_params=dataset_params,
        target=target,
        track_name=track_name,
        params=params,
        limit=limit,
        seed=seed,
        output_path=output_path,
        workdir=workdir,
        submissions=submissions,
        leaderboard_dir=leaderboard_dir,
        publish=publish,
        site=site,
        data_dir=data_dir,
        options=options,
    )


def run_with(
    spelling: Spelling,
    explainers: str | Sequence[str],
    *,
    suite: str | Path | None,
    tracks: str | Sequence[str] | None,
    metrics: str | Sequence[str] | None,
    model: str | None,
    dataset: str | None,
    model_params: Mapping[str, Any] | None,
    dataset_params: Mapping[str, Any] | None,
    target: str,
    track_name: str | None,
    params: Mapping[str, Mapping[str, Any]] | None,
    limit: int | None,
    seed: int,
    output_path: str | Path | None,
    workdir: str | Path | None,
    submissions: str | Path | None,
    leaderboard_dir: str | Path | None,
    publish: bool,
    site: bool,
    data_dir: str | Path | None,
    options: RunOptions,
) -> RunResults:
    """:func:`run` with messages that name each argument as ``spelling`` spells it: the command
    line calls this with ``--option`` spellings (:data:`xaibench.runner.config.CLI`), so both
    front doors are one operation. The arguments are :func:`run`'s (every one given), its machine
    options (batch size, timeout, threads, ...) as one :class:`~xaibench.runner.config.RunOptions`."""
    from xaibench.plugins.manager import get_registry
    from xaibench.runner import Runner, resolve_explainers

    registry = get_registry()
    names = _names(explainers, "explainers")
    checked_params = explainer_params(params, resolve_explainers(registry, names), spelling)
    suite_name, tracks_to_run = suite_tracks(
        suite,
        model,
        dataset,
        model_params=model_params,
        dataset_params=dataset_params,
        target=target if target != "predicted" else None,
        track_name=track_name,
        spelling=spelling,
    )
    outputs = run_outputs(
        output_path,
        workdir=workdir,
        submissions=submissions,
        leaderboard_dir=leaderboard_dir,
        publish=publish,
        spelling=spelling,
    )
    config = make_run_config(
        names,
        suite=suite_name,
        suite_tracks=tracks_to_run,
        tracks=_names(tracks, "tracks"),
        metrics=_names(metrics, "metrics"),
        explainer_params=checked_params,
        seed=seed,
        limit=limit,
        workdir=outputs.workdir,
        options=options,
        spelling=spelling,
    )
    subs, board_dir = outputs.submissions, outputs.leaderboard_dir
    if subs is not None:  # fail before the run, changing nothing
        check_publish_targets(subs, board_dir, spelling)
    with with_data_dir(data_dir, spelling):
        with Runner(config, registry) as runner:
            if model and tracks_to_run:  # the ad-hoc track: a dataset or model that cannot load fails first
                runner.load(tracks_to_run[0])
            result = runner.run()
        out = RunResults(
            summary=result.summary,
            workdir=config.workdir,
            failed={t: s["error"] for t, s in result.summary["tracks"].items() if "error" in s},
        )
        if subs is not None:
            from xaibench.publish.submission import write_run

            out.submissions_dir = subs
            out.submission_files = list(write_run(result, registry, subs))
            out.record = join_record(subs, result.summary, suite_name) if isinstance(suite_name, str) else None
            if board_dir is not None:
                _publish(out, subs, board_dir, site=site, registry=registry)
        joined = out.record.files if out.record is not None and out.record.joined else []
        out.board = run_board(result.summary, registry, [*out.submission_files, *joined])
    return out


def _publish(out: RunResults, submissions: Path, board_dir: Path, *, site: bool, registry: Registry) -> None:
    """The leaderboard files (and the site) of the run's results."""
    published = publish_leaderboard(submissions, board_dir, with_site=site, registry=registry)
    out.published = published
    out.leaderboard_dir = board_dir
    out.leaderboard_files = published.files
    out.site_dir = published.site_dir


# ----------------------------------------------------------------------------- meta-evaluation

# Meta-evaluation lives in xaibench.metaeval.pipeline; meta() builds its context and injects run().
from xaibench.metaeval.pipeline import CONSISTENCY_CHOICES, MetaResults  # noqa: E402


def meta(
    explainers: str | Sequence[str] = "default",
    *,
    suite: str | Path | None = None,
    tracks: str | Sequence[str] | None = None,
    output_path: str | Path | None = None,
    submissions: str | Path | None = None,
    out: str | Path | None = None,
    seed: int = 0,
    data_dir: str | Path | None = None,
    consistency: str = "synthetic",
    protocol: bool = True,
    **run_options: Any,
) -> MetaResults:
    """Meta-evaluation (DESIGN 9, ``xaibench meta``): how far each metric can be trusted on each
    track. With ``submissions`` and no ``suite``, it assesses that folder's submissions as they
    are. Otherwise it first runs ``explainers`` on ``suite`` (default ``"default"``) as
    :func:`run` does, writing into ``output_path`` (required then; the cache and records of an
    earlier run there are reused), and assesses that run's tracks. ``meta.json`` and ``meta.csv``
    go to ``out`` (default ``<output_path>/meta``, else ``<submissions>/../meta``). ``run_options``
    are :func:`run`'s other arguments. ``consistency``: the tracks where noise resilience and
    adversarial reactivity (IAC, IEC, MC) are measured, through perturbed runs: ``synthetic`` (the
    default: tracks with a synthetic model, cheap to re-run twenty times), ``all`` or ``none``.
    ``protocol``: also measure protocol sensitivity (each ranking metric's documented settings run
    again, :mod:`xaibench.metaeval.protocol_runs`; ``False``: skipped)."""
    from xaibench.errors import XaibenchError
    from xaibench.metaeval.pipeline import MetaContext, assess_submissions, run_meta
    from xaibench.plugins.manager import get_registry

    if suite is None and submissions is not None:
        return assess_submissions(Path(submissions), out, seed=seed, tracks=_names(tracks, "tracks") or None)
    if consistency not in CONSISTENCY_CHOICES:
        raise XaibenchError(f"meta: consistency must be one of {', '.join(CONSISTENCY_CHOICES)}, not {consistency!r}")
    if output_path is None and submissions is None:
        raise XaibenchError("meta: give output_path (where the run writes) or submissions (a folder to assess)")
    context = MetaContext(
        registry=get_registry(),
        run=run,
        explainers=explainers,
        suite=suite or "default",
        tracks=tracks,
        seed=seed,
        limit=run_options.get("limit"),
        output_path=output_path,
        submissions=submissions,
        out=out,
        data_dir=data_dir,
        consistency=consistency,
        protocol=protocol,
        run_options=run_options,
    )
    result = run_meta(context)
    results = result.run
    if results.leaderboard_dir is not None:  # the run's leaderboard again, now gated, with the metrics page
        with_site = results.site_dir is not None
        published = publish_leaderboard(
            results.submissions_dir, results.leaderboard_dir, with_site=with_site, meta=result.json_path
        )
        results.published, results.leaderboard_files = published, published.files
        results.site_dir = published.site_dir
    return result
