"""Protocol sensitivity and the cherry-pick count (DESIGN 9, reported).

A metric's documented settings (its baseline or perturbation, its step count, the positive part
or the absolute value of the map, ...) are the alternatives its ``param_specs``
(:mod:`xaibench.params`) document: :func:`protocol_settings` lists them, one parameter changed at
a time. Each setting gives an explainer ranking; :func:`protocol_sensitivity` compares each with
the default setting's ranking (Kendall tau-b, 1 = the same order) and counts the explainers that
some setting ranks first (the **cherry-pick count**: 1 means no choice of setting changes the
winner; more means an author could pick the setting that crowns their explainer).

Pure computation: the values come from the caller (:mod:`xaibench.metaeval.protocol_runs`
runs the settings through the runner).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xaibench.metaeval.rankings import kendall_tau_b, signed
from xaibench.params import Param

MAX_SETTINGS = 6  # alternative settings per metric, at most
NO_SETTINGS = "no documented settings"


def _is_step_count(name: str, spec: Param) -> bool:
    return spec.kind is int and (name == "steps" or name.endswith("_steps") or name.startswith("n_steps"))


def protocol_settings(metric: Any, default_params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The documented alternative settings of one metric: each is ``default_params`` with one
    parameter changed. From ``metric``'s ``param_specs`` (a metric class or anything with that
    attribute, or the mapping itself), in the order of the specs: every other choice of a
    parameter with ``choices`` (baseline, perturbation), the other value of a boolean (``abs``:
    absolute value or signed map, ``logit``: logit or probability), and half and double of a step
    count (``steps``, ``*_steps``), kept within the spec's bounds. Only parameters present in
    ``default_params`` are varied; at most :data:`MAX_SETTINGS`, the first ones. ``[]`` when the
    metric documents none."""
    specs: Mapping[str, Param] = metric if isinstance(metric, Mapping) else getattr(metric, "param_specs", {}) or {}
    out: list[dict[str, Any]] = []
    for name, spec in specs.items():
        if name not in default_params:
            continue
        current = default_params[name]
        alternatives: list[Any] = []
        if spec.kind is str and spec.choices:
            alternatives = [c for c in spec.choices if c != current]
        elif spec.kind is bool and isinstance(current, bool):
            alternatives = [not current]
        elif _is_step_count(name, spec) and isinstance(current, int) and not isinstance(current, bool):
            for value in (current // 2, current * 2):
                low = 1 if spec.low is None else spec.low
                if value != current and value >= low and (spec.high is None or value <= spec.high):
                    alternatives.append(value)
        for value in alternatives:
            setting = {**default_params, name: value}
            if setting not in out:
                out.append(setting)
    return out[:MAX_SETTINGS]


def setting_label(default_params: Mapping[str, Any], setting: Mapping[str, Any]) -> str:
    """``name=value`` of the parameters ``setting`` changes from ``default_params`` (``default``: none)."""
    changed = [f"{k}={setting[k]}" for k in sorted(setting) if default_params.get(k) != setting[k]]
    return ",".join(changed) or "default"


@dataclass(frozen=True)
class Setting:
    """One setting's ranking: its ``label`` (``steps=25``) and parameters, the Kendall tau-b of
    its ranking by mean against the default's (``NaN`` when undefined), its winners (the
    explainers tied for the best mean) and ``n`` the samples ranked."""

    label: str
    params: dict[str, Any]
    tau: float
    winners: list[str]
    n: int


@dataclass
class Protocol:
    """The protocol sensitivity of one (track, metric). ``min_tau``/``mean_tau``: over the settings,
    Kendall tau-b of each setting's explainer ranking against the default's (1 = the settings
    never change the order; lower is more sensitive). ``cherry_pick``: how many distinct
    explainers rank first under the default or some setting (1 = the winner never changes).
    ``reason`` says why the figures are missing (``no documented settings``)."""

    min_tau: float
    mean_tau: float
    cherry_pick: int | None
    default_winners: list[str]
    settings: list[Setting] = field(default_factory=list)
    reason: str | None = None


def _winners(values: np.ndarray, explainers: Sequence[str]) -> list[str]:
    means = values.mean(axis=1)
    best = np.max(means)
    return [explainers[i] for i in np.flatnonzero(means == best)]


def protocol_sensitivity(
    default_values: np.ndarray,
    by_setting: Mapping[str, np.ndarray],
    direction: str,
    *,
    explainers: Sequence[str] | None = None,
    params: Mapping[str, Mapping[str, Any]] | None = None,
) -> Protocol:
    """The protocol sensitivity of one metric on one track.

    ``default_values`` and each of ``by_setting`` (by setting label): ``values[e, s]``, the
    metric's raw per-sample values of explainer ``e`` (the same explainers, in the same order,
    in every matrix) over the samples each matrix holds (a setting's samples may differ from the
    default's). ``direction`` (``higher``/``lower``) signs them so that a larger mean is better.
    Explainers are ranked by mean; each setting's ranking is compared with the default's by
    Kendall tau-b; ``cherry_pick`` counts the distinct explainers tied for first under the
    default or any setting. ``explainers``: their names (default ``"0"``, ``"1"``, ...);
    ``params``: each setting's parameters, carried into the details."""
    base = signed(np.asarray(default_values, dtype=np.float64), direction)
    names = list(explainers) if explainers is not None else [str(i) for i in range(base.shape[0])]
    if base.ndim != 2 or base.shape[0] != len(names):
        raise ValueError(f"default_values must be explainers x samples ({len(names)} rows), got shape {base.shape}")
    if not by_setting:
        return Protocol(math.nan, math.nan, None, [], [], NO_SETTINGS)
    first = _winners(base, names) if base.shape[1] else []
    means = base.mean(axis=1) if base.shape[1] else np.full(len(names), np.nan)
    winners = set(first)
    settings: list[Setting] = []
    for label, matrix in by_setting.items():
        values = signed(np.asarray(matrix, dtype=np.float64), direction)
        if values.shape[0] != len(names):
            raise ValueError(f"setting {label!r}: {values.shape[0]} rows, expected {len(names)} explainers")
        if values.shape[1] == 0 or not base.shape[1]:
            settings.append(Setting(label, dict((params or {}).get(label, {})), math.nan, [], int(values.shape[1])))
            continue
        tau = float(kendall_tau_b(means, values.mean(axis=1)))
        top = _winners(values, names)
        winners.update(top)
        settings.append(Setting(label, dict((params or {}).get(label, {})), tau, top, int(values.shape[1])))
    taus = [s.tau for s in settings if not math.isnan(s.tau)]
    return Protocol(
        min_tau=min(taus) if taus else math.nan,
        mean_tau=float(np.mean(taus)) if taus else math.nan,
        cherry_pick=len(winners) if first else None,
        default_winners=first,
        settings=settings,
    )
