"""``xaibench score``: precomputed saliency maps scored without a plugin
(:func:`xaibench.runner.score_folder`), as a table or JSON."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.table import Table

from xaibench.cli import output
from xaibench.cli.options import _split
from xaibench.plugins.manager import get_registry
from xaibench.publish.writers import term_text


@click.command()
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
    output.console.print(table)
