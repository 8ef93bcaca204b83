"""The ``xaibench`` command line. A failure exits non-zero with one clear line."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from xaibench.errors import XaibenchError
from xaibench.files import check_writable_folder
from xaibench.metric_cost import cost_data
from xaibench.params import parse_value
from xaibench.plugins import manager
from xaibench.plugins.manager import KIND_BASES, get_registry
from xaibench.publish.writers import term_line, term_text
from xaibench.runner import (
    CLI,
    CLI_EXECUTORS,
    DEFAULT_DEVICE,
    DEFAULT_EXECUTOR,
    check_device,
    make_run_config,
    suite_tracks,
)
from xaibench.runner import data_dir as with_data_dir
from xaibench.suites.suite_file import is_suite_file

console = Console(width=None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", "160")))
LIST_KINDS = ("explainers", "datasets", "models", "metrics", "suites", "encoders", "plugins")


def _split(values: Sequence[str]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def _parse_params(items: Sequence[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        if "=" not in item or "." not in item.split("=", 1)[0]:
            raise click.BadParameter(f"{item!r}: expected EXPLAINER.KEY=VALUE", param_hint="--param")
        lhs, raw = item.split("=", 1)
        name, key = lhs.split(".", 1)
        out.setdefault(name, {})[key] = _json_value(raw, item, "--param")
    return out


def _json_value(raw: str, item: str, option: str) -> Any:
    """``raw`` parsed as JSON when it is JSON, else the string itself; hostile JSON is a usage error."""
    try:
        return parse_value(raw)
    except ValueError as exc:
        shown = item if len(item) <= 60 else item[:57] + "..."
        raise click.BadParameter(f"{shown!r}: the value {exc}", param_hint=f"'{option}'") from None


_KEY_START = re.compile(r"\s*[A-Za-z_][A-Za-z0-9_.-]*\s*=")


def _split_pairs(value: str) -> list[str]:
    """``"a=1,b=[1,2]"`` -> ``["a=1", "b=[1,2]"]``: split at commas that start a new ``KEY=``, so
    that a JSON list or a path with commas stays one value."""
    parts = [""]
    for i, char in enumerate(value):
        if char == "," and _KEY_START.match(value, i + 1):
            parts.append("")
        else:
            parts[-1] += char
    return [p.strip() for p in parts if p.strip()]


def _parse_kv(items: Sequence[str], option: str) -> dict[str, Any]:
    """``--model-param``/``--dataset-param`` values: ``KEY=VALUE``, repeatable and comma-separated;
    VALUE parsed as JSON when it is JSON (:func:`xaibench.params.parse_value`), else a string."""
    out: dict[str, Any] = {}
    for value in items:
        for item in _split_pairs(value):
            key, sep, raw = item.partition("=")
            if not sep or not key.strip():
                raise click.BadParameter(f"{item!r}: expected KEY=VALUE (e.g. checkpoint=model.pth)", param_hint=option)
            if key.strip() in out:
                raise click.BadParameter(f"{key.strip()!r} is given twice", param_hint=option)
            out[key.strip()] = _json_value(raw, item, option)
    return out


WIDE_HELP = "Show every metric column in the terminal leaderboard."


class _SpelledBadParameter(click.BadParameter):
    """A usage error whose message already names the option (``--device tpu: ...``): shown as
    ``Invalid value: <message>``, not with click's own ``for '--device'`` prefix."""

    def format_message(self) -> str:
        return f"Invalid value: {self.message}"


