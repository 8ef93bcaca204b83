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

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from xaibench.errors import XaibenchError
from xaibench.files import check_writable_folder
from xaibench.publish.record_bundle import JoinedRecord, join_record
from xaibench.runner import (
    ADHOC_SUITE,
    API,
    DEFAULT_DEVICE,
    DEFAULT_EXECUTOR,
    EXECUTORS,
    Spelling,
    data_dir,
    health_lines,
    make_run_config,
    parameter_mapping,
    record_files,
    run_outputs,
    suite_tracks,
)

if TYPE_CHECKING:
    import pandas as pd

    from xaibench.plugins.manager import Registry
    from xaibench.publish.board import Leaderboard
    from xaibench.publish.shapes import RunSummary

__all__ = ["ADHOC_SUITE", "EXECUTORS", "MetaResults", "RunResults", "meta", "reference_values", "run"]


@dataclass
class RunResults:
    """What :func:`run` returns.

    ``summary`` is the run summary (``<workdir>/summary.json``, ``xaibench.summary/1``);
    ``failed`` maps each track that could not be loaded to its error. ``submission_files``,
    ``leaderboard_files`` and ``site_dir`` are what publishing wrote (empty / ``None`` when
    nothing was published: no ``output_path``, ``submissions`` or ``leaderboard_dir``, or
    ``publish=False``). :attr:`board` ranks this run alone; :attr:`errors` and :attr:`warnings`
    say whether its answer can be read. :attr:`records` and :attr:`leaderboard` are read on first use.
    """

    summary: dict[str, Any]
    workdir: Path
    submissions_dir: Path | None = None
    submission_files: list[Path] = field(default_factory=list)
    leaderboard_dir: Path | None = None
    leaderboard_files: list[Path] = field(default_factory=list)
    site_dir: Path | None = None
    failed: dict[str, str] = field(default_factory=dict)
    published: Published | None = None
    """What publishing wrote (the board, its files, the site), ``None`` without a leaderboard."""
    board: Leaderboard | None = field(default=None, repr=False)
    """This run's board, built in memory: its explainers ranked on its tracks only (what
    ``xaibench run`` prints), against the record's submissions when it joined the record; the
    leaderboard files rank every submission of the folder."""
    record: JoinedRecord | None = None
    """The run of a suite with a record (``record-v1``) joined to it: the record's submissions
    written beside the run's, or the line saying why not (:mod:`xaibench.publish.record_bundle`)."""

    @property
    def errors(self) -> list[str]:
        """Why the run's answer cannot be read (e.g. a track mostly n/a), one line each; the
        command line prints them in red and exits 1 (:func:`xaibench.runner.health_lines`)."""
        return health_lines(self.summary)[0]

    @property
    def warnings(self) -> list[str]:
        """What to doubt in the answer (e.g. a model at chance on a track), one line each."""
        return health_lines(self.summary)[1]

    @property
    def tracks(self) -> list[str]:
        """The tracks the run scored (those that failed to load are in :attr:`failed`)."""
        return [t for t, s in self.summary["tracks"].items() if "error" not in s]

    @property
    def wall_time_s(self) -> float:
        return float(self.summary["run"]["wall_time_s"])

    @cached_property
    def records(self) -> pd.DataFrame:
        """This run's per-sample records (columns: :data:`xaibench.results.RECORD_COLUMNS`): those
        of the workdir whose track, explainer (name, version, parameters), metric (id, version,
        parameters), sample, seed, model, dataset revision and runtime the summary names, so
        records that earlier runs left in the same workdir are not included."""
        from xaibench.results import records

        frame = records(self.workdir)
        wanted = run_record_ids(self.summary)
        if frame.empty:
            return frame
        ids = frame.apply(_record_id, axis=1)
        return frame[ids.isin(wanted)].reset_index(drop=True)

    @cached_property
    def leaderboard(self) -> pd.DataFrame | None:
        """The leaderboard rebuilt after the run, from every submission in ``submissions_dir``
        (columns: :data:`xaibench.results.LEADERBOARD_COLUMNS`); ``None`` when none was written."""
        from xaibench.results import leaderboard

        return leaderboard(self.leaderboard_dir) if self.leaderboard_files and self.leaderboard_dir else None

    def __repr__(self) -> str:
        run = self.summary.get("run", {})
        explainers = sorted({e for t in self.summary["tracks"].values() for e in t.get("explainers", {})})
        failed = f", failed={sorted(self.failed)}" if self.failed else ""
        return (
            f"RunResults(suite={run.get('suite')!r}, tracks={self.tracks}, explainers={explainers}, "
            f"seed={run.get('seed')}, wall_time_s={run.get('wall_time_s')}, workdir={str(self.workdir)!r}{failed})"
        )


