"""Explainer settings run on one track through the runner, and their per-sample objective values.

A :class:`Setting` is an explainer with the parameters given to it (the others keep their
defaults). :func:`score_settings` runs every setting on one track with one metric through one
:class:`~xaibench.runner.run.Runner` (one track load, one pool of workers, the explanation cache
and the records of ``<workdir>``): each setting is a separate explainer key there, and its
records are keyed by its parameters, so a repeated search reuses every explanation and score.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xaibench.errors import XaibenchError
from xaibench.params import parse_value
from xaibench.plugins.manager import Registry
from xaibench.runner import (
    CLI,
    RunConfig,
    Runner,
    RunOptions,
    RunResult,
    Spelling,
    explainer_handles,
    make_run_config,
    suite_tracks,
)


@dataclass(frozen=True)
class Setting:
    """An explainer and the parameters given to it (JSON values); the rest keep their defaults."""

    explainer: str
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """``name`` or ``name(k=v, ...)``: unique per setting, used as its key in tables and runs."""
        if not self.params:
            return self.explainer
        inner = ", ".join(f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in self.params.items())
        return f"{self.explainer}({inner})"


@dataclass(frozen=True)
class SettingScores:
    """The objective's per-sample values of each setting on one track (``None``: n/a)."""

    track: str
    objective: str
    direction: str  # "higher" or "lower": which way the objective is better
    settings: list[Setting]
    values: dict[str, dict[str, float | None]]  # setting label -> sample id -> value
    na_reasons: dict[str, dict[str, int]]  # setting label -> n/a reason -> count
    params: dict[str, dict[str, Any]]  # setting label -> the explainer's full resolved parameters
    sample_ids: list[str]  # the track's samples, in order
    # what the run recorded about the objective (family, direction, ranking, params: its label)
    objective_block: dict[str, Any] = field(default_factory=dict)

    def better(self, a: float, b: float) -> bool:
        """Whether ``a`` is strictly better than ``b`` in the objective's direction."""
        return a > b if self.direction == "higher" else a < b