def _check_device(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """``--device``, checked by the one device check every front door uses (a usage error, before any work)."""
    try:
        return check_device(value, CLI)
    except XaibenchError as exc:
        raise _SpelledBadParameter(str(exc), ctx, param) from None


# Options shared by `run`, `tune` and `select` (one definition each).
WORKDIR_OPTION = click.option(
    "--workdir",
    type=click.Path(path_type=Path),
    default=Path(".xaibench"),
    show_default=True,
    help="Where caches, per-sample records and the run summary go (shared by run, tune and select).",
)
SUBMISSIONS_OPTION = click.option(
    "--submissions",
    "submissions_dir",
    type=click.Path(path_type=Path),
    default=Path("submissions"),
    show_default=True,
    help="Folder for the per-explainer submission files.",
)
LEADERBOARD_DIR_OPTION = click.option(
    "--leaderboard-dir",
    type=click.Path(path_type=Path),
    default=Path("leaderboard"),
    show_default=True,
    help="Folder for leaderboard.csv/.json/.md, rebuilt from --submissions.",
)
DATA_DIR_OPTION = click.option(
    "--data-dir",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    help="Root holding real datasets (sets XAIBENCH_DATA_DIR), e.g. ../shared/data.",
)
TIMEOUT_OPTION = click.option(
    "--timeout",
    default=300.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Seconds allowed per explainer call (0: none; at most a year).",
)
THREADS_OPTION = click.option(
    "--threads", default=1, show_default=True, type=click.IntRange(min=1), help="torch intra-op threads."
)
EXECUTOR_OPTION = click.option(
    "--executor",
    type=click.Choice(CLI_EXECUTORS),
    default=DEFAULT_EXECUTOR,
    show_default=True,
    help="Where explainer code runs: worker processes on this machine, or Ray (pip install 'xaibench[ray]').",
)
WORKERS_OPTION = click.option(
    "--workers", default=1, show_default=True, type=click.IntRange(min=1), help="Explainer worker processes."
)
DEVICE_OPTION = click.option(
    "--device",
    default=DEFAULT_DEVICE,
    show_default=True,
    metavar="auto|cpu|cuda|cuda:N|mps",
    callback=_check_device,
    help="Device for models, explainers and metric forward passes (auto: a GPU when torch sees one).",
)
QUIET_OPTION = click.option("--quiet", "-q", is_flag=True, help="No progress bars.")


def _writable_folder(path: Path, option: str) -> None:
    """Fail at once with one line naming the option when ``path`` cannot be a folder we write in
    (the messages match those of the runner's workdir lock, :class:`xaibench.runner.storage.store.WorkdirLock`)."""
    check_writable_folder(path, f"{option} {path}")


def _check_publish_targets(submissions_dir: Path, leaderboard_dir: Path) -> None:
    """Folders that cannot be written, and a bad submission already in the folder, would fail the
    publishing after the run: fail before it, changing nothing. (The runner's workdir lock checks
    --workdir the same way.)"""
    from xaibench.publish.validation import require_valid, submission_files

    _writable_folder(submissions_dir, "--submissions")
    _writable_folder(leaderboard_dir, "--leaderboard-dir")
    require_valid(submission_files([submissions_dir]))


def _check_params(params: dict[str, dict[str, Any]], running: Sequence[str]) -> None:
    """Every ``--param`` must be for an explainer this run runs (a typo would be silently ignored)."""
    for name, values in params.items():
        if name not in running:
            key = next(iter(values))
            raise click.BadParameter(
                f"{name}.{key}: explainer {name!r} is not run (running: {', '.join(running)})", param_hint="'--param'"
            )


class GroupedCommand(click.Command):
    """A command whose ``--help`` lists its options in titled sections (click has no option
    groups): ``option_groups`` is ``(title, parameter names)`` in order (``help``: the help
    option); options in no group are listed last, under "Other options"."""

    def __init__(self, *args: Any, option_groups: Sequence[tuple[str, Sequence[str]]] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.option_groups = [(title, list(names)) for title, names in option_groups]

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        help_option = self.get_help_option(ctx)
        records = {"help" if p is help_option else p.name: p.get_help_record(ctx) for p in self.get_params(ctx)}
        grouped = {name for _, names in self.option_groups for name in names}
        sections = [*self.option_groups, ("Other options", [n for n in records if n not in grouped])]
        for title, names in sections:
            rows = [record for name in names if (record := records.get(name)) is not None]
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


RUN_OPTION_GROUPS = (
    ("What to run", ("explainers", "suite", "tracks", "metrics", "limit", "seed")),
    ("Your own model and data", ("model", "model_params", "dataset", "dataset_params", "track_name", "target")),
    ("Where results go", ("output_path", "workdir", "submissions_dir", "leaderboard_dir", "no_publish", "no_cache")),
    (
        "How it runs",
        ("executor", "workers", "ray_address", "device", "threads", "batch_size", "timeout", "data_dir", "params"),
    ),
    ("Display", ("quiet", "wide", "help")),
)
"""The sections of ``xaibench run --help``, by parameter name."""


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="xaibench")
def cli() -> None:
    """xaibench: benchmark explainable-AI methods on image classifiers.

    Explainers, datasets, models, metrics and suites come from plugins (entry-point
    group `xaibench`); `xaibench list plugins` shows what is installed.
    """
    manager.on_plugin_error = _plugin_warning  # a plugin that fails to load: one line, then go on


def _plugin_warning(line: str) -> None:
    click.echo(f"warning: {term_line(line)}", err=True)


@cli.command(cls=GroupedCommand, option_groups=RUN_OPTION_GROUPS)
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
@TIMEOUT_OPTION
@click.option(
    "--batch-size", default=16, show_default=True, type=click.IntRange(min=1), help="Images per model forward pass."
)
@THREADS_OPTION
@click.option("--no-cache", is_flag=True, help="Do not read or write the explanation cache.")
@EXECUTOR_OPTION
@WORKERS_OPTION
@click.option("--ray-address", default=None, metavar="ADDR", help="Join this Ray cluster (default: start a local one).")
@DEVICE_OPTION
@QUIET_OPTION
@click.option("--wide", is_flag=True, help=WIDE_HELP)
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
    timeout: float,
    batch_size: int,
    threads: int,
    no_cache: bool,
    executor: str,
    workers: int,
    ray_address: str | None,
    device: str,
    quiet: bool,
    wide: bool,
) -> None:
    """Explain and score every track of a suite, then print this run's ranked leaderboard.

    \b
    The tracks are a suite's (--suite NAME or --suite FILE.toml), or one ad-hoc track:
      xaibench run -e gradient --model timm:resnet18 --model-param checkpoint=PATH --dataset folder:PATH
    The table shows this run's tracks only; the leaderboard files rank every submission of the
    folder. Warnings and errors about the answer (tracks mostly n/a: exit 1) follow the table.
    """
    from xaibench.publish.writers import print_leaderboard
    from xaibench.python_api import run_with
    from xaibench.runner import resolve_explainers

    explainer_params = _parse_params(params)
    _check_params(explainer_params, resolve_explainers(get_registry(), _split(explainers)))

    def given(name: str) -> bool:
        return ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT

    results = run_with(
        CLI,
        explainers=_split(explainers),
        suite=suite if given("suite") or not (model or dataset) else None,
        tracks=_split(tracks),
        metrics=_split(metrics),
        model=model,
        dataset=dataset,
        model_params=_parse_kv(model_params, "'--model-param'") or None,
        dataset_params=_parse_kv(dataset_params, "'--dataset-param'") or None,
        target=target or "predicted",
        track_name=track_name,
        params=explainer_params,
        limit=limit,
        seed=seed,
        output_path=output_path if output_path is not None else Path("."),
        workdir=workdir if given("workdir") else None,
        submissions=submissions_dir if given("submissions_dir") else None,
        leaderboard_dir=leaderboard_dir if given("leaderboard_dir") else None,
        publish=not no_publish,
        site=True,
        data_dir=data_dir,
        timeout=timeout,
        batch_size=batch_size,
        threads=threads,
        cache=not no_cache,
        executor=executor,
        workers=workers,
        ray_address=ray_address,
        device=device,
        progress=not quiet,
    )
    assert results.board is not None
    for line in results.record.lines if results.record is not None else []:
        style = None if results.record is not None and results.record.joined else "yellow"
        console.print(term_line(line), style=style, markup=False, highlight=False, soft_wrap=True)
    print_leaderboard(results.board, console, wide=wide)
    if results.published is not None:
        _print_written(results.published)
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


