"""``xaibench run``: its options (in titled sections), then :func:`xaibench.python_api.run_with`
with ``--option`` spellings, then the run's own board, the health warnings and errors."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import click

from xaibench.cli import output
from xaibench.cli.options import (
    DATA_DIR_OPTION,
    LEADERBOARD_DIR_OPTION,
    SUBMISSIONS_OPTION,
    WIDE_HELP,
    WORKDIR_OPTION,
    GroupedCommand,
    _parse_kv,
    _parse_params,
    _split,
    run_option_name,
    run_options,
)
from xaibench.errors import XaibenchError
from xaibench.plugins.manager import get_registry
from xaibench.publish.writers import term_line
from xaibench.runner import CLI, RunOptions
from xaibench.suites.suite_file import is_suite_file

_HOW_IT_RUNS = (
    *("executor", "workers", "ray_address", "device", "threads", "batch_size", "timeout", "data_dir", "params"),
)
_PLACED = ("quiet", "no_cache", *_HOW_IT_RUNS)
_NEW_RUN_OPTIONS = tuple(n for f in dataclasses.fields(RunOptions) if (n := run_option_name(f.name)) not in _PLACED)
RUN_OPTION_GROUPS = (
    ("What to run", ("explainers", "suite", "tracks", "metrics", "limit", "seed")),
    ("Your own model and data", ("model", "model_params", "dataset", "dataset_params", "track_name", "target")),
    ("Where results go", ("output_path", "workdir", "submissions_dir", "leaderboard_dir", "no_publish", "no_cache")),
    ("How it runs", (*_HOW_IT_RUNS, *_NEW_RUN_OPTIONS)),
    ("Display", ("quiet", "wide", "help")),
)
"""The sections of ``xaibench run --help``, by parameter name (a run option of
:class:`~xaibench.runner.config.RunOptions` not placed here goes under "How it runs")."""


@click.command(cls=GroupedCommand, option_groups=RUN_OPTION_GROUPS)
@click.option(
    "--explainer",
    "-e",
    "explainers",
    multiple=True,
    required=True,
    help=(
        "Explainer name(s); repeat or comma-separate. `all`: every installed explainer; "
        "`default`: the baselines plus gradcam."
    ),
)
@click.option(
    "--suite",
    default="default",
    show_default=True,
    metavar="NAME|FILE.toml",
    help="Suite to run: a suite plugin (`xaibench list suites`) or a suite file (docs/suites.md).",
)
@click.option(
    "--model",
    metavar="NAME[:ARG]",
    help=(
        "Run one ad-hoc track with this model instead of a suite (with --dataset): a model plugin, "
        "ARG its main parameter (timm:resnet18 sets arch)."
    ),
)
@click.option(
    "--model-param",
    "model_params",
    multiple=True,
    metavar="KEY=VALUE[,KEY=VALUE]",
    help=(
        "Parameter of --model (VALUE parsed as JSON when it can be), repeatable, e.g. checkpoint=model.pth or "
        "num_classes=4 (read from a checkpoint when not given); each model's parameters: `xaibench list models`."
    ),
)
@click.option(
    "--dataset",
    metavar="NAME[:ARG]",
    help=(
        "The ad-hoc track's dataset (with --model): a dataset plugin, ARG its main parameter "
        "(folder:PATH sets root, hf:PATH_OR_NAME sets path)."
    ),
)
@click.option(
    "--dataset-param",
    "dataset_params",
    multiple=True,
    metavar="KEY=VALUE[,KEY=VALUE]",
    help="Parameter of --dataset, repeatable, e.g. split=test,mask_column=mask.",
)
@click.option(
    "--track-name",
    metavar="NAME",
    help="Name of the ad-hoc track (default: <model arg>-on-<dataset folder>, e.g. resnet18-on-cats).",
)
@click.option(
    "--target",
    type=click.Choice(["predicted", "label"]),
    help="Class the ad-hoc track explains: the model's prediction (default) or the dataset's label.",
)
@click.option("--track", "tracks", multiple=True, help="Run only these tracks of the suite (repeatable).")
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    help=(
        "Metrics to score (repeatable, comma-separated): a metric id, family:NAME (e.g. family:alignment), all "
        "(every default metric) or default (alignment ranking metrics when the data has masks, 10-step "
        "deletion/insertion, model_randomisation). Default: the track's own metrics; ad-hoc and suite-file "
        "tracks run default (docs/suites.md)."
    ),
)
@click.option("--limit", type=click.IntRange(min=1), help="Use at most this many samples per track.")
@click.option("--seed", default=0, show_default=True, help="Seed for every random choice; same seed, same numbers.")
@click.option(
    "--output-path",
    type=click.Path(path_type=Path),
    metavar="DIR",
    help=(
        "Folder for everything the run writes: DIR/.xaibench (the workdir), DIR/submissions and DIR/leaderboard "
        "(default: the current folder); --workdir, --submissions and --leaderboard-dir override one of them."
    ),
)
@WORKDIR_OPTION
@SUBMISSIONS_OPTION
@LEADERBOARD_DIR_OPTION
@click.option(
    "--no-publish",
    is_flag=True,
    help="Write the records and the summary only: no submissions, leaderboard or site (the table is still shown).",
)
@DATA_DIR_OPTION
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="EXPLAINER.KEY=VALUE",
    help="Explainer parameter (VALUE parsed as JSON when it can be), repeatable.",
)
@click.option("--wide", is_flag=True, help=WIDE_HELP)
@run_options()
@click.pass_context
def run(
    ctx: click.Context,
    explainers: tuple[str, ...],
    suite: str,
    model: str | None,
    model_params: tuple[str, ...],
    dataset: str | None,
    dataset_params: tuple[str, ...],
    track_name: str | None,
    target: str | None,
    tracks: tuple[str, ...],
    metrics: tuple[str, ...],
    limit: int | None,
    seed: int,
    output_path: Path | None,
    workdir: Path,
    submissions_dir: Path,
    leaderboard_dir: Path,
    no_publish: bool,
    data_dir: Path | None,
    params: tuple[str, ...],
    wide: bool,
    run_options: RunOptions,
) -> None:
    """Explain and score every track of a suite, then print this run's ranked leaderboard.

    \b
    The tracks are a suite's (--suite NAME or --suite FILE.toml), or one ad-hoc track:
      xaibench run -e gradient --model timm:resnet18 --model-param checkpoint=PATH --dataset folder:PATH
    The table shows this run's tracks only; the leaderboard files rank every submission of the
    folder. Warnings and errors about the answer (tracks mostly n/a: exit 1) follow the table.
    """
    from xaibench.publish.writers import print_leaderboard
    from xaibench.python_api import explainer_params, run_with
    from xaibench.runner import resolve_explainers

    names = _split(explainers)
    parsed_params = _parse_params(params)
    running = resolve_explainers(get_registry(), names)
    try:  # the one check of both front doors, a usage error here
        explainer_params(parsed_params, running, CLI)
    except XaibenchError as exc:
        raise click.BadParameter(str(exc), param_hint="'--param'") from None

    def given(name: str) -> bool:
        return ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT

    results = run_with(
        CLI,
        names,
        suite=suite if given("suite") or not (model or dataset) else None,
        tracks=_split(tracks),
        metrics=_split(metrics),
        model=model,
        dataset=dataset,
        model_params=_parse_kv(model_params, "'--model-param'") or None,
        dataset_params=_parse_kv(dataset_params, "'--dataset-param'") or None,
        target=target or "predicted",
        track_name=track_name,
        params=parsed_params,
        limit=limit,
        seed=seed,
        output_path=output_path if output_path is not None else Path("."),
        workdir=workdir if given("workdir") else None,
        submissions=submissions_dir if given("submissions_dir") else None,
        leaderboard_dir=leaderboard_dir if given("leaderboard_dir") else None,
        publish=not no_publish,
        site=True,
        data_dir=data_dir,
        options=run_options,
    )
    assert results.board is not None
    console = output.console
    for line in results.record.lines if results.record is not None else []:
        style = None if results.record is not None and results.record.joined else "yellow"
        console.print(term_line(line), style=style, markup=False, highlight=False, soft_wrap=True)
    print_leaderboard(results.board, console, wide=wide)
    if results.published is not None:
        output.print_written(results.published)
    console.print(f"wall time {results.wall_time_s:.1f} s; records in {results.workdir}/results")
    # a suite file's track that fails to load (e.g. a parameter value its plugin rejects): name the file
    origin = f" of {suite}" if given("suite") and is_suite_file(suite) else ""
    for track, error in results.failed.items():
        console.print(term_line(f"track {track}{origin} failed: {error}"), style="red", markup=False, highlight=False)
    errors = results.errors
    for line in results.warnings:  # plugin words (n/a reasons, names) in them: escaped
        console.print(f"warning: {term_line(line)}", style="yellow", markup=False, highlight=False, soft_wrap=True)
    for line in errors:
        console.print(f"error: {term_line(line)}", style="red", markup=False, highlight=False, soft_wrap=True)
    if results.failed or errors:
        sys.exit(1)
