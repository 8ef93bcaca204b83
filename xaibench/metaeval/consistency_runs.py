"""Noise resilience and adversarial reactivity, run through the runner (DESIGN 9, MetaQuantus).

For each track it can perturb (a built-in model on a built-in dataset), :func:`meta_consistency`

1. loads the track as the run did and measures, on its samples, the fraction of predictions that
   K = 5 draws of multiplicative weight noise (``weight-noise``) and of additive input noise
   (``input-noise``) change at each strength of a ladder (:data:`MODEL_SIGMAS`,
   :data:`INPUT_SIGMAS`; the same K draws at every strength). The **minor** strength is the
   largest that changes fewer than 5 % on average, the **disruptive** one the smallest that
   changes more than 50 % (:func:`xaibench.metaeval.consistency.pick_level`);
2. runs the run's explainers and the track's ranking metrics on 2 kinds x 2 levels x K draws
   perturbed copies of the track, all in one run of the runner (workers, cache, devices, Ray as
   the run's options say) into ``<workdir>/meta``. Each copy explains the classes the
   unperturbed run explained (the dataset's ``targets``);
3. computes IAC, IEC and MC per (track, metric) from the unperturbed per-sample values (the
   submissions') and the perturbed ones (:mod:`xaibench.metaeval.consistency`).

Draw k of kind ``model``/``input`` on a track is seeded ``derive_seed(seed, "meta", track, kind, k)``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from xaibench.api import TrackSpec
from xaibench.datasets.builtin import DATASETS
from xaibench.datasets.perturbed import InputNoiseDataset, add_input_noise
from xaibench.metaeval.consistency import (
    DISRUPTIVE,
    DISRUPTIVE_MIN_CHANGE,
    DRAWS,
    MINOR,
    MetaConsistency,
    consistency,
    pick_level,
)
from xaibench.models.builtin import MODELS
from xaibench.models.perturbed import WeightNoiseModel, add_weight_noise
from xaibench.plugins.manager import Registry
from xaibench.seeds import derive_seed

MODEL_SIGMAS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
"""Weight-noise strengths tried (relative: ``w * (1 + sigma * N(0, 1))``)."""
INPUT_SIGMAS = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
"""Input-noise strengths tried (pixel units, images in [0, 1])."""
KINDS = ("model", "input")
FAMILIES = ("alignment", "faithfulness")
"""The families whose ranking metrics are assessed (those that make the overall rank)."""


@dataclass
class Unperturbed:
    """One (track, metric) as the run scored it: direction and per-sample values by explainer."""

    direction: str
    values: dict[str, dict[str, float | None]]


@dataclass
class Plan:
    """The perturbed copies of one track: strengths, per-draw changed predictions, track specs."""

    track: str
    sigmas: dict[tuple[str, str], float]  # (kind, level) -> strength
    changed: dict[tuple[str, str], np.ndarray]  # (kind, level) -> (K, N) bool, in sample order
    sample_ids: list[str]
    specs: dict[tuple[str, str, int], TrackSpec]  # (kind, level, draw) -> spec
    reason: str | None = None


def perturbable(spec: TrackSpec) -> str | None:
    """Why the track's model or dataset cannot be perturbed here, or ``None``."""
    if spec.model not in {m.name for m in MODELS}:
        return f"model {spec.model!r} is not a built-in model (weight noise reaches only those)"
    datasets = {d.name: d for d in DATASETS}
    if spec.dataset not in datasets:
        return f"dataset {spec.dataset!r} is not a built-in dataset (input noise reaches only those)"
    modalities = tuple(getattr(datasets[spec.dataset], "modalities", ("image",)))
    if modalities != ("image",):  # DESIGN 12: a text sample's "image" is its words
        return f"dataset {spec.dataset!r} is {', '.join(modalities)}: input noise adds to pixels (images only)"
    return None


def _predictions(module: Any, inputs: Any, batch: int = 64) -> np.ndarray:
    import torch

    with torch.inference_mode():
        parts = [module(inputs[i : i + batch]).argmax(1).cpu().numpy() for i in range(0, len(inputs), batch)]
    return np.concatenate(parts)