@cli.command("list")
@click.argument("kind", type=click.Choice(LIST_KINDS))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def list_(kind: str, as_json: bool) -> None:
    """List installed components of KIND, or plugins with their load status."""
    registry = get_registry()
    if kind == "plugins":
        rows = [
            {
                "name": p.name,
                "distribution": p.distribution,
                "version": p.version,
                "ok": p.ok,
                "error": p.error,
                "components": p.components,
                "source": p.source,
            }
            for p in registry.plugins.values()
        ]
        if as_json:
            click.echo(json.dumps(rows, indent=2))
            return
        table = Table("plugin", "distribution", "version", "status", "components")
        for r in rows:  # every cell a plain Text: a plugin's words show as typed (no markup, no escape code)
            status = term_text("ok", "green") if r["ok"] else term_text(f"error: {r['error']}", "red")
            cells = (r["name"], r["distribution"], r["version"])
            table.add_row(*map(term_text, cells), status, str(len(r["components"])))
        console.print(table)
        return
    singular = kind[:-1]
    assert singular in KIND_BASES
    rows = []
    for entry in registry.entries(singular):
        info, cls = entry.info, entry.cls
        row: dict[str, Any] = {
            "name": info.name,
            "version": info.version,
            "distribution": info.distribution,
            "distribution_version": info.distribution_version,
            "description": info.description,
            "licence": info.licence,
            "needs": list(info.needs),
        }
        if singular == "metric":
            row.update(family=cls.family, direction=cls.direction, ranking=cls.ranking, cost=cost_data(cls.cost))
        if singular == "explainer":
            row.update(kind=cls.kind, default_params=dict(cls.default_params), reference_only=cls.reference_only)
        if singular == "encoder":
            row.update(modalities=list(cls.modalities), default_params=dict(cls.default_params))
        if singular == "suite":
            try:
                suite = cls()
                row["tracks"] = [t.name for t in suite.tracks()]
                row["status"] = suite.status()
            except Exception as exc:  # noqa: BLE001 - isolate plugin and user code failures
                row["status"] = f"error: {manager.one_line(str(exc))}"
        rows.append(row)
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
        return
    extra = {
        "metric": ["family", "direction", "ranking"],
        "explainer": ["kind", "default_params"],
        "suite": ["tracks", "status"],
        "encoder": ["modalities", "default_params"],
    }.get(singular, [])
    table = Table("name", "version", "distribution", *extra, "description")
    for r in rows:  # every cell a plain Text: a plugin's words show as typed (no markup, no escape code)
        dist = f"{r['distribution']} {r['distribution_version']}"
        cells = [r["name"], r["version"], dist, *[_cell(r.get(k)) for k in extra], r["description"]]
        table.add_row(*map(term_text, cells))
    console.print(table)


def _cell(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(map(str, value))
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return str(value)


@cli.command()
@click.option("--dataset", required=True, help="Dataset plugin name, or a folder in the folder-dataset layout.")
@click.option(
    "--explanations",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    required=True,
    help="Folder of <sample_id>.npy saliency maps.",
)
@click.option("--model", help="Model plugin name (needed by faithfulness metrics).")
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    help="Metric id(s) or selectors: family:NAME, all (repeatable; default: every alignment metric).",
)
@click.option("--seed", default=0, show_default=True, help="Seed for metrics that sample.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON of DESIGN section 8.")
def score(
    dataset: str, explanations: Path, model: str | None, metrics: tuple[str, ...], seed: int, as_json: bool
) -> None:
    """Score precomputed saliency maps without writing a plugin."""
    from xaibench.runner import score_folder

    result = score_folder(get_registry(), dataset, explanations, model, _split(metrics) or None, seed)
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    table = Table("metric", "mean", "n", "n/a")
    for mid, m in result["metrics"].items():
        table.add_row(term_text(mid), "n/a" if m["mean"] is None else f"{m['mean']:.4f}", str(m["n"]), str(m["n_na"]))
    console.print(table)


@cli.group()
def leaderboard() -> None:
    """Build the leaderboard files (and site) from submission files."""