def _record_id(row: Any) -> tuple[Any, ...]:
    return _identity(
        row["track"],
        row["explainer"],
        row["explainer_version"],
        row["explainer_params"],
        row["metric"],
        row["metric_version"],
        row["metric_params"],
        row["sample_id"],
        row["seed"],
        row["model"],
        row["dataset_revision"],
        row["torch"],
        row["torch_threads"],
        str(row["device"]).split(":")[0],
    )


def _identity(*parts: Any) -> tuple[Any, ...]:
    """A hashable identity: mappings as canonical JSON, integers as ``int``."""
    out = []
    for p in parts:
        if isinstance(p, Mapping):
            out.append(json.dumps(p, sort_keys=True, default=str))
        elif hasattr(p, "item") and not isinstance(p, str):  # numpy / pandas scalars
            out.append(p.item())
        else:
            out.append(p)
    return tuple(out)


def run_record_ids(summary: Mapping[str, Any]) -> set[tuple[Any, ...]]:
    """The identities of the records a run summary names (see :attr:`RunResults.records`)."""
    info = summary["run"]
    device_type = info.get("device_type") or str(info.get("device", "cpu")).split(":")[0]
    out: set[tuple[Any, ...]] = set()
    for track, block in summary["tracks"].items():
        if "error" in block:
            continue
        prov = block["provenance"]
        model, revision = prov["model"]["identity"], prov["dataset"]["revision"]
        for explainer in block["explainers"].values():
            x = explainer["explainer"]
            for metric, m in explainer["metrics"].items():
                for sample in m.get("samples", {}):
                    out.add(
                        _identity(
                            track,
                            x["name"],
                            x["version"],
                            x["params"],
                            metric,
                            m["version"],
                            m["params"],
                            sample,
                            info["seed"],
                            model,
                            revision,
                            info["torch"],
                            info["torch_threads"],
                            device_type,
                        )
                    )
    return out


# ----------------------------------------------------------------------------- arguments


def _names(value: str | Sequence[str] | None, argument: str) -> list[str]:
    """``"a,b"`` or ``["a", "b,c"]`` -> ``["a", "b", "c"]``, as the CLI splits repeated options."""
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, Sequence) or not all(isinstance(v, str) for v in items):
        raise XaibenchError(f"{argument}={value!r}: expected a name, a comma-separated string or a list of names")
    return [v.strip() for item in items for v in item.split(",") if v.strip()]


