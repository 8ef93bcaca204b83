"""``xaibench records convert`` and ``export``: a workdir's per-sample records moved to the columnar
store, or written as JSONL (:func:`xaibench.runner.convert`, :func:`xaibench.runner.export`)."""

from __future__ import annotations

from pathlib import Path

import click


@click.group("records")
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