@leaderboard.command("build")
@click.option(
    "--submissions",
    "submissions_dir",
    type=click.Path(path_type=Path),
    default=Path("submissions"),
    show_default=True,
    help="Folder of submission JSON files (data only; no code is executed).",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    default=Path("leaderboard"),
    show_default=True,
    help="Output folder for leaderboard.csv/.json/.md.",
)
@click.option(
    "--site",
    "site_dir",
    type=click.Path(path_type=Path),
    help="Folder for the static site (default: OUT/site); replaced as a whole.",
)
@click.option("--no-site", is_flag=True, help="Write only the leaderboard files.")
@click.option("--wide", is_flag=True, help=WIDE_HELP)
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    help="Root holding the shared data (sets XAIBENCH_DATA_DIR): its pasta-paper/ tables go on the correlations page.",
)
@click.option(
    "--meta",
    "meta_file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="The meta.json of xaibench meta to apply (default: SUBMISSIONS/../meta/meta.json when it exists); "
    "used only when its submission digests match.",
)
def leaderboard_build(
    submissions_dir: Path,
    out_dir: Path,
    site_dir: Path | None,
    no_site: bool,
    wide: bool,
    data_dir: Path | None,
    meta_file: Path | None,
) -> None:
    """Validate every submission, rank them per track, write the leaderboard files and the static site.

    \b
    A metric that xaibench meta found invalid on a track (its meta.json, matching these
    submissions) is shown but not ranked there (docs/meta.md)."""
    with with_data_dir(data_dir, CLI):
        publish(submissions_dir, out_dir, site_dir, with_site=not no_site, wide=wide, meta=meta_file)


def publish(
    submissions_dir: Path,
    out_dir: Path,
    site_dir: Path | None,
    *,
    with_site: bool,
    wide: bool = False,
    meta: Path | None = None,
) -> None:
    """Validate the submissions, write the leaderboard files (and site) and print the ranking
    (``wide``: every metric column); ``meta``: the meta.json to apply (default beside the submissions)."""
    from xaibench.publish.writers import print_leaderboard
    from xaibench.python_api import publish_leaderboard

    if meta is not None and not meta.is_file():
        raise XaibenchError(f"--meta {meta}: no such file")
    published = publish_leaderboard(submissions_dir, out_dir, site_dir, with_site=with_site, meta=meta)
    _print_published(published, print_leaderboard, wide)


def _print_published(published: Any, print_leaderboard: Any, wide: bool) -> None:
    """The ranked tables (``wide``: every metric column) and what publishing wrote."""
    print_leaderboard(published.board, console, wide=wide)
    _print_written(published)


def _print_written(published: Any) -> None:
    """What publishing wrote: the leaderboard files and the site."""
    console.print("wrote " + ", ".join(str(p) for p in published.files))
    if published.site_dir is not None:
        console.print(f"site: {len(published.pages)} pages in {published.site_dir}/ (open index.html)")


@cli.group()
def submission() -> None:
    """Check submission files."""


@submission.command("validate")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
def submission_validate(paths: tuple[Path, ...]) -> None:
    """Check submission FILE(s) (or every *.json of a folder) against docs/submission.schema.json.

    Prints FILE: ok for each valid file, then FILE:LINE:COLUMN: problem (at /json/pointer) for each
    problem; exits 1 if any.
    """
    from xaibench.publish.validation import submission_files, validate_file

    files = submission_files(paths)
    issues = [i for f in files for i in validate_file(f)]
    bad = {i.file for i in issues}
    for f in files:
        if str(f) not in bad:
            click.echo(f"{f}: ok")
    for issue in issues:  # last, where they are seen (a file's words in them: escaped)
        click.echo(term_line(issue))
    if issues:
        sys.exit(1)


@submission.command("verify")
@click.argument("path", metavar="[FILE | SUBMISSIONS_DIR]", type=click.Path(path_type=Path), required=False)
@click.option(
    "--meta",
    "meta_path",
    metavar="META_JSON",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Verify this meta.json instead of FILE, against SUBMISSIONS_DIR (default: submissions/ beside its folder).",
)
@click.option(
    "--records",
    "records_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="With --meta: also check the digests of this folder's records (a workdir's results/).",
)
@click.option(
    "--rerun-tests", is_flag=True, help="With --meta: also re-run the validity tests (ladder, planted cue) and compare."
)
@click.option(
    "--samples",
    "k",
    default="16",
    show_default=True,
    metavar="N|all",
    help="How many (track, metric, sample) records, n/a ones included, to re-run (all when there are fewer); "
    "'all': every record.",
)
@click.option(
    "--seed",
    default=None,
    type=click.IntRange(min=0),
    help="Seed of the random choice of records [default: a fresh one, printed first and recorded].",
)
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    help="Root holding real datasets (sets XAIBENCH_DATA_DIR), as for `xaibench run`.",
)
def submission_verify(
    path: Path | None,
    meta_path: Path | None,
    records_dir: Path | None,
    rerun_tests: bool,
    k: str,
    seed: int | None,
    data_dir: Path | None,
) -> None:
    """Re-run a random choice of FILE's per-sample records (n/a ones too) from its provenance and compare.

    With --meta META_JSON [SUBMISSIONS_DIR]: re-run the meta-evaluation instead (docs/meta.md).

    Checks first that the installed explainer, metrics, datasets and models are those recorded
    (version, parameters, model identity, dataset revision), then re-runs the chosen samples
    with the recorded suite, seed, device and thread count. The records are drawn with a fresh
    seed unless --seed is given; the first line prints it (--seed S draws the same records
    again). A recorded n/a matches only an n/a re-run for a reason the file records for that
    metric. Prints one line per record that differs (by more than 1e-6), then the verdict, and
    writes it, with the seed, into FILE as `verification`. Exits 0 when every record matches, 1
    when any differs, 2 when FILE cannot be verified.
    """
    from xaibench.publish.verify import parse_samples, record_verification, verify_submission

    if meta_path is not None:
        _verify_meta(meta_path, path, records_dir, rerun_tests, data_dir)
        return
    if path is None or records_dir is not None or rerun_tests:
        click.echo("error: give FILE, or --meta META_JSON (--records and --rerun-tests go with --meta)", err=True)
        sys.exit(2)
    try:
        samples = parse_samples(k)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--samples'") from None
    click.get_current_context().with_resource(with_data_dir(data_dir, CLI))
    try:
        result = verify_submission(
            path, get_registry(), samples=samples, seed=seed, log=lambda x: click.echo(term_line(x))
        )
        *lines, verdict = result.lines()
        for line in lines:
            click.echo(term_line(line))  # re-run values and n/a reasons come from plugin code
        record_verification(path, result, result.submission)
    except XaibenchError as exc:
        click.echo(f"error: {_error_text(exc)}", err=True)
        sys.exit(2)
    click.echo(f"({result.seconds:.1f} s; the verification is recorded in {path})")
    click.echo(verdict)  # last, where scripts and eyes look
    if not result.passed:
        sys.exit(1)


