"""``xaibench record build``, ``board`` and ``check``: the leaderboard of record (:mod:`xaibench.record`:
computed one explainer at a time, its meta and board built from the committed files, checked byte
for byte), with progress and results printed."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from xaibench.cli import output
from xaibench.cli.options import DATA_DIR_OPTION, _split, run_option


@click.group("record")
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
@run_option("executor")
@run_option("workers")
@run_option("threads", default=2)
@run_option("timeout")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    help="For a trial: at most this many samples per track (the record uses every sample; a submission "
    "of another limit is computed again).",
)
@run_option("progress")
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
        say=lambda line: output.console.print(line, markup=False, highlight=False),
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
@run_option("threads", default=2)
@run_option("timeout")
@BUNDLE_OPTION
@run_option("progress")
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
    from xaibench.record import build_record_board
    from xaibench.record.readme import update_readme
    from xaibench.record.steps import record_readme, run_validity_tests
    from xaibench.suites.record import RECORD_SUITE

    folder = root / RECORD_SUITE
    console = output.console
    say = (lambda line: None) if quiet else (lambda line: console.print(line, markup=False, highlight=False))
    if tests:
        written = run_validity_tests(
            root, RECORD_SUITE, data_dir=data_dir, threads=threads, timeout=timeout, progress=not quiet, say=say
        )
        console.print(f"wrote {written}")
    board = build_record_board(folder, RECORD_SUITE, bundle_dir=BUNDLE_DIR if bundle else None)
    console.print(f"wrote {board.meta_json} and {board.board_dir}/ (site in {board.board_dir}/site/)")
    if board.bundle is not None:
        console.print(f"wrote {board.bundle} ({board.bundle.stat().st_size / 1e6:.1f} MB)")
    readme = record_readme(root)
    if readme is not None and update_readme(readme, folder, RECORD_SUITE):
        console.print(f"wrote the record's rows into {readme}")


@record_group.command("check")
@ROOT_OPTION
@BUNDLE_OPTION
def record_check(root: Path, bundle: bool) -> None:
    """Check the committed record: every submission validates, and its meta and board rebuilt from
    the submissions are byte-identical to the committed files. Exits 1 naming each difference."""
    from xaibench.publish.record_bundle import BUNDLE_DIR
    from xaibench.record.steps import record_problems
    from xaibench.suites.record import RECORD_SUITE

    folder = root / RECORD_SUITE
    problems = record_problems(root, RECORD_SUITE, bundle_dir=BUNDLE_DIR if bundle else None)
    for line in problems:
        click.echo(line)
    if problems:
        click.echo(f"the record of {RECORD_SUITE} in {folder} does not check: {len(problems)} problem(s)")
        sys.exit(1)
    click.echo(f"the record of {RECORD_SUITE} in {folder} checks: valid, and its meta and board rebuild byte for byte")