def plan_track(spec: TrackSpec, registry: Registry, *, seed: int, limit: int | None) -> Plan:
    """Load the track, pick the minor and disruptive strengths of both kinds and make the specs."""
    from xaibench.runner import load_track

    reason = perturbable(spec)
    if reason is not None:
        return Plan(spec.name, {}, {}, [], {}, reason)
    track = load_track(spec, registry, limit=limit)
    model, inputs = track.model, track.inputs
    assert model is not None and inputs is not None  # a built-in model
    clean = _predictions(model.module, inputs)
    ids = [s.id for s in track.samples]
    targets = {s.id: int(t) for s, t in zip(track.samples, track.targets, strict=True)}
    draws = {kind: [derive_seed(seed, "meta", spec.name, kind, k) for k in range(DRAWS)] for kind in KINDS}

    def changed(kind: str, sigma: float) -> np.ndarray:
        rows = []
        for draw in draws[kind]:
            if kind == "model":
                preds = _predictions(add_weight_noise(model.module, sigma, draw), inputs)
            else:
                noisy = [add_input_noise(s.image, sigma, derive_seed(draw, s.id)) for s in track.samples]
                preds = _predictions(model.module, model.preprocess(noisy))
            rows.append(preds != clean)
        return np.array(rows, dtype=bool)

    sigmas: dict[tuple[str, str], float] = {}
    changes: dict[tuple[str, str], np.ndarray] = {}
    missing: list[str] = []
    for kind, ladder in (("model", MODEL_SIGMAS), ("input", INPUT_SIGMAS)):
        tried: dict[float, np.ndarray] = {}
        for sigma in ladder:  # ascending: stop at the first disruptive strength
            tried[sigma] = changed(kind, sigma)
            if tried[sigma].mean() > DISRUPTIVE_MIN_CHANGE:
                break
        fractions = [float(c.mean()) for c in tried.values()]
        for level in (MINOR, DISRUPTIVE):
            chosen = pick_level(list(tried), fractions, level)
            if chosen is None:
                missing.append(f"no {level} {kind} noise among sigma {', '.join(f'{s:g}' for s in ladder)}")
            else:
                sigmas[(kind, level)], changes[(kind, level)] = chosen, tried[chosen]
    specs: dict[tuple[str, str, int], TrackSpec] = {}
    for (kind, level), sigma in sigmas.items():
        for k, draw in enumerate(draws[kind]):
            dataset_params: dict[str, Any] = {
                "base": spec.dataset,
                "base_params": dict(spec.dataset_params),
                "sigma": sigma if kind == "input" else 0.0,
                "draw": draw if kind == "input" else 0,
                "targets": targets,
            }
            model_name, model_params = spec.model, dict(spec.model_params)
            if kind == "model":
                model_name = WeightNoiseModel.name
                model_params = {"base": spec.model, "base_params": model_params, "sigma": sigma, "draw": draw}
            specs[(kind, level, k)] = replace(
                spec,
                name=f"{spec.name}--mc-{kind}-{level}-{k}",
                dataset=InputNoiseDataset.name,
                dataset_params=dataset_params,
                model=model_name,
                model_params=model_params,
                target="label",
                limit=len(ids),
            )
    return Plan(spec.name, sigmas, changes, ids, specs, "; ".join(missing) or None)


def _perturbed_values(
    frame: Any, plan: Plan, metric: str, explainers: Mapping[str, tuple[str, Mapping[str, Any]]]
) -> dict[tuple[str, str, int], dict[str, dict[str, float | None]]]:
    """Per (kind, level, draw), the metric's per-sample values by explainer key, from the records."""
    out: dict[tuple[str, str, int], dict[str, dict[str, float | None]]] = {}
    for key, spec in plan.specs.items():
        rows = frame[(frame["track"] == spec.name) & (frame["metric"] == metric)]
        by: dict[str, dict[str, float | None]] = {}
        for explainer, (name, params) in explainers.items():
            mine = rows[rows["explainer"] == name]
            wanted = json.dumps(dict(params), sort_keys=True, default=str)
            same = mine[[json.dumps(p, sort_keys=True, default=str) == wanted for p in mine["explainer_params"]]]
            mine = same if len(same) else mine
            pairs = zip(mine["sample_id"], mine["value"], strict=True)
            by[explainer] = {str(s): (None if v != v else float(v)) for s, v in pairs}
        out[key] = by
    return out


