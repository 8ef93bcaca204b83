"""``xaibench tune`` and ``xaibench select``: parse the search, call :mod:`xaibench.applications`
(the settings scored through the runner, the table, the choice, ``tune --submit``) and print."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table

from xaibench.cli import output
from xaibench.cli.leaderboard import publish
from xaibench.cli.options import (
    DATA_DIR_OPTION,
    LEADERBOARD_DIR_OPTION,
    SUBMISSIONS_OPTION,
    WORKDIR_OPTION,
    _parse_kv,
    _split,
    run_options,
)
from xaibench.plugins.manager import get_registry
from xaibench.runner import CLI, RunOptions
from xaibench.runner import data_dir as with_data_dir

if TYPE_CHECKING:
    from xaibench.applications.objective import ObjectiveStatus
    from xaibench.applications.settings import Setting, SettingScores
    from xaibench.runner import RunConfig


def _application_options(func: Any) -> Any:
    """The options ``xaibench tune`` and ``xaibench select`` share with ``xaibench run``."""
    options = [
        click.option("--objective", required=True, metavar="METRIC", help="Metric id to optimise, in its direction."),
        click.option("--track", required=True, help="The suite's track to search on (e.g. shapes, photos)."),
        click.option(
            "--suite",
            default="default",
            show_default=True,
            metavar="NAME|FILE.toml",
            help="Suite holding --track: a suite plugin or a suite file.",
        ),
        click.option("--limit", type=click.IntRange(min=1), help="Use at most this many samples of the track."),
        click.option("--seed", default=0, show_default=True, help="Seed for every random choice and the intervals."),
        WORKDIR_OPTION,
        click.option(
            "--out",
            "out_dir",
            type=click.Path(path_type=Path),
            help="Folder for the CSV and JSON tables (default: the workdir).",
        ),
        click.option(
            "--meta",
            "meta_file",
            type=click.Path(path_type=Path, dir_okay=False),
            help="A meta.json of xaibench meta: an objective it finds invalid on --track is shown as not ranked.",
        ),
        DATA_DIR_OPTION,
        run_options("timeout", "threads", "workers", "device", "progress"),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _scores(
    ctx: click.Context, settings: list[Setting], options: dict[str, Any], run_options: RunOptions
) -> tuple[RunConfig, SettingScores, ObjectiveStatus]:
    """Every setting scored on the track (``--data-dir`` set for the command and restored when it
    ends), and the objective's status there, its line printed above the table when it has one."""
    from xaibench.applications.objective import objective_status, read_meta
    from xaibench.applications.settings import score_settings, search_config

    ctx.with_resource(with_data_dir(options["data_dir"], CLI))
    config = search_config(
        options["suite"], seed=options["seed"], limit=options["limit"], workdir=options["workdir"], options=run_options
    )
    scores = score_settings(settings, options["objective"], options["track"], config, get_registry())
    status = objective_status(scores.objective, scores.track, scores.objective_block, read_meta(options["meta_file"]))
    line = status.line(scores.objective)
    if line is not None:
        output.console.print(line, style=None if status.ranked else "yellow", markup=False, highlight=False)
    return config, scores, status