def _verify_meta(
    meta_path: Path, submissions: Path | None, records: Path | None, rerun_tests: bool, data_dir: Path | None
) -> None:
    """``submission verify --meta``: the meta.json's digests, its figures recomputed from the
    submissions and, with ``rerun_tests``, its validity tests re-run (xaibench.metaeval.verify).
    Exits 0 when all match, 1 when any differs, 2 when it cannot be verified."""
    import tempfile

    from xaibench.metaeval.verify import RunSpec, verify_meta

    def rerun(spec: RunSpec) -> dict[str, Any]:
        from xaibench.python_api import meta

        with tempfile.TemporaryDirectory(prefix="xaibench-verify-meta-") as tmp:
            result = meta(
                spec.explainers,
                suite=spec.suite,
                tracks=spec.tracks,
                metrics=spec.metrics,
                params=spec.params,
                limit=spec.limit,
                seed=spec.seed,
                output_path=tmp,
                data_dir=data_dir,
                progress=False,
            )
            return dict(json.loads(result.json_path.read_text()))

    try:
        result = verify_meta(meta_path, submissions, records=records, rerun=rerun if rerun_tests else None)
    except XaibenchError as exc:
        click.echo(f"error: {_error_text(exc)}", err=True)
        sys.exit(2)
    for line in result.differences:
        click.echo(term_line(line))
    click.echo(result.verdict())  # last, where scripts and eyes look
    if result.status:
        sys.exit(result.status)


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
        TIMEOUT_OPTION,
        THREADS_OPTION,
        WORKERS_OPTION,
        DEVICE_OPTION,
        QUIET_OPTION,
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _application_config(ctx: click.Context, options: dict[str, Any]) -> Any:
    """The :class:`RunConfig` of a tune/select search from the shared options (``--data-dir`` set
    for the command and restored when it ends)."""
    ctx.with_resource(with_data_dir(options["data_dir"], CLI))
    suite, tracks = suite_tracks(options["suite"], None, None, spelling=CLI)
    return make_run_config(
        [],
        suite=suite,
        suite_tracks=tracks,
        seed=options["seed"],
        limit=options["limit"],
        workdir=options["workdir"],
        timeout=options["timeout"],
        threads=options["threads"],
        workers=options["workers"],
        device=options["device"],
        progress=not options["quiet"],
        spelling=CLI,
    )


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _objective_status(scores: Any, options: dict[str, Any]) -> Any:
    """The objective's label and status on the track (printed above the table when it has either)."""
    from xaibench.applications.objective import objective_status, read_meta

    status = objective_status(scores.objective, scores.track, scores.objective_block, read_meta(options["meta_file"]))
    line = status.line(scores.objective)
    if line is not None:
        console.print(line, style=None if status.ranked else "yellow", markup=False, highlight=False)
    return status


@cli.command()
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
def tune(ctx: click.Context, explainer: str, grid: tuple[str, ...], params: tuple[str, ...], **options: Any) -> None:
    """Search an explainer's parameters for the best mean --objective on one track.

    \b
    Every setting of the grid (the cartesian product of the --grid values) is explained and
    scored through the runner (cached, resumable); the table of every setting, with 95 %
    bootstrap intervals and the paired difference to the best, is printed and written to
    <out>/tune-<explainer>-<track>-<objective>.csv and .json. The best setting is the best
    mean in the metric's direction. For example:
      xaibench tune -e lime --grid kernel_width=0.1,0.25,0.5 --objective pasta_q1 --track shapes --limit 16
    """
    from xaibench.applications.settings import expand_grid, parse_grid, run_settings, score_settings
    from xaibench.applications.tune import tune as tune_settings
    from xaibench.applications.tune import write_tune

    registry = get_registry()
    registry.entry("explainer", explainer)
    settings = expand_grid(explainer, parse_grid(grid), _parse_kv(params, "'--param'"))
    submit = options.pop("submit")
    submissions_dir, leaderboard_dir = options.pop("submissions_dir"), options.pop("leaderboard_dir")
    if submit:
        _check_publish_targets(submissions_dir, leaderboard_dir)
    config = _application_config(ctx, options)
    scores = score_settings(settings, options["objective"], options["track"], config, registry)
    status = _objective_status(scores, options)
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
        table.add_row(name, _number(row.mean), interval, str(row.n), str(row.n_na), delta)
    console.print(table)
    paths = write_tune(result, options["out_dir"] or options["workdir"])
    console.print(f"best: {result.best.label} (* above); wrote " + ", ".join(str(p) for p in paths))
    if submit and not status.ranked and not options["allow_unranked_objective"]:
        raise XaibenchError(
            f"--submit: --objective {result.objective} is {status.status} on track {result.track}; "
            "pass --allow-unranked-objective to submit its best setting anyway"
        )
    if submit:
        from xaibench.publish.submission import write_run

        run_config = dataclasses.replace(config, tracks=None, metrics=None)
        run_result = run_settings([result.best], run_config, registry, tuned=True, keep_names=True)
        write_run(run_result, registry, submissions_dir)
        publish(submissions_dir, leaderboard_dir, None, with_site=True)
        console.print(f"submitted {result.best.label} to {submissions_dir} marked tuned_on_benchmark")