def _value(table: Mapping[str, Mapping[str, float | None]], explainer: str, sample: str) -> float:
    value = table.get(explainer, {}).get(sample)
    return math.nan if value is None else float(value)


def assess_consistency(
    plan: Plan,
    unperturbed: Unperturbed,
    perturbed: Mapping[tuple[str, str, int], Mapping[str, Mapping[str, float | None]]],
) -> MetaConsistency:
    """IAC, IEC and MC of one (track, metric) on the samples every explainer has a value for,
    unperturbed and under every draw."""
    explainers = sorted(unperturbed.values)
    result = MetaConsistency(explainers=explainers)
    if plan.reason and not plan.sigmas:
        result.reason = plan.reason
        return result
    if len(explainers) < 2:
        result.reason = "fewer than 2 explainers to rank"
        return result

    def scored(sample: str) -> bool:  # by every explainer, unperturbed (a draw's n/a leaves it out of that draw)
        return all(unperturbed.values.get(x, {}).get(sample) is not None for x in explainers)

    keep = [i for i, s in enumerate(plan.sample_ids) if scored(s)]
    ids = [plan.sample_ids[i] for i in keep]
    result.sample_ids = ids
    if len(ids) < 2:
        result.reason = "fewer than 2 samples with a value for every explainer"
        return result
    q_star = np.array([[unperturbed.values[x][s] for s in ids] for x in explainers], dtype=np.float64)
    for kind in KINDS:
        if (kind, MINOR) not in plan.sigmas or (kind, DISRUPTIVE) not in plan.sigmas:
            continue
        levels = {}
        for level in (MINOR, DISRUPTIVE):
            tables = [perturbed.get((kind, level, k), {}) for k in range(DRAWS)]
            q_hats = np.array([[[_value(t, x, s) for s in ids] for x in explainers] for t in tables], dtype=np.float64)
            levels[level] = (plan.sigmas[(kind, level)], q_hats, plan.changed[(kind, level)][:, keep])
        figures = consistency(kind, unperturbed.direction, q_star, levels[MINOR], levels[DISRUPTIVE])
        figures.changed_minor = float(plan.changed[(kind, MINOR)].mean())  # over every sample, as calibrated
        figures.changed_disruptive = float(plan.changed[(kind, DISRUPTIVE)].mean())
        result.kinds[kind] = figures
    if plan.reason:
        result.reason = plan.reason
    return result


def meta_consistency(
    registry: Registry,
    specs: Sequence[TrackSpec],
    unperturbed: Mapping[tuple[str, str], Unperturbed],
    explainers: Mapping[str, tuple[str, Mapping[str, Any]]],
    *,
    seed: int,
    limit: int | None,
    workdir: Path,
    run_options: Mapping[str, Any],
) -> dict[tuple[str, str], MetaConsistency]:
    """The figures of every (track, metric) of ``unperturbed`` on ``specs`` (see the module doc).
    ``explainers``: explainer key -> (registry name, parameters), the run's non-reference ones;
    ``run_options``: :func:`xaibench.runner.config.make_run_config`'s options (batch size,
    threads, executor, workers, device, timeout, progress, cache)."""
    from xaibench.results import records
    from xaibench.runner import Runner, RunOptions, make_run_config

    plans = {s.name: plan_track(s, registry, seed=seed, limit=limit) for s in specs}
    to_run: list[TrackSpec] = []
    for spec in specs:
        metrics = sorted(m for (t, m) in unperturbed if t == spec.name)
        to_run += [replace(p, metrics=metrics) for p in plans[spec.name].specs.values()]
    frame = None
    if to_run:
        names = sorted({name for name, _ in explainers.values()})
        params = {name: dict(p) for name, p in explainers.values() if p}
        config = make_run_config(
            names,
            suite="meta-consistency",
            suite_tracks=to_run,
            explainer_params=params,
            seed=seed,
            workdir=workdir,
            options=RunOptions(**run_options),
            examples=0,
        )
        with Runner(config, registry) as runner:
            runner.run()
        frame = records(workdir)
    out: dict[tuple[str, str], MetaConsistency] = {}
    for (track, metric), base in sorted(unperturbed.items()):
        plan = plans.get(track)
        if plan is None:
            continue
        values = _perturbed_values(frame, plan, metric, explainers) if frame is not None and plan.specs else {}
        out[(track, metric)] = assess_consistency(plan, base, values)
    return out