def _explainer_params(value: Any, running: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``params={"gradient": {"smooth": True}}``; every explainer named must be run (as ``--param``)."""
    out: dict[str, dict[str, Any]] = {}
    for name, values in parameter_mapping(value, "params").items():
        if name not in running:
            raise XaibenchError(f"params[{name!r}]: explainer {name!r} is not run (running: {', '.join(running)})")
        out[name] = parameter_mapping(values, f"params[{name!r}]")
    return out


def _writable_folder(path: Path, argument: str, spelling: Spelling) -> None:
    """Fail at once, naming the argument as ``spelling`` spells it, when ``path`` cannot be a
    folder we write in."""
    check_writable_folder(path, spelling.value(argument, str(path)))


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
    timeout: float | None = 300.0,
    batch_size: int = 16,
    threads: int = 1,
    cache: bool = True,
    executor: str = DEFAULT_EXECUTOR,
    workers: int = 1,
    ray_address: str | None = None,
    device: str = DEFAULT_DEVICE,
    progress: bool = True,
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
    return run_with(API, **locals())


def run_with(spelling: Spelling, **arguments: Any) -> RunResults:
    """:func:`run` with messages that name each argument as ``spelling`` spells it: the command
    line calls this with ``--option`` spellings (:data:`xaibench.runner.config.CLI`), so both
    front doors are one operation."""
    from xaibench.plugins.manager import get_registry
    from xaibench.runner import Runner, resolve_explainers

    a = arguments
    registry = get_registry()
    names = _names(a["explainers"], "explainers")
    explainer_params = _explainer_params(a["params"], resolve_explainers(registry, names))
    target = a["target"] if a["target"] != "predicted" else None
    suite_name, tracks_to_run = suite_tracks(
        a["suite"],
        a["model"],
        a["dataset"],
        model_params=a["model_params"],
        dataset_params=a["dataset_params"],
        target=target,
        track_name=a["track_name"],
        spelling=spelling,
    )
    outputs = run_outputs(
        a["output_path"],
        workdir=a["workdir"],
        submissions=a["submissions"],
        leaderboard_dir=a["leaderboard_dir"],
        publish=a["publish"],
        spelling=spelling,
    )
    config = make_run_config(
        names,
        suite=suite_name,
        suite_tracks=tracks_to_run,
        tracks=_names(a["tracks"], "tracks"),
        metrics=_names(a["metrics"], "metrics"),
        explainer_params=explainer_params,
        seed=a["seed"],
        limit=a["limit"],
        workdir=outputs.workdir,
        batch_size=a["batch_size"],
        timeout=a["timeout"],
        threads=a["threads"],
        progress=a["progress"],
        cache=a["cache"],
        executor=a["executor"],
        workers=a["workers"],
        ray_address=a["ray_address"],
        device=a["device"],
        spelling=spelling,
    )
    subs, board_dir = outputs.submissions, outputs.leaderboard_dir
    if subs is not None:  # fail before the run, changing nothing
        from xaibench.publish.validation import require_valid, submission_files

        _writable_folder(subs, "submissions", spelling)
        if board_dir is not None:
            from xaibench.site.board_folder import check_board_dir

            _writable_folder(board_dir, "leaderboard_dir", spelling)
            check_board_dir(board_dir)  # replaced whole when published: refuse a folder of other files now
        require_valid(submission_files([subs]))
    with data_dir(a["data_dir"], spelling):
        with Runner(config, registry) as runner:
            if a["model"] and tracks_to_run:  # the ad-hoc track: a dataset or model that cannot load fails first
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
                _publish(out, subs, board_dir, site=a["site"], registry=registry)
        joined = out.record.files if out.record is not None and out.record.joined else []
        out.board = run_board(result.summary, registry, [*out.submission_files, *joined])
    return out


def run_board(summary: Mapping[str, Any], registry: Registry, submission_files: Sequence[Path] = ()) -> Leaderboard:
    """This run's board: its explainers ranked on its tracks only (the cross-track win rates over
    those tracks), built in memory. From the submission files the run wrote when it published
    (their disclosure kept; the tracks of earlier runs left out), else from the summary alone, so
    ``--no-publish`` writes nothing for it."""
    from xaibench.publish.board import build_board
    from xaibench.publish.submission import build_submission, load_submission, submission_name

    tracks = {t for t, block in summary["tracks"].items() if "error" not in block}
    if submission_files:
        return build_board(
            (path, {**data, "tracks": {t: v for t, v in data["tracks"].items() if t in tracks}})
            for path, data in ((p, load_submission(p)) for p in submission_files)
        )
    blocks = {
        name: entry["explainer"] for t in sorted(tracks) for name, entry in summary["tracks"][t]["explainers"].items()
    }
    made = []
    for name, block in sorted(blocks.items()):
        path = Path(submission_name(registry, name, block))
        made.append((path, build_submission(cast("RunSummary", summary), name, None)))
    return build_board(made)


@dataclass
class Published:
    """What :func:`publish_leaderboard` wrote: the board, its files, and the site (if built)."""

    board: Any
    files: list[Path]
    site_dir: Path | None = None
    pages: list[Path] = field(default_factory=list)


def publish_leaderboard(
    submissions: Path,
    board_dir: Path,
    site_dir: Path | None = None,
    *,
    with_site: bool = True,
    registry: Registry | None = None,
    meta: Path | None = None,
    linked: str | None = None,
) -> Published:
    """Validate every submission in ``submissions``, write the leaderboard files to ``board_dir``
    and, with ``with_site``, the static site (``site_dir``, default ``board_dir/site``), all
    swapped in at once (:func:`xaibench.site.board_folder.publish_board_folder`: a kill leaves
    the old folder or the new one, never a mix; a folder of other files is refused). Nothing
    is printed; ``xaibench run`` and ``xaibench leaderboard build`` print from what it returns.
    ``meta``: the ``meta.json`` of ``xaibench meta`` to apply (default: beside the submissions,
    :func:`xaibench.publish.board.meta_file`), only when it matches them (:mod:`xaibench.publish.gate`).
    ``linked``: the site links the submission files and overlays at that URL (relative to its root)
    instead of copying them (the record's site, beside its submissions)."""
    from xaibench.publish.board import build_leaderboard
    from xaibench.publish.validation import require_valid, submission_files
    from xaibench.site.board_folder import publish_board_folder

    require_valid(submission_files([submissions]))
    board = build_leaderboard(submissions, meta, keep_bytes=with_site)  # the site copies the files' bytes
    # the leaderboard files and the site land together: one staging folder swapped in whole
    written = publish_board_folder(
        board, submissions, board_dir, site_dir, with_site=with_site, registry=registry, linked=linked
    )
    published = Published(board=board, files=list(written.files))
    published.site_dir, published.pages = written.site_dir, list(written.pages)
    return published


def _publish(out: RunResults, submissions: Path, board_dir: Path, *, site: bool, registry: Registry) -> None:
    """The leaderboard files (and the site) of the run's results."""
    published = publish_leaderboard(submissions, board_dir, with_site=site, registry=registry)
    out.published = published
    out.leaderboard_dir = board_dir
    out.leaderboard_files = published.files
    out.site_dir = published.site_dir


# ----------------------------------------------------------------------------- meta-evaluation

# The workdir of meta's own runs (the reference explainers ``ladder`` and ``planted``), inside the
# run's: their records, summary and cache stay apart from the run they assess.
META_WORKDIR = "meta"
CONSISTENCY_CHOICES = ("synthetic", "all", "none")
RUN_CONFIG_OPTIONS = (
    *("batch_size", "threads", "executor", "workers", "ray_address", "device", "timeout", "progress", "cache"),
)


@dataclass
class MetaResults:
    """What :func:`meta` returns: the cards by track (:class:`xaibench.metaeval.assess.TrackMeta`),
    the files written, the run it assessed (``None`` when it read existing submissions), and the
    known-answer tests of the mechanism tracks (:class:`xaibench.metaeval.known_answer.KnownAnswer`)."""

    tracks: dict[str, Any]
    json_path: Path
    csv_path: Path
    run: RunResults | None = None
    known_answer: list[Any] = field(default_factory=list)


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
    again, :mod:`xaibench.applications.meta_protocol`; ``False``: skipped)."""
    from xaibench.errors import XaibenchError
    from xaibench.metaeval.submissions import meta_of_submissions

    if suite is None and submissions is not None:
        folder = Path(submissions)
        target = Path(out) if out is not None else folder.parent / "meta"
        wanted = _names(tracks, "tracks") or None
        result = meta_of_submissions(folder, target, seed=seed, tracks=wanted)
        return MetaResults(result.tracks, result.json_path, result.csv_path, known_answer=result.known_answer)
    if consistency not in CONSISTENCY_CHOICES:
        raise XaibenchError(f"meta: consistency must be one of {', '.join(CONSISTENCY_CHOICES)}, not {consistency!r}")
    if output_path is None and submissions is None:
        raise XaibenchError("meta: give output_path (where the run writes) or submissions (a folder to assess)")
    results = run(
        explainers,
        suite=suite or "default",
        tracks=tracks,
        seed=seed,
        output_path=output_path,
        submissions=submissions,
        data_dir=data_dir,
        **run_options,
    )
    if results.submissions_dir is None:
        raise XaibenchError("meta: the run published no submissions to assess")
    base = Path(output_path) if output_path is not None else results.submissions_dir.parent
    target = Path(out) if out is not None else base / "meta"
    ran = sorted(results.summary.get("tracks", {}))
    validity = _ladder(results, ran, suite or "default", seed, output_path, data_dir, run_options)
    validity.update(_planted_cue(results, ran, suite or "default", seed, output_path, data_dir, run_options))
    ceilings = _human_ceilings(results, ran, suite or "default", seed, data_dir, run_options)
    mc = _consistency(results, ran, suite or "default", seed, data_dir, run_options, consistency)
    sensitivity = _protocol(results, ran, suite or "default", seed, data_dir, run_options) if protocol else None
    records = record_files(results.workdir / "results")
    result = meta_of_submissions(
        results.submissions_dir,
        target,
        seed=seed,
        records=records,
        tracks=ran,
        validity=validity,
        ceilings=ceilings,
        consistency=mc,
        protocol=sensitivity,
    )
    if results.leaderboard_dir is not None:  # the run's leaderboard again, now gated, with the metrics page
        with_site = results.site_dir is not None
        published = publish_leaderboard(
            results.submissions_dir, results.leaderboard_dir, with_site=with_site, meta=result.json_path
        )
        results.published, results.leaderboard_files = published, published.files
        results.site_dir = published.site_dir
    return MetaResults(result.tracks, result.json_path, result.csv_path, results, result.known_answer)


def _ladder(
    results: RunResults,
    tracks: list[str],
    suite: str | Path,
    seed: int,
    output_path: str | Path | None,
    data_dir: str | Path | None,
    run_options: Mapping[str, Any],
) -> dict[tuple[str, str], Any]:
    """The graded-oracle ladder (:mod:`xaibench.metaeval.ladder`) of every alignment metric of the run:
    the reference explainer ``ladder`` at each level, run through the runner into
    ``<workdir>/meta`` (cached like any explainer, never published), then each metric's verdict."""
    from xaibench.metaeval.ladder import LEVELS, ladder_validity
    from xaibench.results import records

    frame = records(results.workdir)
    aligned = frame[(frame["family"] == "alignment") & frame["track"].isin(tracks)]
    with_truth = sorted(set(aligned.loc[aligned["explainer"] == "oracle", "track"])) or sorted(set(aligned["track"]))
    metrics = sorted(set(aligned.loc[aligned["track"].isin(with_truth), "metric"]))
    if not metrics:
        return {}
    scored = reference_values(
        "ladder",
        "a",
        LEVELS,
        results.workdir / META_WORKDIR,
        with_truth,
        metrics,
        suite,
        seed,
        output_path,
        data_dir,
        run_options,
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
) -> dict[tuple[str, str], tuple[str, dict[Any, dict[str, float | None]]]]:
    """Run the reference ``explainer`` once per value of its parameter ``key`` in ``settings`` on
    ``tracks`` with ``metrics``, through the runner into ``workdir`` (a run's ``<workdir>/meta``:
    cached, never published), and return, by (track, metric), the metric's direction and its per-sample values
    by setting (``None`` for n/a)."""
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