@cli.command("select")
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
def select_(ctx: click.Context, explainers: tuple[str, ...], grid: tuple[str, ...], **options: Any) -> None:
    """Pick, per image, the explainer or setting with the best --objective on one track.

    \b
    Writes the per-image choices to <out>/select-<track>-<objective>.csv and everything, with
    the gain of the per-image choice over the best single setting, to the .json. For example:
      xaibench select -e gradcam --grid target_layer=layer2,layer3,layer4 --objective pasta_q1 --track photos
    """
    from xaibench.applications.select import select, write_select
    from xaibench.applications.settings import candidate_settings, score_settings

    registry = get_registry()
    names = _split(explainers)
    for name in names:
        registry.entry("explainer", name)
    settings = candidate_settings(names, grid)
    if len(settings) < 2:
        raise click.UsageError("select needs at least two settings: give two --explainer, or a --grid")
    config = _application_config(ctx, options)
    scores = score_settings(settings, options["objective"], options["track"], config, registry)
    status = _objective_status(scores, options)
    result = select(scores, seed=options["seed"], status=status)
    arrow = "↑" if result.direction == "higher" else "↓"
    table = Table("setting", f"mean {result.objective} {arrow}", "images chosen", title=f"select on {result.track}")
    counts = result.counts
    for label in result.settings:
        name = f"[bold]{label} (best single)" if label == result.best_single else label
        table.add_row(name, _number(result.means[label]), str(counts[label]))
    table.add_row("[bold]per-image best", _number(result.selected_mean), str(len(result.choices)))
    console.print(table)
    skipped = f"; {result.skipped} samples without a value for every setting left out" if result.skipped else ""
    console.print(
        f"gain over the best single setting ({result.best_single}): {result.gain:+.4f} "
        f"[{result.gain_low:+.4f}, {result.gain_high:+.4f}] on {len(result.choices)} images{skipped}"
    )
    paths = write_select(result, options["out_dir"] or options["workdir"])
    console.print("wrote " + ", ".join(str(p) for p in paths))


@cli.command("meta")
@click.option(
    "--suite",
    default=None,
    help="Run this suite first (name or FILE.toml; the cache and records of an earlier run are reused), "
    "then assess its tracks. Default: 'default', unless --submissions is given.",
)
@click.option(
    "--explainer",
    "-e",
    "explainers",
    multiple=True,
    default=("default",),
    show_default=True,
    help="Explainers the suite is run with (comma-separated or repeated).",
)
@click.option("--track", "tracks", multiple=True, help="Only these tracks (repeatable).")
@click.option(
    "--output-path",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("."),
    show_default=True,
    help="Where the run writes (DIR/.xaibench, DIR/submissions, DIR/leaderboard) and meta goes (DIR/meta).",
)
@click.option(
    "--submissions",
    "submissions_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Assess this folder's submissions as they are (no run), unless --suite is given too.",
)
@click.option(
    "--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), default=None, help="Folder for meta.json/csv."
)
@click.option("--seed", default=0, show_default=True, help="Seed of the run and of every resample.")
@click.option(
    "--consistency",
    type=click.Choice(["synthetic", "all", "none"]),
    default="synthetic",
    show_default=True,
    help="Tracks where noise resilience and adversarial reactivity (IAC, IEC, MC) are measured: 20 perturbed "
    "re-runs of the track each; 'synthetic' keeps to tracks with a synthetic model, cheap to re-run.",
)
@click.option(
    "--no-protocol",
    is_flag=True,
    help="Skip protocol sensitivity (each ranking metric re-scored under its documented settings).",
)
@DATA_DIR_OPTION
@QUIET_OPTION
def meta_(
    suite: str | None,
    explainers: tuple[str, ...],
    tracks: tuple[str, ...],
    output_path: Path,
    submissions_dir: Path | None,
    out_dir: Path | None,
    seed: int,
    consistency: str,
    no_protocol: bool,
    data_dir: Path | None,
    quiet: bool,
) -> None:
    """How far each metric can be trusted on each track (DESIGN 9; docs/meta.md): rank stability
    under resampling, agreement between metrics, noise resilience and adversarial reactivity,
    verdicts; writes meta.json and meta.csv."""
    from xaibench.python_api import meta

    result = meta(
        _split(explainers),
        suite=suite,
        tracks=_split(tracks) or None,
        output_path=None if submissions_dir is not None and suite is None else output_path,
        submissions=submissions_dir,
        out=out_dir,
        seed=seed,
        data_dir=data_dir,
        consistency=consistency,
        progress=not quiet,
        protocol=not no_protocol,
    )
    columns = ["track", "metric", "family", "verdict", "mean tau", "p05 tau", "P(top first)", "n for tau 0.9"]
    protocol = any(c.protocol is not None for t in result.tracks.values() for c in t.cards.values())
    table = Table(*columns, *(("protocol min tau", "cherry-pick") if protocol else ()), "MC")
    for track, track_meta in result.tracks.items():
        for name, card in track_meta.cards.items():
            s = card.stability
            n_for = str(s.n_for_tau) if s.n_for_tau is not None else f"> {s.n}"
            mc = _fixed(card.consistency.mc) if card.consistency is not None else "-"
            cells = [track, name, card.family, card.verdict, _fixed(s.mean_tau), _fixed(s.p05_tau), _fixed(s.p_top)]
            p = card.protocol
            measured = p is not None and not p.reason
            extra = [] if not protocol else [_fixed(p.min_tau), str(p.cherry_pick)] if measured else ["", ""]
            table.add_row(*cells, n_for, *extra, mc)
    console.print(table)
    if result.known_answer:  # DESIGN 11: which proxy agrees with the known answer, per mechanism track
        known = Table("track", "proxy metric", "tau", "95 % interval", "verdict", "explainers", "samples")
        for k in result.known_answer:
            interval = "" if k.reason else f"[{_fixed(k.low)}, {_fixed(k.high)}]"
            known.add_row(
                k.track,
                k.metric,
                _fixed(k.tau),
                interval,
                k.reason or k.verdict,
                str(len(k.explainers)),
                str(k.samples),
            )
        console.print(known)
    console.print(f"wrote {result.json_path} and {result.csv_path}")


