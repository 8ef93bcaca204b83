"""``xaibench leaderboard build``: the leaderboard files and the site from submission files
(:func:`xaibench.python_api.publish_leaderboard`), and the ranking printed; :func:`publish` also
rebuilds the leaderboard after ``xaibench tune --submit``."""

from __future__ import annotations

from pathlib import Path

import click

from xaibench.cli import output
from xaibench.cli.options import WIDE_HELP
from xaibench.errors import XaibenchError
from xaibench.runner import CLI
from xaibench.runner import data_dir as with_data_dir


@click.group()
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
    output.print_published(published, print_leaderboard, wide)
