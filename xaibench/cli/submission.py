"""``xaibench submission validate`` and ``verify``: check submission files against the schema, re-run
a random choice of a submission's records (:mod:`xaibench.publish.verify`) or a meta.json's figures
(:func:`xaibench.metaeval.verify.verify_meta`, re-running through :func:`xaibench.meta`), and print
the verdict."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from xaibench.cli import output
from xaibench.errors import XaibenchError
from xaibench.plugins.manager import get_registry
from xaibench.publish.writers import term_line
from xaibench.runner import CLI
from xaibench.runner import data_dir as with_data_dir


@click.group()
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
        click.echo(f"error: {output.error_text(exc)}", err=True)
        sys.exit(2)
    click.echo(f"({result.seconds:.1f} s; the verification is recorded in {path})")
    click.echo(verdict)  # last, where scripts and eyes look
    if not result.passed:
        sys.exit(1)


def _verify_meta(
    meta_path: Path, submissions: Path | None, records: Path | None, rerun_tests: bool, data_dir: Path | None
) -> None:
    """``submission verify --meta``: exits 0 when all match, 1 when any differs, 2 when it cannot be verified."""
    from xaibench.metaeval.verify import rerun_through, verify_meta
    from xaibench.python_api import meta

    try:
        rerun = rerun_through(meta, data_dir) if rerun_tests else None
        result = verify_meta(meta_path, submissions, records=records, rerun=rerun)
    except XaibenchError as exc:
        click.echo(f"error: {output.error_text(exc)}", err=True)
        sys.exit(2)
    for line in result.differences:
        click.echo(term_line(line))
    click.echo(result.verdict())  # last, where scripts and eyes look
    if result.status:
        sys.exit(result.status)
