"""``xaibench new-plugin``: scaffold an explainer plugin distribution (:mod:`xaibench.scaffold`)."""

from __future__ import annotations

from pathlib import Path

import click

from xaibench.errors import XaibenchError


@click.command("new-plugin")
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