def _fixed(x: float) -> str:
    return "n/a" if x != x else f"{x:.2f}"


from xaibench.pasta.training.cli import pasta  # noqa: E402 - the PASTA command group lives with its package

cli.add_command(pasta)


@cli.group("records")
def records_group() -> None:
    """Convert a workdir's per-sample records to the columnar store, or export them as JSONL."""


@records_group.command("convert")
@click.argument("workdir", type=click.Path(path_type=Path))
def records_convert(workdir: Path) -> None:
    """Move the records of WORKDIR (a run's --workdir) into Parquet part files (docs/results.md).

    A JSONL workdir from an older xaibench converts in place; running it again changes nothing.
    """
    from xaibench.runner import convert

    click.echo(convert(workdir).line(workdir))


@records_group.command("export")
@click.argument("workdir", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), help="JSONL file to write (default: stdout).")
def records_export(workdir: Path, out: Path | None) -> None:
    """Write every record of WORKDIR as JSONL, one xaibench.record/1 object per line."""
    from xaibench.runner import export

    n = export(workdir, out)
    if out is not None:
        click.echo(f"{n} records written to {out}", err=True)


@cli.group("record")
def record_group() -> None:
    """The leaderboard of record: the official suite's committed submissions and board (docs/record.md)."""


ROOT_OPTION = click.option(
    "--root",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("record"),
    show_default=True,
    help="Folder of the records: the suite's record is ROOT/<suite>/.",
)


BUNDLE_OPTION = click.option(
    "--bundle/--no-bundle",
    default=True,
    show_default=True,
    help="Also the package's copy of the record (xaibench/data/record/<suite>.json.gz): --no-bundle for a "
    "record kept elsewhere.",
)


@record_group.command("build")
@click.option(
    "--explainer",
    "-e",
    "explainers",
    multiple=True,
    default=("all",),
    show_default=True,
    help="Explainers to compute (comma-separated or repeated); only what their submissions lack is run.",
)
@click.option("--track", "tracks", multiple=True, help="Only these tracks of the suite (repeatable).")
@ROOT_OPTION
@DATA_DIR_OPTION
@EXECUTOR_OPTION
@WORKERS_OPTION
@click.option("--threads", default=2, show_default=True, type=click.IntRange(min=1), help="torch intra-op threads.")
@TIMEOUT_OPTION
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    help="For a trial: at most this many samples per track (the record uses every sample; a submission "
    "of another limit is computed again).",
)
@QUIET_OPTION
def record_build(
    explainers: tuple[str, ...],
    tracks: tuple[str, ...],
    root: Path,
    data_dir: Path | None,
    executor: str,
    workers: int,
    threads: int,
    timeout: float,
    limit: int | None,
    quiet: bool,
) -> None:
    """Compute what the record of the official suite lacks, one explainer at a time, resumably.

    \b
    Each explainer's submission is written to ROOT/<suite>/submissions/ when it is done; a killed
    build resumes where it stopped (its workdir .xaibench/record/<suite>/ keeps the records and
    explanations). Adding an explainer computes only that explainer.
    """
    from xaibench.record import build_record, record_paths
    from xaibench.suites.record import RECORD_SUITE

    done = build_record(
        explainers=_split(explainers),
        tracks=_split(tracks) or None,
        paths=record_paths(RECORD_SUITE, root),
        data=data_dir,
        executor=executor,
        workers=workers,
        threads=threads,
        timeout=timeout,
        limit=limit,
        progress=not quiet,
        say=lambda line: console.print(line, markup=False, highlight=False),
    )
    if done.failed:
        sys.exit(1)


