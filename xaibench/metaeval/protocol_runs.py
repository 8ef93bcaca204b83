"""Protocol sensitivity of a run's ranking metrics (DESIGN 9, ``xaibench meta``): the runs behind it.

For every track of the run and every ranking metric of the alignment and faithfulness families
scored there, :func:`xaibench.metaeval.protocol.protocol_settings` lists the metric's documented
alternative settings. The run's explainers (reference-only ones left out) are run again once per
setting through the runner into ``<workdir>/meta`` with that track's metric parameters
overridden; the explanations are read from the run's own explanation cache, so only the metric is
recomputed. All tracks and metrics share the runs: run ``k`` scores the ``k``-th setting of every
metric that has one, so there are as many runs as the longest list of settings (at most
:data:`~xaibench.metaeval.protocol.MAX_SETTINGS`). The records of different settings sit side by
side (a record's key includes its metric parameters); each setting's values are read back by
its parameters and compared with the run's default values
(:func:`xaibench.metaeval.protocol.protocol_sensitivity`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from xaibench.errors import XaibenchError
from xaibench.metaeval.protocol import Protocol, protocol_sensitivity, protocol_settings, setting_label
from xaibench.runner import RunOptions

if TYPE_CHECKING:
    import pandas as pd

    from xaibench.api import TrackSpec
    from xaibench.plugins.manager import Registry

FAMILIES = ("alignment", "faithfulness")
META_WORKDIR = "meta"  # as xaibench.metaeval.pipeline.META_WORKDIR: meta's own runs, inside the run's workdir
RUN_OPTIONS = ("limit", *(f.name for f in dataclasses.fields(RunOptions) if f.name != "cache"))
"""The run's options its settings' runs take: its sample limit and every machine option but the
cache (they always read the run's explanations)."""


def _values(rows: pd.DataFrame, explainers: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """``values[e, s]`` (raw) over the samples where every explainer has a finite value."""
    by: dict[str, dict[str, float]] = {x: {} for x in explainers}
    for explainer, sample, value in zip(rows["explainer"], rows["sample_id"], rows["value"], strict=True):
        if explainer in by and value == value:
            by[explainer][str(sample)] = float(value)
    ids = sorted(set.intersection(*(set(v) for v in by.values()))) if by else []
    return np.array([[by[x][i] for i in ids] for x in explainers], dtype=np.float64).reshape(len(explainers), -1), ids


def _accepted(registry: Registry, metric: str, setting: Mapping[str, Any]) -> bool:
    """Whether the metric takes ``setting`` (its own checks may refuse a combination of values)."""
    try:
        registry.create("metric", metric, **setting)
    except (XaibenchError, ValueError, TypeError):
        return False
    return True


def _matches(params: Any, setting: Mapping[str, Any]) -> bool:
    return isinstance(params, Mapping) and all(params.get(k) == v for k, v in setting.items())


def protocol_runs(
    registry: Registry,
    frame: pd.DataFrame,
    specs: Sequence[TrackSpec],
    *,
    workdir: Path,
    suite: str,
    seed: int = 0,
    options: Mapping[str, Any] | None = None,
) -> dict[tuple[str, str], Protocol]:
    """The protocol sensitivity of every (track, ranking alignment or faithfulness metric) of a
    run, by (track, metric) (see the module doc). ``frame``: the run's own records
    (:attr:`xaibench.python_api.RunResults.records`); ``specs``: its resolved tracks; ``workdir``:
    its workdir (the settings' records go to ``<workdir>/meta``, explanations come from
    ``<workdir>/cache``); ``options``: the run's options among :data:`RUN_OPTIONS`. A metric
    without documented settings gets a :class:`Protocol` saying so."""
    from xaibench.runner import Runner, make_run_config

    if frame.empty:
        return {}
    wanted = {s.name: s for s in specs}
    rows = frame[frame["track"].isin(wanted) & frame["family"].isin(FAMILIES)]
    explainers = sorted(
        x for x in set(rows["explainer"]) if not getattr(registry.entry("explainer", x).cls, "reference_only", False)
    )
    rows = rows[rows["explainer"].isin(explainers)]
    plan: dict[tuple[str, str], tuple[str, dict[str, Any], list[dict[str, Any]]]] = {}
    for (track, metric), group in rows.groupby(["track", "metric"]):
        cls = registry.entry("metric", str(metric)).cls
        if not getattr(cls, "ranking", False):
            continue
        default = dict(group["metric_params"].iloc[0] or {})
        settings = [s for s in protocol_settings(cls, default) if _accepted(registry, str(metric), s)]
        plan[(str(track), str(metric))] = (str(group["direction"].iloc[0]), default, settings)
    if not plan:
        return {}
    explainer_params = {x: dict(rows.loc[rows["explainer"] == x, "explainer_params"].iloc[0] or {}) for x in explainers}
    given = {k: v for k, v in (options or {}).items() if k in RUN_OPTIONS and v is not None}
    target = workdir / META_WORKDIR
    for k in range(max(len(s) for _, _, s in plan.values())):
        batch: list[TrackSpec] = []
        for name, spec in wanted.items():
            chosen = {m: s[k] for (t, m), (_, _, s) in plan.items() if t == name and k < len(s)}
            if chosen:
                batch.append(dataclasses.replace(spec, metrics=tuple(sorted(chosen)), metric_params=chosen))
        if not batch:
            continue
        config = make_run_config(
            explainers,
            suite=suite,
            suite_tracks=batch,
            explainer_params=explainer_params,
            seed=seed,
            workdir=target,
            limit=given.get("limit"),
            options=RunOptions.of(given),
            examples=0,
        )
        with Runner(config, registry, explanations_from=workdir) as runner:  # only the metric is recomputed
            runner.run()
    from xaibench.results import records

    scored = records(target)
    out: dict[tuple[str, str], Protocol] = {}
    for (track, metric), (direction, default, settings) in sorted(plan.items()):
        base = rows[(rows["track"] == track) & (rows["metric"] == metric)]
        default_values, _ = _values(base, explainers)
        mine = scored[(scored["track"] == track) & (scored["metric"] == metric)] if not scored.empty else scored
        by_setting: dict[str, np.ndarray] = {}
        params: dict[str, dict[str, Any]] = {}
        for setting in settings:
            label = setting_label(default, setting)
            chosen = mine[[_matches(p, setting) for p in mine["metric_params"]]] if not mine.empty else mine
            by_setting[label], _ = _values(chosen, explainers)
            params[label] = setting
        out[(track, metric)] = protocol_sensitivity(
            default_values, by_setting, direction, explainers=explainers, params=params
        )
    return out