@click.command()
@click.option("--explainer", "-e", required=True, help="The explainer whose parameters are searched.")
@click.option(
    "--grid",
    "grid",
    multiple=True,
    required=True,
    metavar="KEY=V1,V2,...",
    help="Values of one parameter (JSON when they parse, else strings); repeat for a cartesian product.",
)
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="KEY=VALUE[,KEY=VALUE]",
    help="A parameter fixed in every setting (not searched), repeatable.",
)
@_application_options
@click.option(
    "--submit",
    is_flag=True,
    help=(
        "Then run the chosen setting on every track of --suite, marked tuned_on_benchmark, write its "
        "submission to --submissions and rebuild the leaderboard."
    ),
)
@click.option(
    "--allow-unranked-objective",
    is_flag=True,
    help="Let --submit submit a setting chosen by an objective that is not ranked on the track.",
)
@SUBMISSIONS_OPTION
@LEADERBOARD_DIR_OPTION
@click.pass_context
def tune(
    ctx: click.Context,
    explainer: str,
    grid: tuple[str, ...],
    params: tuple[str, ...],
    run_options: RunOptions,
    **options: Any,
) -> None:
    """Search an explainer's parameters for the best mean --objective on one track.

    \b
    Every setting of the grid (the cartesian product of the --grid values) is explained and
    scored through the runner (cached, resumable); the table of every setting, with 95 %
    bootstrap intervals and the paired difference to the best, is printed and written to
    <out>/tune-<explainer>-<track>-<objective>.csv and .json. The best setting is the best
    mean in the metric's direction. For example:
      xaibench tune -e lime --grid kernel_width=0.1,0.25,0.5 --objective pasta_q1 --track shapes --limit 16
    """
    from xaibench.applications.settings import expand_grid, parse_grid
    from xaibench.applications.tune import submit_best, write_tune
    from xaibench.applications.tune import tune as tune_settings
    from xaibench.python_api import check_publish_targets

    registry = get_registry()
    registry.entry("explainer", explainer)
    settings = expand_grid(explainer, parse_grid(grid), _parse_kv(params, "'--param'"))
    submit = options.pop("submit")
    submissions_dir, leaderboard_dir = options.pop("submissions_dir"), options.pop("leaderboard_dir")
    if submit:  # fail before the search, changing nothing
        check_publish_targets(submissions_dir, leaderboard_dir, CLI, board_folder=False)
    config, scores, status = _scores(ctx, settings, options, run_options)
    result = tune_settings(scores, seed=options["seed"], status=status)
    arrow = "↑" if result.direction == "higher" else "↓"
    table = Table(
        "setting",
        f"mean {result.objective} {arrow}",
        "95 % interval",
        "n",
        "n/a",
        "Δ vs best [95 %]",
        title=f"tune {explainer} on {result.track} ({len(result.rows)} settings, {result.objective} {arrow})",
    )
    for row in result.rows:
        interval = "n/a" if row.ci_low is None else f"[{row.ci_low:.4f}, {row.ci_high:.4f}]"
        delta = "n/a" if row.delta is None else f"{row.delta:+.4f} [{row.delta_low:+.4f}, {row.delta_high:+.4f}]"
        name = f"[bold]{row.setting} *" if row.best else row.setting
        table.add_row(name, output.number(row.mean), interval, str(row.n), str(row.n_na), delta)
    output.console.print(table)
    paths = write_tune(result, options["out_dir"] or options["workdir"])
    output.console.print(f"best: {result.best.label} (* above); wrote " + ", ".join(str(p) for p in paths))
    if submit:
        allow = options["allow_unranked_objective"]
        submit_best(result, status, config, registry, submissions_dir, allow_unranked=allow)
        publish(submissions_dir, leaderboard_dir, None, with_site=True)
        output.console.print(f"submitted {result.best.label} to {submissions_dir} marked tuned_on_benchmark")


@click.command("select")
@click.option(
    "--explainer",
    "-e",
    "explainers",
    multiple=True,
    required=True,
    help="An explainer to choose from; repeat or comma-separate.",
)
@click.option(
    "--grid",
    "grid",
    multiple=True,
    metavar="[EXPLAINER.]KEY=V1,V2,...",
    help="Choose among these settings of EXPLAINER too (EXPLAINER. may be left out with one --explainer).",
)
@_application_options
@click.pass_context
def select_(
    ctx: click.Context, explainers: tuple[str, ...], grid: tuple[str, ...], run_options: RunOptions, **options: Any
) -> None:
    """Pick, per image, the explainer or setting with the best --objective on one track.

    \b
    Writes the per-image choices to <out>/select-<track>-<objective>.csv and everything, with
    the gain of the per-image choice over the best single setting, to the .json. For example:
      xaibench select -e gradcam --grid target_layer=layer2,layer3,layer4 --objective pasta_q1 --track photos
    """
    from xaibench.applications.select import select, write_select
    from xaibench.applications.settings import candidate_settings

    registry = get_registry()
    names = _split(explainers)
    for name in names:
        registry.entry("explainer", name)
    settings = candidate_settings(names, grid)
    if len(settings) < 2:
        raise click.UsageError("select needs at least two settings: give two --explainer, or a --grid")
    _, scores, status = _scores(ctx, settings, options, run_options)
    result = select(scores, seed=options["seed"], status=status)
    arrow = "↑" if result.direction == "higher" else "↓"
    table = Table("setting", f"mean {result.objective} {arrow}", "images chosen", title=f"select on {result.track}")
    counts = result.counts
    for label in result.settings:
        name = f"[bold]{label} (best single)" if label == result.best_single else label
        table.add_row(name, output.number(result.means[label]), str(counts[label]))
    table.add_row("[bold]per-image best", output.number(result.selected_mean), str(len(result.choices)))
    output.console.print(table)
    skipped = f"; {result.skipped} samples without a value for every setting left out" if result.skipped else ""
    output.console.print(
        f"gain over the best single setting ({result.best_single}): {result.gain:+.4f} "
        f"[{result.gain_low:+.4f}, {result.gain_high:+.4f}] on {len(result.choices)} images{skipped}"
    )
    paths = write_select(result, options["out_dir"] or options["workdir"])
    output.console.print("wrote " + ", ".join(str(p) for p in paths))
