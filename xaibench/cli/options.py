"""What the commands share to parse their options: names and ``KEY=VALUE`` lists, the device check,
the options several commands take (one definition each), the run options made from the one table
:class:`xaibench.runner.config.RunOptions`, and :class:`GroupedCommand` (``--help`` in sections)."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from xaibench.errors import XaibenchError
from xaibench.params import parse_value
from xaibench.runner import CLI, RunOptions, check_device


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


# ----------------------------------------------------------------------------- the run options

_RUN_FIELDS = {f.name: f for f in dataclasses.fields(RunOptions)}
_CALLBACKS: dict[str, Callable[[click.Context, click.Parameter, Any], Any]] = {"device": _check_device}
"""Run options checked as they are parsed (a usage error before any work), by field name."""


def run_option_name(name: str) -> str:
    """The command line's parameter name of the run option ``name`` (``cache``: ``no_cache``)."""
    return str(_RUN_FIELDS[name].metadata["command_line"].name)


def run_option(name: str, default: Any = None) -> Callable[[Any], Any]:
    """The click option of the run option ``name`` (a :class:`~xaibench.runner.config.RunOptions`
    field), made from its table entry: flags, help, metavar; a number checked from its minimum, a
    choice among its choices, a flag for a negated one; its default unless ``default`` is given."""
    field = _RUN_FIELDS[name]
    how = field.metadata["command_line"]
    if how.negated:
        return click.option(*how.flags, how.name, is_flag=True, help=how.help)
    value = field.default if default is None else default
    kind: Any = None
    if how.choices is not None:
        kind = click.Choice(how.choices)
    elif isinstance(value, int):
        kind = click.IntRange(min=how.minimum)
    elif isinstance(value, float):
        kind = click.FloatRange(min=how.minimum)
    extra = {"show_default": True} if value is not None else {}
    callback = _CALLBACKS.get(name)
    return click.option(
        *how.flags, how.name, default=value, type=kind, metavar=how.metavar, callback=callback, help=how.help, **extra
    )


def run_options(*names: str, defaults: Mapping[str, Any] | None = None) -> Callable[[Any], Any]:
    """The click options of the run options ``names`` (every :class:`~xaibench.runner.config.RunOptions`
    field when none is named), in that order; the command receives one ``RunOptions`` as
    ``run_options`` instead of their values (the options not named keep their defaults)."""
    chosen = names or tuple(_RUN_FIELDS)

    def decorate(command: Any) -> Any:
        @functools.wraps(command)
        def with_run_options(*args: Any, **kwargs: Any) -> Any:
            values = {n: kwargs.pop(run_option_name(n)) for n in chosen}
            negated = {n for n in chosen if _RUN_FIELDS[n].metadata["command_line"].negated}
            options = RunOptions(**{n: (not v) if n in negated else v for n, v in values.items()})
            return command(*args, run_options=options, **kwargs)

        for name in reversed(chosen):
            with_run_options = run_option(name, (defaults or {}).get(name))(with_run_options)
        return with_run_options

    return decorate


# ----------------------------------------------------------------------------- options several commands share

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