def _planted_cue(
    results: RunResults,
    tracks: list[str],
    suite: str | Path,
    seed: int,
    output_path: str | Path | None,
    data_dir: str | Path | None,
    run_options: Mapping[str, Any],
) -> dict[tuple[str, str], Any]:
    """The planted-cue test (:mod:`xaibench.metaeval.planted`) of every faithfulness metric of the
    run, on its tracks whose samples carry a planted cue: the model's reliance, measured on the
    track as the run loaded it, then the reference explainer ``planted`` (cue and object) run
    through the runner into ``<workdir>/meta``, and each metric's verdict."""
    from xaibench.metaeval.planted import planted_validity
    from xaibench.plugins.manager import get_registry
    from xaibench.results import records
    from xaibench.runner import data_dir as data_dir_set
    from xaibench.runner import load_track, resolve_tracks

    frame = records(results.workdir)
    faithful = frame[(frame["family"] == "faithfulness") & frame["track"].isin(tracks)]
    if faithful.empty:
        return {}
    registry = get_registry()
    figures: dict[str, dict[str, float]] = {}
    with data_dir_set(data_dir):
        specs = resolve_tracks(registry, *_suite(suite, sorted(set(faithful["track"]))))
        for spec in specs:
            track = load_track(spec, registry, limit=run_options.get("limit"))
            measured = dict(track.provenance.get("cue_reliance") or {})  # runner/track.py measures it
            measured.pop("relies_on", None)
            figures[spec.name] = measured
    figures = {t: f for t, f in figures.items() if f}
    if not figures:
        return {}
    metrics = sorted(set(faithful.loc[faithful["track"].isin(figures), "metric"]))
    scored = reference_values(
        "planted",
        "region",
        ("cue", "object"),
        results.workdir / META_WORKDIR,
        sorted(figures),
        metrics,
        suite,
        seed,
        output_path,
        data_dir,
        run_options,
    )
    return {
        (track, metric): planted_validity(
            values.get("cue", {}),
            values.get("object", {}),
            direction,
            figures[track],
            seed=seed,
            track=track,
            metric=metric,
        )
        for (track, metric), (direction, values) in scored.items()
    }


