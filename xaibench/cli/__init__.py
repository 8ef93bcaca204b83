"""The ``xaibench`` command line. A failure exits non-zero with one clear line.

Each command parses its options, calls the Python API and prints: ``run`` (:mod:`.run`), ``list``
(:mod:`.listing`), ``score`` (:mod:`.score`), ``leaderboard build`` (:mod:`.leaderboard`),
``submission validate``/``verify`` (:mod:`.submission`), ``tune`` and ``select``
(:mod:`.applications`), ``meta`` (:mod:`.meta`), ``records`` (:mod:`.records`), ``record``
(:mod:`.record`), ``new-plugin`` (:mod:`.scaffold`) and ``pasta`` (with its package). What they
share: option parsing (:mod:`.options`, the run options made from
:class:`xaibench.runner.config.RunOptions`) and printing (:mod:`.output`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from xaibench.cli.applications import select_, tune
from xaibench.cli.leaderboard import leaderboard
from xaibench.cli.listing import list_
from xaibench.cli.meta import meta_
from xaibench.cli.options import _split_pairs as _split_pairs
from xaibench.cli.output import console, error_text, os_error, plugin_warning
from xaibench.cli.record import record_group
from xaibench.cli.records import records_group
from xaibench.cli.run import RUN_OPTION_GROUPS, run
from xaibench.cli.scaffold import new_plugin
from xaibench.cli.score import score
from xaibench.cli.submission import submission
from xaibench.errors import XaibenchError
from xaibench.pasta.training.cli import pasta
from xaibench.plugins import manager
from xaibench.publish.writers import term_line

__all__ = ["RUN_OPTION_GROUPS", "cli", "console", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="xaibench")
def cli() -> None:
    """xaibench: benchmark explainable-AI methods on image classifiers.

    Explainers, datasets, models, metrics and suites come from plugins (entry-point
    group `xaibench`); `xaibench list plugins` shows what is installed.
    """
    manager.on_plugin_error = plugin_warning  # a plugin that fails to load: one line, then go on


for _command in (
    run,
    list_,
    score,
    leaderboard,
    submission,
    tune,
    select_,
    meta_,
    pasta,
    records_group,
    record_group,
    new_plugin,
):
    cli.add_command(_command)


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
        click.echo(f"error: {error_text(exc)}", err=True)
        sys.exit(1)
    except OSError as exc:  # a file that cannot be read or written: name it
        click.echo(f"error: {term_line(os_error(exc))}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        click.echo("interrupted; rerun the same command to resume", err=True)
        sys.exit(130)
