"""ROAD (Rong et al. 2022), DESIGN 3: remove-and-debias scores from one probability curve per
(sample, pixel order, perturbation).

One metric kind, :class:`RoadMetric`, and a table of its variants: each measure of
:data:`MEASURES` (sufficiency perturbs the least salient pixels first, necessity the most salient
first, faithfulness is their harmonic mean) under each perturbation of :data:`PERTURBATION_PHRASES`
(noisy linear imputation, the default ``road``; ``black``, ``uniform`` and ``gaussian``; see
:mod:`~xaibench.metrics.faithfulness.perturbation`). :data:`ROAD_METRICS` lists the 12 variants,
each a subclass made by :func:`~xaibench.metrics.variants.variant`. Every curve is memoised in the
batch's memo, so ``road_faithfulness`` reuses the curves of ``road_sufficiency`` and
``road_necessity`` computed on the same batch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import torch

from xaibench.api import MetricCost, MetricOutput
from xaibench.blas_threads import one_blas_thread
from xaibench.metrics.faithfulness import formulas as fm
from xaibench.metrics.faithfulness.base import FaithfulnessMetric, unscored
from xaibench.metrics.faithfulness.context import OWNER, BatchedScorer, FaithfulnessBatch
from xaibench.metrics.faithfulness.perturbation import (
    CPU_IMPUTATION_THREADS,
    PERTURBATIONS,
    Imputation,
    Order,
    Perturbation,
    device_ranks,
    imputation_backend,
    noise_field,
    perturb,
    pixel_count,
)
from xaibench.metrics.variants import former_names, variant
from xaibench.params import Param
from xaibench.seeds import sample_rng

Measure = Literal["sufficiency", "necessity", "faithfulness"]
"""What a ROAD metric reports: sufficiency, necessity, or their harmonic mean (faithfulness)."""


def _curve_key(
    ctx: FaithfulnessBatch, b: int, order: Order, perturbation: Perturbation, params: Mapping[str, Any]
) -> tuple:
    return (
        OWNER,
        "road_curve",
        ctx.ids[b],
        ctx.digests[b],
        int(ctx.targets[b]),
        order,
        perturbation,
        float(params["road_noise"]) if perturbation == "road" else None,
        tuple(fm.road_percents(params["thresholds"]).tolist()),
        ctx.seed,
    )


def road_curves(
    ctx: FaithfulnessBatch,
    perturbation: Perturbation,
    orders: Iterable[Order],
    params: Mapping[str, Any],
    *,
    imputation: Imputation = "auto",
) -> dict[tuple[int, Order], np.ndarray]:
    """p(x'_i) for i in :func:`~xaibench.metrics.faithfulness.formulas.road_percents`, per
    (valid sample, order).

    Each curve is computed once per batch and memoised in ``ctx.memo``; the perturbed images of
    all missing curves are built batch by batch on the model's device, in worker threads that
    run ahead of the forward passes (:class:`~xaibench.metrics.faithfulness.context.BatchedScorer`).
    ``imputation`` picks the solver of the ``road`` perturbation
    (:func:`~xaibench.metrics.faithfulness.perturbation.imputation_backend`).
    """
    percents = fm.road_percents(params["thresholds"])
    counts = pixel_count(percents, 100, ctx.pixels)
    todo = np.unique(counts[counts > 0])
    p0 = ctx.clean_probabilities()
    backend = imputation_backend(ctx.device, imputation)
    # The exact solvers release the GIL: on the CPU two threads impute while the forwards run
    # (measured in bench/bench_faithfulness_overhead.py); the other perturbations cost little to build.
    builders = CPU_IMPUTATION_THREADS if perturbation == "road" and backend == "exact" else 1
    scorer = BatchedScorer(ctx, builders=builders)
    pending: dict[tuple[int, Order], tuple] = {}
    out: dict[tuple[int, Order], np.ndarray] = {}
    fields: dict[int, torch.Tensor | None] = {}
    shape = ctx.saliency.shape[1:]
    noise = float(params["road_noise"])
    orders = tuple(orders)
    valid = ctx.scorable
    # pixel ranks sorted on the device, the steps' pixel counts copied once: masks are made there
    ranks = {
        order: dict(zip(valid, device_ranks(ctx.saliency[valid], order, ctx.device), strict=True)) for order in orders
    }
    limits = torch.from_numpy(todo).to(ctx.device)
    for b in range(len(ctx.ids)):
        if ctx.valid[b]:
            continue
        for order in orders:
            key = _curve_key(ctx, b, order, perturbation, params)
            if key in ctx.memo:
                out[(b, order)] = ctx.memo.lookup(key)
                continue
            if b not in fields:
                rng = sample_rng(ctx.seed, ctx.ids[b], f"road/{perturbation}")
                field = noise_field(perturbation, tuple(ctx.inputs.shape[1:]), rng, ctx.mean, ctx.std)
                fields[b] = None if field is None else field.to(ctx.device)
            rank = ranks[order][b]

            def make(start: int, stop: int, b: int = b, rank: torch.Tensor = rank) -> torch.Tensor:
                masks = (rank[None, :] < limits[start:stop, None]).view(stop - start, *shape)  # first k pixels
                image = ctx.device_inputs[b]
                field = fields[b]
                return perturb(
                    image, masks, perturbation, field, mean=ctx.mean, std=ctx.std, road_noise=noise, imputation=backend
                )

            scorer.add_lazy((b, order), len(todo), make, int(ctx.targets[b]))
            pending[(b, order)] = key
    # The CPU solvers' LAPACK and BLAS calls are small: threads of their own would only spin
    # against the builders and the forwards (xaibench.blas_threads).
    with one_blas_thread() if backend == "exact" else contextlib.nullcontext():
        scored = scorer.finish()
    for (b, order), key in pending.items():
        lookup = {0: float(p0[b]), **{int(c): float(p) for c, p in zip(todo, scored[(b, order)], strict=True)}}
        curve = np.array([lookup[int(c)] for c in counts])
        ctx.memo.put(key, curve)
        out[(b, order)] = curve
    return out


class RoadMetric(FaithfulnessMetric):
    """The ROAD metric kind. ``measure`` is what it reports:

    - ``sufficiency``: max over thresholds t of exp(-mean |p(x) - p(x'_i)|), i < t, perturbing the
      i % least salient pixels (order ``ascending``);
    - ``necessity``: max over thresholds t of 1 - exp(-mean |p(x) - p(x'_i)|), i < t, perturbing
      the i % most salient pixels (order ``descending``);
    - ``faithfulness``: the harmonic mean of the two.

    ``orders`` are the pixel orders whose curves the measure reads and ``perturbation`` what
    replaces the removed pixels. Score in [0, 1], higher is better.

    Parameters: ``thresholds``, integer percents t in (1, 100] (stored sorted and unique), and
    ``road_noise``, the noise sigma (>= 0) of the ``road`` imputation.
    """

    direction = "higher"
    unit = "score in [0, 1]"
    value_range = (0.0, 1.0)
    measure: ClassVar[Measure] = "faithfulness"
    perturbation: ClassVar[Perturbation] = "road"
    orders: ClassVar[tuple[Order, ...]] = ("ascending", "descending")
    default_params: ClassVar[Mapping[str, Any]] = {"thresholds": fm.DEFAULT_THRESHOLDS, "road_noise": 0.01}
    param_specs: ClassVar[Mapping[str, Param]] = {"road_noise": Param(float, low=0.0)}
    imputation: Imputation = "auto"
    """Solver of the ``road`` imputation (not a parameter: every solver gives the same images to
    1e-5, so records do not depend on it)."""

    def validate_params(self, params: dict[str, Any]) -> dict[str, Any]:
        given = params["thresholds"]
        try:
            thresholds = tuple(given)
        except TypeError:
            thresholds = ()
        if not thresholds or any(not isinstance(t, int) or isinstance(t, bool) or not 1 < t <= 100 for t in thresholds):
            raise ValueError(
                f"metric {self.name!r}: parameter 'thresholds' must be a non-empty list of integers in (1, 100], "
                f"got {given!r}"
            )
        params["thresholds"] = tuple(sorted(set(thresholds)))
        return params

    def combine(self, scores: dict[str, float]) -> float:
        """The metric's value from the per-order scores (keys ``sufficiency``, ``necessity``)."""
        if self.measure == "faithfulness":
            return float(fm.harmonic_mean(scores["sufficiency"], scores["necessity"]))
        return scores[self.measure]

    def score_batch(self, ctx: FaithfulnessBatch) -> MetricOutput:
        curves_by = road_curves(ctx, self.perturbation, self.orders, self.params, imputation=self.imputation)
        thresholds = self.params["thresholds"]
        percents = fm.road_percents(thresholds)
        p0 = ctx.clean_probabilities()
        values, reasons, curves = unscored(len(ctx.ids))
        for b in range(len(ctx.ids)):
            if ctx.valid[b]:
                reasons[b] = ctx.valid[b]
                continue
            parts: dict[str, Any] = {"percent": percents.tolist(), "threshold": list(thresholds)}
            scores: dict[str, float] = {}
            for order in self.orders:
                probs = curves_by[(b, order)]
                means = fm.road_prefix_means(percents, np.abs(p0[b] - probs), thresholds)
                which = "sufficiency" if order == "ascending" else "necessity"
                per_t = np.exp(-means) if which == "sufficiency" else 1.0 - np.exp(-means)
                scores[which] = float(per_t.max())
                parts[which] = {
                    "order": order,
                    "probability": probs.tolist(),
                    "mean_d": means.tolist(),
                    "value_at_threshold": per_t.tolist(),
                    "value": scores[which],
                }
            values[b] = self.combine(scores)
            parts["p_clean"] = float(p0[b])
            curves[b] = parts
        return MetricOutput(values=values, reasons=reasons, curves=curves)


# ----------------------------------------------------------------------------- the variants


@dataclass(frozen=True)
class RoadMeasure:
    """One ROAD measure: the pixel orders whose curves it reads and the phrase that describes it."""

    orders: tuple[Order, ...]
    phrase: str


MEASURES: Mapping[Measure, RoadMeasure] = {
    "sufficiency": RoadMeasure(
        ("ascending",),
        "ROAD sufficiency: max over thresholds t of exp(-mean |p(x) - p(x'_i)|), i < t, perturbing the i % least "
        "salient pixels",
    ),
    "necessity": RoadMeasure(
        ("descending",),
        "ROAD necessity: max over thresholds t of 1 - exp(-mean |p(x) - p(x'_i)|), i < t, perturbing the i % most "
        "salient pixels",
    ),
    "faithfulness": RoadMeasure(
        ("ascending", "descending"), "ROAD faithfulness: harmonic mean of ROAD sufficiency and necessity"
    ),
}
"""Every ROAD measure, in registration order within a perturbation."""

PERTURBATION_PHRASES: Mapping[Perturbation, str] = {
    "road": "noisy linear imputation (sigma 0.01) in normalised space",
    "black": "black pixels (0 in pixel space)",
    "uniform": "U(0, 1) noise in pixel space",
    "gaussian": "N(0, 1) noise in normalised space",
}
"""The phrase that describes each perturbation (every one of
:data:`~xaibench.metrics.faithfulness.perturbation.PERTURBATIONS`)."""

RANKED_ROAD = "road_faithfulness"
"""The one ROAD metric in the faithfulness rank: faithfulness with noisy linear imputation."""


def road_cost(perturbation: Perturbation, orders: tuple[Order, ...]) -> tuple[MetricCost, ...]:
    """What one sample costs a ROAD metric: per pixel order it reads, one curve of
    ``max(thresholds) // 2`` forward passes (i = 1, 3, ..., below the largest threshold), shared
    with the ROAD metrics of the same perturbation that read it (``road_faithfulness`` reads the
    curves of ``road_sufficiency`` and ``road_necessity``); the clean image is shared with the
    batch's other faithfulness metrics."""
    return tuple(
        MetricCost(forward_passes="max(thresholds) // 2", shared=f"road-{perturbation}-{order}") for order in orders
    )


def road_variant(measure: Measure, perturbation: Perturbation) -> type[RoadMetric]:
    """The metric ``road_<measure>`` (noisy linear imputation) or ``road_<measure>_<perturbation>``."""
    metric_id = f"road_{measure}" if perturbation == "road" else f"road_{measure}_{perturbation}"
    return variant(
        RoadMetric,
        metric_id,
        measure=measure,
        perturbation=perturbation,
        orders=MEASURES[measure].orders,
        cost=road_cost(perturbation, MEASURES[measure].orders),
        ranking=metric_id == RANKED_ROAD,
        description=(
            f"{MEASURES[measure].phrase}; perturbation: {PERTURBATION_PHRASES[perturbation]}. "
            "Score in [0, 1], higher is better."
        ),
    )


ROAD_METRICS: tuple[type[RoadMetric], ...] = tuple(
    road_variant(measure, perturbation) for perturbation in PERTURBATIONS for measure in MEASURES
)
"""Every ROAD metric, one class per id, in registration order (by perturbation, then measure)."""

__getattr__ = former_names(__name__, ROAD_METRICS)