def _protocol(
    results: RunResults,
    tracks: list[str],
    suite: str | Path,
    seed: int,
    data_dir: str | Path | None,
    run_options: Mapping[str, Any],
) -> dict[tuple[str, str], Any]:
    """Protocol sensitivity (:mod:`xaibench.applications.meta_protocol`) of the run's ranking metrics."""
    from xaibench.applications.meta_protocol import protocol_runs
    from xaibench.plugins.manager import get_registry
    from xaibench.runner import data_dir as data_dir_set
    from xaibench.runner import resolve_tracks

    registry = get_registry()
    suite_name, wanted, given = _suite(suite, tracks)
    with data_dir_set(data_dir):
        specs = resolve_tracks(registry, suite_name, wanted, given)
        return protocol_runs(
            registry, results.records, specs, workdir=results.workdir, suite=suite_name, seed=seed, options=run_options
        )


def _suite(suite: str | Path, tracks: list[str]) -> tuple[str, list[str], list[Any] | None]:
    """:func:`xaibench.runner.run.resolve_tracks`'s arguments for ``tracks`` of ``suite``, a suite
    plugin's name or a suite file (whose tracks are read from it)."""
    name, given = suite_tracks(str(suite), None, None)
    return name, tracks, given


def _human_ceilings(
    results: RunResults,
    tracks: list[str],
    suite: str | Path,
    seed: int,
    data_dir: str | Path | None,
    run_options: Mapping[str, Any],
) -> dict[tuple[str, str], Any]:
    """The human ceiling (:mod:`xaibench.metaeval.ceiling`) of the alignment metrics of the run's
    tracks on ``human-attention``."""
    from xaibench.metaeval.ceiling import DATASET, human_ceiling
    from xaibench.plugins.manager import get_registry
    from xaibench.results import records
    from xaibench.runner import data_dir as data_dir_set
    from xaibench.runner import resolve_tracks

    registry = get_registry()
    out: dict[tuple[str, str], Any] = {}
    with data_dir_set(data_dir):
        specs = [s for s in resolve_tracks(registry, *_suite(suite, tracks)) if s.dataset == DATASET]
        if not specs:
            return {}
        frame = records(results.workdir)
        for spec in specs:
            aligned = frame[(frame["track"] == spec.name) & (frame["family"] == "alignment")]
            names = sorted(set(aligned["metric"]))
            if not names:
                continue
            limit = (
                min(x for x in (run_options.get("limit"), spec.limit) if x)
                if (run_options.get("limit") or spec.limit)
                else None
            )
            ceiling = human_ceiling(registry, names, dataset_params=spec.dataset_params, limit=limit, seed=seed)
            for metric, value in ceiling.items():
                out[(spec.name, metric)] = value
    return out


