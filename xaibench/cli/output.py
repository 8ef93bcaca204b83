"""What the commands share to print: the console (``console``, looked up at each use so a test may
replace it), numbers, what publishing wrote, and an error's text for the terminal."""

from __future__ import annotations

import os
import sys
from typing import Any

import click
from rich.console import Console

from xaibench.publish.writers import term_line

console = Console(width=None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", "160")))


def plugin_warning(line: str) -> None:
    """A plugin that fails to load: one line on stderr, then the command goes on."""
    click.echo(f"warning: {term_line(line)}", err=True)


def number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def fixed(x: float) -> str:
    return "n/a" if x != x else f"{x:.2f}"


def print_published(published: Any, print_leaderboard: Any, wide: bool) -> None:
    """The ranked tables (``wide``: every metric column) and what publishing wrote."""
    print_leaderboard(published.board, console, wide=wide)
    print_written(published)


def print_written(published: Any) -> None:
    """What publishing wrote: the leaderboard files and the site."""
    console.print("wrote " + ", ".join(str(p) for p in published.files))
    if published.site_dir is not None:
        console.print(f"site: {len(published.pages)} pages in {published.site_dir}/ (open index.html)")


def error_text(exc: BaseException) -> str:
    """An error's message for the terminal: each of its lines escaped (:func:`term_line`), so a
    plugin's words in it (an exception's text) cannot rewrite the line or the ones before it."""
    return "\n".join(term_line(line) for line in str(exc).split("\n"))


def os_error(exc: OSError) -> str:
    if exc.filename is None or exc.strerror is None:
        return str(exc)
    target = f" -> {exc.filename2}" if exc.filename2 is not None else ""
    return f"{exc.filename}{target}: {exc.strerror}"