@record_group.command("board")
@ROOT_OPTION
@click.option(
    "--tests",
    is_flag=True,
    help="First run the validity tests (the ladder on every alignment metric, the planted cue on the faithfulness "
    "metrics of a track whose model uses its cue) and write ROOT/<suite>/meta/validity.json; needs --data-dir.",
)
@DATA_DIR_OPTION
@click.option("--threads", default=2, show_default=True, type=click.IntRange(min=1), help="torch intra-op threads.")
@TIMEOUT_OPTION
@BUNDLE_OPTION
@QUIET_OPTION
def record_board(
    root: Path, tests: bool, data_dir: Path | None, threads: int, timeout: float, bundle: bool, quiet: bool
) -> None:
    """Build the record's meta-evaluation and board (with its site) from its submissions.

    \b
    Writes ROOT/<suite>/meta/meta.json, meta.csv and ROOT/<suite>/leaderboard/ (the site in
    leaderboard/site/), with the meta gate applied, from the committed files alone: the same
    bytes on every machine (`xaibench record check` compares); and the values-only bundle that
    travels with the package (xaibench/data/record/<suite>.json.gz), which `xaibench run
    --suite <suite>` ranks a new explainer against.
    """
    from xaibench.publish.record_bundle import BUNDLE_DIR
    from xaibench.record import build_record_board, record_paths
    from xaibench.record.readme import update_readme
    from xaibench.record.validity import VALIDITY_NAME, compute_validity, write_validity
    from xaibench.suites.record import RECORD_SUITE

    folder = root / RECORD_SUITE
    say = (lambda line: None) if quiet else (lambda line: console.print(line, markup=False, highlight=False))
    if tests:
        paths = record_paths(RECORD_SUITE, root)
        options = {"threads": threads, "timeout": timeout or None, "progress": not quiet}
        validity = compute_validity(
            paths.submissions, RECORD_SUITE, paths.workdir / "meta", data_dir=data_dir, run_options=options, say=say
        )
        written = write_validity(folder / "meta" / VALIDITY_NAME, validity, suite=RECORD_SUITE, seed=0)
        console.print(f"wrote {written}")
    board = build_record_board(folder, RECORD_SUITE, bundle_dir=BUNDLE_DIR if bundle else None)
    console.print(f"wrote {board.meta_json} and {board.board_dir}/ (site in {board.board_dir}/site/)")
    if board.bundle is not None:
        console.print(f"wrote {board.bundle} ({board.bundle.stat().st_size / 1e6:.1f} MB)")
    readme = _record_readme(root)
    if readme is not None and update_readme(readme, folder, RECORD_SUITE):
        console.print(f"wrote the record's rows into {readme}")


def _record_readme(root: Path) -> Path | None:
    """The README beside the records' folder that shows the record's rows, if there is one."""
    from xaibench.record.readme import START

    readme = root.resolve().parent / "README.md"
    try:
        return readme if START in readme.read_text(encoding="utf-8") else None
    except OSError:
        return None


@record_group.command("check")
@ROOT_OPTION
@BUNDLE_OPTION
def record_check(root: Path, bundle: bool) -> None:
    """Check the committed record: every submission validates, and its meta and board rebuilt from
    the submissions are byte-identical to the committed files. Exits 1 naming each difference."""
    from xaibench.publish.record_bundle import BUNDLE_DIR
    from xaibench.publish.validation import submission_files, validate_file
    from xaibench.record import check_record_board
    from xaibench.record.readme import readme_problem
    from xaibench.suites.record import RECORD_SUITE

    folder = root / RECORD_SUITE
    problems = [str(issue) for path in submission_files([folder / "submissions"]) for issue in validate_file(path)]
    problems += check_record_board(folder, RECORD_SUITE, bundle_dir=BUNDLE_DIR if bundle else None)
    readme = _record_readme(root)
    if readme is not None and (problem := readme_problem(readme, folder, RECORD_SUITE)) is not None:
        problems.append(problem)
    for line in problems:
        click.echo(line)
    if problems:
        click.echo(f"the record of {RECORD_SUITE} in {folder} does not check: {len(problems)} problem(s)")
        sys.exit(1)
    click.echo(f"the record of {RECORD_SUITE} in {folder} checks: valid, and its meta and board rebuild byte for byte")


@cli.command("new-plugin")
@click.argument("name")
@click.option(
    "--dest",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("."),
    show_default=True,
    help="Folder in which to create xaibench-NAME/.",
)
def new_plugin(name: str, dest: Path) -> None:
    """Scaffold a ready-to-install explainer plugin distribution with a test."""
    from xaibench.scaffold import echo_next_steps, scaffold_plugin

    try:
        path = scaffold_plugin(name, dest)
    except FileExistsError as exc:
        raise XaibenchError(str(exc)) from exc
    echo_next_steps(path)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: one clear line and a non-zero exit on any expected failure."""
    try:
        cli.main(args=list(argv) if argv is not None else None, standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except (XaibenchError, ValueError) as exc:
        click.echo(f"error: {_error_text(exc)}", err=True)
        sys.exit(1)
    except OSError as exc:  # a file that cannot be read or written: name it
        click.echo(f"error: {term_line(_os_error(exc))}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        click.echo("interrupted; rerun the same command to resume", err=True)
        sys.exit(130)


def _error_text(exc: BaseException) -> str:
    """An error's message for the terminal: each of its lines escaped (:func:`term_line`), so a
    plugin's words in it (an exception's text) cannot rewrite the line or the ones before it."""
    return "\n".join(term_line(line) for line in str(exc).split("\n"))


def _os_error(exc: OSError) -> str:
    if exc.filename is None or exc.strerror is None:
        return str(exc)
    target = f" -> {exc.filename2}" if exc.filename2 is not None else ""
    return f"{exc.filename}{target}: {exc.strerror}"


if __name__ == "__main__":
    main()