def _consistency(
    results: RunResults,
    tracks: list[str],
    suite: str | Path,
    seed: int,
    data_dir: str | Path | None,
    run_options: Mapping[str, Any],
    which: str,
) -> dict[tuple[str, str], Any]:
    """Noise resilience and adversarial reactivity (:mod:`xaibench.metaeval.consistency_runs`) of
    the ranking metrics of the alignment and faithfulness families on the run's tracks that
    ``which`` selects, from the run's submissions and perturbed runs into ``<workdir>/meta``."""
    from xaibench.metaeval.consistency_runs import FAMILIES, Unperturbed, meta_consistency
    from xaibench.plugins.manager import get_registry
    from xaibench.publish.leaderboard import entries_from_submissions, resolve_duplicates
    from xaibench.publish.submission import read_submissions
    from xaibench.runner import data_dir as data_dir_set
    from xaibench.runner import resolve_tracks

    if which == "none" or results.submissions_dir is None:
        return {}
    registry = get_registry()
    kept = resolve_duplicates(read_submissions(results.submissions_dir))
    explainers = {
        s.key: (str(s.data["explainer"]["name"]), dict(s.data["explainer"].get("params") or {}))
        for s in kept
        if not s.data.get("explainer", {}).get("reference_only")
    }
    unperturbed: dict[tuple[str, str], Unperturbed] = {}
    for e in entries_from_submissions(kept):
        if e.explainer in explainers and e.track in tracks and e.family in FAMILIES and e.ranking and e.samples:
            unperturbed.setdefault((e.track, e.metric), Unperturbed(e.direction, {})).values[e.explainer] = e.samples
    options = {k: v for k, v in run_options.items() if k in RUN_CONFIG_OPTIONS}
    with data_dir_set(data_dir):
        specs = [
            s
            for s in resolve_tracks(registry, *_suite(suite, sorted({t for t, _ in unperturbed})))
            if which == "all" or s.synthetic
        ]
        if not specs:
            return {}
        return meta_consistency(
            registry,
            specs,
            {k: v for k, v in unperturbed.items() if k[0] in {s.name for s in specs}},
            explainers,
            seed=seed,
            limit=run_options.get("limit"),
            workdir=results.workdir / META_WORKDIR,
            run_options=options,
        )
