"""``xaibench list``: the installed components of a kind, or the plugins with their load status
(the rows are :mod:`xaibench.plugins.listing`'s), as a table or JSON."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.table import Table

from xaibench.cli import output
from xaibench.plugins.listing import component_rows, plugin_rows
from xaibench.plugins.manager import get_registry
from xaibench.publish.writers import term_text

LIST_KINDS = ("explainers", "datasets", "models", "metrics", "suites", "encoders", "plugins")
_EXTRA_COLUMNS = {
    "metric": ["family", "direction", "ranking"],
    "explainer": ["kind", "default_params"],
    "suite": ["tracks", "status"],
    "encoder": ["modalities", "default_params"],
}
"""The columns a kind adds to the table, by kind."""


@click.command("list")
@click.argument("kind", type=click.Choice(LIST_KINDS))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def list_(kind: str, as_json: bool) -> None:
    """List installed components of KIND, or plugins with their load status."""
    registry = get_registry()
    if kind == "plugins":
        rows = plugin_rows(registry)
        if as_json:
            click.echo(json.dumps(rows, indent=2))
            return
        table = Table("plugin", "distribution", "version", "status", "components")
        for r in rows:  # every cell a plain Text: a plugin's words show as typed (no markup, no escape code)
            status = term_text("ok", "green") if r["ok"] else term_text(f"error: {r['error']}", "red")
            cells = (r["name"], r["distribution"], r["version"])
            table.add_row(*map(term_text, cells), status, str(len(r["components"])))
        output.console.print(table)
        return
    singular = kind[:-1]
    rows = component_rows(registry, singular)
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
        return
    extra = _EXTRA_COLUMNS.get(singular, [])
    table = Table("name", "version", "distribution", *extra, "description")
    for r in rows:  # every cell a plain Text: a plugin's words show as typed (no markup, no escape code)
        dist = f"{r['distribution']} {r['distribution_version']}"
        cells = [r["name"], r["version"], dist, *[_cell(r.get(k)) for k in extra], r["description"]]
        table.add_row(*map(term_text, cells))
    output.console.print(table)


def _cell(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(map(str, value))
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return str(value)