def parse_grid(items: Sequence[str], option: str = "--grid") -> dict[str, list[Any]]:
    """``["KEY=V1,V2", ...]`` -> ``{KEY: [V1, V2]}``; each value parsed as JSON when it is JSON
    (``0.1`` a number, ``true`` a boolean), else kept as a string (``layer4``). A malformed
    item, an empty list or a key given twice raises :class:`XaibenchError` naming ``option``."""
    grid: dict[str, list[Any]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise XaibenchError(f"{option} {item!r}: expected KEY=V1,V2,... (e.g. kernel_width=0.1,0.25)")
        if key in grid:
            raise XaibenchError(f"{option} {key!r} is given twice; list every value in one {option}")
        values = []
        for part in (p.strip() for p in raw.split(",")):
            if not part:
                continue
            try:
                values.append(parse_value(part))
            except ValueError as exc:
                raise XaibenchError(f"{option} {key}: the value {exc}") from None
        if not values:
            raise XaibenchError(f"{option} {item!r}: no values after '='")
        unique = list({json.dumps(v, sort_keys=True): v for v in values}.values())
        grid[key] = unique
    return grid


def expand_grid(
    explainer: str, grid: Mapping[str, Sequence[Any]], fixed: Mapping[str, Any] | None = None
) -> list[Setting]:
    """Every setting of the cartesian product of ``grid`` (in the order given: the last key varies
    fastest), each with ``fixed`` too. An empty grid gives the one setting ``fixed``."""
    fixed = dict(fixed or {})
    clash = sorted(set(fixed) & set(grid))
    if clash:
        raise XaibenchError(f"--grid {clash[0]!r} is also a fixed --param; give it in one of them")
    keys = list(grid)
    return [
        Setting(explainer, {**fixed, **dict(zip(keys, combo, strict=True))})
        for combo in itertools.product(*(grid[k] for k in keys))
    ]


def search_config(
    suite: str,
    *,
    seed: int,
    limit: int | None,
    workdir: Path,
    options: RunOptions,
    spelling: Spelling = CLI,
) -> RunConfig:
    """The :class:`RunConfig` of a ``tune``/``select`` search on ``suite`` (a suite plugin's name or
    a suite file): no explainer yet (each setting is one), every check of
    :func:`~xaibench.runner.config.make_run_config`, messages spelled as ``spelling`` says."""
    name, tracks = suite_tracks(suite, None, None, spelling=spelling)
    return make_run_config(
        [],
        suite=name,
        suite_tracks=tracks,
        seed=seed,
        limit=limit,
        workdir=workdir,
        options=options,
        spelling=spelling,
    )


def run_settings(
    settings: Sequence[Setting],
    config: RunConfig,
    registry: Registry,
    *,
    tuned: bool = False,
    keep_names: bool = False,
) -> RunResult:
    """Run ``settings`` through one :class:`Runner` built from ``config`` (its ``explainers`` and
    ``explainer_params`` are replaced). Each setting is an explainer key of the run: its label,
    or its explainer's name when ``keep_names`` (then the names must differ, as publishing needs).
    ``tuned`` marks every setting ``tuned_on_benchmark`` (its records and submission say so).
    A bad explainer name or parameter raises :class:`XaibenchError` before any work."""
    if not settings:
        raise XaibenchError("no explainer setting to run")
    first = settings[0]
    config = dataclasses.replace(
        config, explainers=[first.explainer], explainer_params={first.explainer: dict(first.params)}
    )
    with Runner(config, registry) as runner:
        handles = {}
        for setting in settings:
            if setting is first and first.explainer in runner.explainers:  # the Runner described it already
                handle = runner.explainers[first.explainer]
            else:
                (handle,) = explainer_handles(
                    runner.executor, registry, {setting.explainer: dict(setting.params)}, timeout=config.timeout
                ).values()
            if tuned:
                handle = dataclasses.replace(handle, tuned_on_benchmark=True)
            key = setting.explainer if keep_names else setting.label
            if key in handles:
                raise XaibenchError(f"explainer setting {key!r} is given twice")
            handles[key] = handle
        runner.explainers = handles
        return runner.run()


def score_settings(
    settings: Sequence[Setting], objective: str, track: str, config: RunConfig, registry: Registry
) -> SettingScores:
    """Run every setting on ``track`` with the one metric ``objective`` (``config`` gives the
    suite, limit, seed, workdir and workers) and return its per-sample values.

    Raises :class:`XaibenchError` with one line for an unknown metric, a track that fails to
    load, and an objective that gives no value at all on the track (with the n/a reasons)."""
    entry = registry.entry("metric", objective)
    direction = str(entry.cls.direction)
    labels = [s.label for s in settings]
    repeated = next((label for label in labels if labels.count(label) > 1), None)
    if repeated is not None:
        raise XaibenchError(f"explainer setting {repeated!r} is given twice")
    config = dataclasses.replace(config, tracks=[track], metrics=[objective], examples=0)
    summary = run_settings(settings, config, registry).summary
    block = summary["tracks"][track]
    if "error" in block:
        raise XaibenchError(f"track {track}: {block['error']}")
    values: dict[str, dict[str, float | None]] = {}
    reasons: dict[str, dict[str, int]] = {}
    params: dict[str, dict[str, Any]] = {}
    for setting in settings:
        entry_summary = block["explainers"][setting.label]
        metric = entry_summary["metrics"][objective]
        values[setting.label] = {str(k): v for k, v in metric["samples"].items()}
        reasons[setting.label] = dict(metric.get("na_reasons", {}))
        params[setting.label] = dict(entry_summary["explainer"]["params"])
    if not any(v is not None for per in values.values() for v in per.values()):
        why = "; ".join(f"{r} ({n})" for per in reasons.values() for r, n in per.items()) or "no samples"
        raise XaibenchError(f"--objective {objective}: no value on track {track} for any setting: {why}")
    sample_ids = list(dict.fromkeys(s for per in values.values() for s in per))
    first = block["explainers"][settings[0].label]["metrics"][objective]
    recorded = {k: first[k] for k in ("family", "direction", "ranking", "params") if k in first}
    return SettingScores(track, objective, direction, list(settings), values, reasons, params, sample_ids, recorded)


def candidate_settings(explainers: Sequence[str], grid_items: Sequence[str], option: str = "--grid") -> list[Setting]:
    """The settings ``xaibench select`` chooses among: each explainer of ``explainers`` once, or,
    for one named in a grid item ``NAME.KEY=V1,V2`` (just ``KEY=V1,V2`` when only one explainer
    is given), every setting of its grid."""
    names = list(dict.fromkeys(explainers))
    items: dict[str, list[str]] = {n: [] for n in names}
    for item in grid_items:
        lhs = item.partition("=")[0].strip()
        name, dot, key = lhs.partition(".")
        if dot and name in items:
            items[name].append(f"{key}={item.partition('=')[2]}")
        elif len(names) == 1 and not dot:
            items[names[0]].append(item)
        else:
            raise XaibenchError(
                f"{option} {item!r}: expected EXPLAINER.KEY=V1,V2 with EXPLAINER one of {', '.join(names)}"
            )
    return [s for n in names for s in expand_grid(n, parse_grid(items[n], option))]
