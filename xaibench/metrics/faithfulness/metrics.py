"""The faithfulness family as xaibench metrics (DESIGN 3 and 4; ids of DESIGN 8).

Forward-pass economy: every perturbed image is built once, scored once, in
batches of the ForwardCounter's batch size across the samples of a batch.
Work that several metrics need is memoised in ``batch.shared`` (one dict per
batch of samples and explainer): the clean probabilities p(x), the image with
every pixel at the baseline (the same for all samples), and each ROAD curve per
(sample, order, perturbation), so ``road_faithfulness`` reuses the curves of
``road_sufficiency`` and ``road_necessity``. ``MetricOutput.forward_passes`` is
the number of images this call forwarded (work found in ``batch.shared`` is
free); ``docs/metrics.md`` lists the counts of each metric run alone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from xaibench.api import ForwardCounter, Metric, MetricInput, MetricOutput
from xaibench.imaging import resize_bilinear
from xaibench.metrics.faithfulness import formulas as fm
from xaibench.metrics.faithfulness.perturbation import (
    PERTURBATIONS,
    Order,
    Perturbation,
    blurred,
    first_k_masks,
    noise_field,
    perturb,
    pixel_count,
    replace,
    saliency_order,
)
from xaibench.metrics.normalise import normalise_saliency
from xaibench.seeds import sample_rng

_NS = "xaibench.faithfulness"


# ----------------------------------------------------------------------------- batch context


@dataclass
class _Context:
    """What every faithfulness metric reads from a batch, checked once."""

    inputs: torch.Tensor  # (B, C, S, S) normalised, CPU float32
    device: Any
    saliency: np.ndarray  # (B, S, S) float64 at input size
    valid: list[str | None]  # per-sample reason the map cannot be scored, or None
    targets: np.ndarray
    ids: list[str]
    digests: list[str]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    forward: ForwardCounter
    seed: int


def _resize_maps(maps: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``(B, h, w)`` maps at the model input size, float64 (computed in float32)."""
    if maps.shape[-2:] == size:
        return maps
    return resize_bilinear(maps.astype(np.float32), size).astype(np.float64)


def _context(batch: MetricInput) -> _Context | str:
    """The batch context (memoised in ``batch.shared``) or the reason the metric cannot apply."""
    if batch.saliency is None:
        return "needs a saliency map (concept explanations are not scored by faithfulness metrics)"
    if batch.model is None:
        return "needs model access"
    key = (_NS, "context", id(batch.saliency))
    ctx = batch.shared.get(key)
    if ctx is not None:
        return ctx
    model = batch.model
    inputs = batch.inputs
    if inputs is None:
        if model is None:
            return "needs the model inputs"
        inputs = model.preprocess([s.image for s in batch.samples])
    inputs = torch.as_tensor(inputs)
    device = inputs.device
    inputs = inputs.detach().to("cpu", torch.float32)
    saliency = np.asarray(batch.saliency, dtype=np.float64)
    if saliency.ndim != 3 or saliency.shape[0] != inputs.shape[0]:
        raise ValueError(
            f"faithfulness metrics: saliency must be (B, H, W) with B = {inputs.shape[0]}, got {saliency.shape}"
        )
    saliency = _resize_maps(saliency, tuple(inputs.shape[-2:]))
    valid = [None if np.isfinite(m).all() else "saliency map contains NaN or infinite values" for m in saliency]
    forward = batch.forward
    if forward is None and model is not None:
        forward = batch.shared.setdefault((_NS, "forward"), ForwardCounter(model.module))
    mean = tuple(model.mean) if model is not None else (0.0, 0.0, 0.0)
    std = tuple(model.std) if model is not None else (1.0, 1.0, 1.0)
    ctx = _Context(
        inputs=inputs,
        device=device,
        saliency=saliency,
        valid=valid,
        targets=np.asarray(batch.targets, dtype=np.int64).reshape(-1),
        ids=[s.id for s in batch.samples],
        digests=[hashlib.sha1(np.ascontiguousarray(m).tobytes()).hexdigest()[:16] for m in saliency],
        mean=mean,
        std=std,
        forward=forward,  # type: ignore[arg-type]
        seed=int(batch.seed),
    )
    batch.shared[key] = ctx
    return ctx


# ----------------------------------------------------------------------------- batched scoring


class _Scorer:
    """Scores images of many samples in full batches of the counter's batch size.

    ``add`` queues a stack of images with their target class under a key;
    ``finish`` forwards what is left and returns ``{key: target probabilities}``.
    """

    def __init__(self, ctx: _Context) -> None:
        self.ctx = ctx
        self.batch_size = max(1, int(ctx.forward.batch_size))
        self.images: list[torch.Tensor] = []
        self.targets: list[np.ndarray] = []
        self.pending = 0
        self.scored: list[np.ndarray] = []
        self.spans: dict[Any, tuple[int, int]] = {}
        self.total = 0

    def add(self, key: Any, images: torch.Tensor, target: int) -> None:
        k = int(images.shape[0])
        self.spans[key] = (self.total, self.total + k)
        self.total += k
        if k == 0:
            return
        self.images.append(images)
        self.targets.append(np.full(k, target, dtype=np.int64))
        self.pending += k
        self._drain(final=False)

    def _drain(self, final: bool) -> None:
        """Forward exactly ``batch_size`` images at a time (the rest too when ``final``),
        copying only the images of the chunk being forwarded."""
        while self.pending >= self.batch_size or (final and self.pending):
            need = min(self.batch_size, self.pending)
            parts, tparts = [], []
            while need:
                head, thead = self.images[0], self.targets[0]
                k = min(need, int(head.shape[0]))
                parts.append(head[:k])
                tparts.append(thead[:k])
                if k == head.shape[0]:
                    self.images.pop(0)
                    self.targets.pop(0)
                else:
                    self.images[0], self.targets[0] = head[k:], thead[k:]
                need -= k
            chunk = parts[0] if len(parts) == 1 else torch.cat(parts)
            targets = torch.from_numpy(np.concatenate(tparts))
            probs = self.ctx.forward(chunk.to(self.ctx.device))
            self.scored.append(probs[torch.arange(len(targets)), targets].double().cpu().numpy())
            self.pending -= len(targets)

    def finish(self) -> dict[Any, np.ndarray]:
        self._drain(final=True)
        flat = np.concatenate(self.scored) if self.scored else np.zeros(0)
        return {key: flat[a:b] for key, (a, b) in self.spans.items()}


def _prefetched(fn: Callable[[Any], Any], jobs: list[Any], *, threaded: bool) -> Iterator[tuple[Any, Any]]:
    """Yield ``(job, fn(job))`` in order; with ``threaded``, one worker thread computes the
    next job while the caller consumes the current one (at most two results in memory)."""
    if not threaded or len(jobs) < 2:
        for job in jobs:
            yield job, fn(job)
        return
    with ThreadPoolExecutor(max_workers=1) as pool:
        ahead = pool.submit(fn, jobs[0])
        for i, job in enumerate(jobs):
            result = ahead.result()
            if i + 1 < len(jobs):
                ahead = pool.submit(fn, jobs[i + 1])
            yield job, result


def _clean_probabilities(ctx: _Context, shared: dict[Any, Any]) -> np.ndarray:
    """p(x) of the target class for every sample, memoised per (sample id, target)."""
    keys = [(_NS, "p_clean", sid, int(t)) for sid, t in zip(ctx.ids, ctx.targets, strict=True)]
    missing = [i for i, k in enumerate(keys) if k not in shared]
    if missing:
        probs = ctx.forward(ctx.inputs[missing].to(ctx.device))
        for row, i in enumerate(missing):
            shared[keys[i]] = float(probs[row, int(ctx.targets[i])])
    return np.array([shared[k] for k in keys])


def _baseline_probabilities(ctx: _Context, shared: dict[Any, Any], name: str, fill: torch.Tensor) -> np.ndarray:
    """Probabilities of the one image whose every pixel is ``fill`` (shared by all samples)."""
    key = (_NS, "p_full", name)
    if key not in shared:
        image = fill.expand(ctx.inputs.shape[1:]).to(torch.float32)[None]
        shared[key] = ctx.forward(image.to(ctx.device))[0].double().cpu().numpy()
    return shared[key]


def _start(ctx: _Context) -> int:
    return int(ctx.forward.images)


# ----------------------------------------------------------------------------- base class


class _FaithfulnessMetric(Metric):
    family = "faithfulness"
    needs = ("model",)
    licence = "Apache-2.0"
    version = "1.0.0"

    def score(self, batch: MetricInput) -> MetricOutput:
        ctx = _context(batch)
        if isinstance(ctx, str):
            return MetricOutput.not_applicable(len(batch.samples), ctx)
        before = _start(ctx)
        out = self._score(ctx, batch.shared)
        out.forward_passes = _start(ctx) - before
        return out

    def _score(self, ctx: _Context, shared: dict[Any, Any]) -> MetricOutput:
        raise NotImplementedError


def _empty(n: int) -> tuple[np.ndarray, list[str | None], list[dict[str, Any] | None]]:
    return np.full(n, np.nan), [None] * n, [None] * n


def _check_fraction_curve(name: str, steps: Any) -> int:
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"metric {name!r}: steps must be a positive integer, got {steps!r}")
    return steps


# ----------------------------------------------------------------------------- deletion / insertion


class _CurveMetric(_FaithfulnessMetric):
    default_params: ClassVar[dict[str, Any]] = {"steps": 50}

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        _check_fraction_curve(self.name, self.params["steps"])

    def _counts(self, n: int) -> np.ndarray:
        steps = self.params["steps"]
        return pixel_count(np.arange(steps + 1), steps, n)

    def _curves(
        self,
        ctx: _Context,
        shared: dict[Any, Any],
        build: Callable[[int, np.ndarray], torch.Tensor],
        known: Callable[[int, int], float | None],
    ) -> MetricOutput:
        """Score ``build(b, masks)`` for every distinct count not resolved by ``known(b, count)``."""
        n_pix = ctx.saliency.shape[1] * ctx.saliency.shape[2]
        counts = self._counts(n_pix)
        fractions = counts / n_pix
        values, reasons, curves = _empty(len(ctx.ids))
        scorer = _Scorer(ctx)
        plans: dict[int, tuple[np.ndarray, dict[int, float]]] = {}
        for b in range(len(ctx.ids)):
            if ctx.valid[b]:
                reasons[b] = ctx.valid[b]
                continue
            distinct = np.unique(counts)
            fixed = {int(c): v for c in distinct if (v := known(b, int(c))) is not None}
            todo = np.array([c for c in distinct if int(c) not in fixed], dtype=np.int64)
            order = saliency_order(ctx.saliency[b : b + 1], "descending")[0]
            masks = first_k_masks(order, todo, ctx.saliency.shape[1:])
            scorer.add(b, build(b, masks), int(ctx.targets[b]))
            plans[b] = (todo, fixed)
        scored = scorer.finish()
        for b, (todo, fixed) in plans.items():
            lookup = {**fixed, **{int(c): float(p) for c, p in zip(todo, scored[b], strict=True)}}
            probs = np.array([lookup[int(c)] for c in counts])
            values[b] = fm.trapezoid_auc(fractions, probs)
            curves[b] = {"fraction": fractions.tolist(), "probability": probs.tolist(), "steps": len(counts) - 1}
        return MetricOutput(values=values, reasons=reasons, curves=curves)


class Deletion(_CurveMetric):
    """Deletion AUC (Petsiuk et al. 2018): remove pixels most-salient-first in
    ``steps`` equal steps, replacing them with 0 in normalised space (the dataset
    mean); trapezoid AUC of p(target) over the removed fraction. Lower is better."""

    name = "deletion"
    direction = "lower"
    ranking = True
    unit = "AUC of probability over removed fraction, in [0, 1]"
    description = (
        "Deletion AUC: remove pixels most-salient-first in S steps (baseline: the dataset mean); "
        "area under the target-class probability over the removed fraction, in [0, 1]. Lower is better."
    )

    def _score(self, ctx: _Context, shared: dict[Any, Any]) -> MetricOutput:
        n_pix = ctx.saliency.shape[1] * ctx.saliency.shape[2]
        p0 = _clean_probabilities(ctx, shared)
        zero = torch.zeros(ctx.inputs.shape[1], 1, 1)

        def known(b: int, count: int) -> float | None:
            if count == 0:
                return float(p0[b])
            if count == n_pix:
                return float(_baseline_probabilities(ctx, shared, "zeros", zero)[int(ctx.targets[b])])
            return None

        return self._curves(ctx, shared, lambda b, masks: replace(ctx.inputs[b], masks, zero), known)


class Insertion(_CurveMetric):
    """Insertion AUC: start from a Gaussian-blurred copy (``blur_sigma`` pixels at
    model input size) and insert original pixels most-salient-first; trapezoid AUC
    of p(target) over the inserted fraction. Higher is better."""

    name = "insertion"
    direction = "higher"
    ranking = True
    unit = "AUC of probability over inserted fraction, in [0, 1]"
    default_params: ClassVar[dict[str, Any]] = {"steps": 50, "blur_sigma": 5.0}
    description = (
        "Insertion AUC: insert original pixels most-salient-first into a blurred copy (Gaussian, sigma "
        "recorded) in S steps; area under the target-class probability over the inserted fraction, "
        "in [0, 1]. Higher is better."
    )

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        sigma = self.params["blur_sigma"]
        if not isinstance(sigma, int | float) or not sigma > 0:
            raise ValueError(f"metric 'insertion': blur_sigma must be a positive number, got {sigma!r}")

    def _score(self, ctx: _Context, shared: dict[Any, Any]) -> MetricOutput:
        n_pix = ctx.saliency.shape[1] * ctx.saliency.shape[2]
        p0 = _clean_probabilities(ctx, shared)
        sigma = float(self.params["blur_sigma"])

        def build(b: int, masks: np.ndarray) -> torch.Tensor:
            # The first k pixels (most salient first) come from x, the others from the blurred copy.
            return replace(blurred(ctx.inputs[b], sigma), masks, ctx.inputs[b])

        return self._curves(ctx, shared, build, lambda b, c: float(p0[b]) if c == n_pix else None)


# ----------------------------------------------------------------------------- ROAD


def _road_curve_key(ctx: _Context, b: int, order: Order, perturbation: Perturbation, params: dict[str, Any]) -> tuple:
    return (
        _NS,
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
    ctx: _Context,
    shared: dict[Any, Any],
    perturbation: Perturbation,
    orders: Iterable[Order],
    params: dict[str, Any],
) -> dict[tuple[int, Order], np.ndarray]:
    """p(x'_i) for i in :func:`faithfulness.road_percents`, per (valid sample, order).

    Each curve is computed once per batch and memoised in ``shared``; the
    perturbed images of all missing curves are scored together in batches.
    """
    n_pix = ctx.saliency.shape[1] * ctx.saliency.shape[2]
    percents = fm.road_percents(params["thresholds"])
    counts = pixel_count(percents, 100, n_pix)
    todo = np.unique(counts[counts > 0])
    p0 = _clean_probabilities(ctx, shared)
    scorer = _Scorer(ctx)
    pending: dict[tuple[int, Order], tuple] = {}
    out: dict[tuple[int, Order], np.ndarray] = {}
    fields: dict[int, torch.Tensor | None] = {}
    for b in range(len(ctx.ids)):
        if ctx.valid[b]:
            continue
        for order in orders:
            key = _road_curve_key(ctx, b, order, perturbation, params)
            if key in shared:
                out[(b, order)] = shared[key]
                continue
            if b not in fields:
                rng = sample_rng(ctx.seed, ctx.ids[b], f"road/{perturbation}")
                fields[b] = noise_field(perturbation, tuple(ctx.inputs.shape[1:]), rng, ctx.mean, ctx.std)
            pending[(b, order)] = key

    def build(job: tuple[int, Order]) -> torch.Tensor:
        b, order = job
        ranking = saliency_order(ctx.saliency[b : b + 1], order)[0]
        masks = first_k_masks(ranking, todo, ctx.saliency.shape[1:])
        noise = float(params["road_noise"])
        return perturb(ctx.inputs[b], masks, perturbation, fields[b], mean=ctx.mean, std=ctx.std, road_noise=noise)

    # The imputation (SciPy's SuperLU releases the GIL) of the next curve runs while this one is scored.
    for (b, order), images in _prefetched(build, list(pending), threaded=perturbation == "road"):
        scorer.add((b, order), images, int(ctx.targets[b]))
    scored = scorer.finish()
    for (b, order), key in pending.items():
        lookup = {0: float(p0[b]), **{int(c): float(p) for c, p in zip(todo, scored[(b, order)], strict=True)}}
        curve = np.array([lookup[int(c)] for c in counts])
        shared[key] = curve
        out[(b, order)] = curve
    return out


class _RoadMetric(_FaithfulnessMetric):
    """Base of the ROAD metrics; subclasses set ``perturbation`` and ``kind``."""

    direction = "higher"
    unit = "score in [0, 1]"
    perturbation: ClassVar[Perturbation] = "road"
    kind: ClassVar[str] = "faithfulness"
    default_params: ClassVar[dict[str, Any]] = {"thresholds": fm.DEFAULT_THRESHOLDS, "road_noise": 0.01}

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        thresholds = tuple(self.params["thresholds"])
        if not thresholds or any(not isinstance(t, int) or isinstance(t, bool) or not 1 < t <= 100 for t in thresholds):
            raise ValueError(f"metric {self.name!r}: thresholds must be integers in (1, 100], got {thresholds!r}")
        noise = self.params["road_noise"]
        if not isinstance(noise, int | float) or noise < 0:
            raise ValueError(f"metric {self.name!r}: road_noise must be a number >= 0, got {noise!r}")
        self.params["thresholds"] = tuple(sorted(set(thresholds)))

    def _score(self, ctx: _Context, shared: dict[Any, Any]) -> MetricOutput:
        orders: tuple[Order, ...] = {
            "sufficiency": ("ascending",),
            "necessity": ("descending",),
            "faithfulness": ("ascending", "descending"),
        }[self.kind]  # type: ignore[assignment]
        curves_by = road_curves(ctx, shared, self.perturbation, orders, self.params)
        thresholds = self.params["thresholds"]
        percents = fm.road_percents(thresholds)
        p0 = _clean_probabilities(ctx, shared)
        values, reasons, curves = _empty(len(ctx.ids))
        for b in range(len(ctx.ids)):
            if ctx.valid[b]:
                reasons[b] = ctx.valid[b]
                continue
            parts: dict[str, Any] = {"percent": percents.tolist(), "threshold": list(thresholds)}
            scores: dict[str, float] = {}
            for order in orders:
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
            if self.kind == "faithfulness":
                values[b] = float(fm.harmonic_mean(scores["sufficiency"], scores["necessity"]))
            else:
                values[b] = scores[self.kind]
            parts["p_clean"] = float(p0[b])
            curves[b] = parts
        return MetricOutput(values=values, reasons=reasons, curves=curves)


_ROAD_TEXT = {
    "sufficiency": (
        "ROAD sufficiency: max over thresholds t of exp(-mean |p(x) - p(x'_i)|), i < t, perturbing the i % "
        "least salient pixels"
    ),
    "necessity": (
        "ROAD necessity: max over thresholds t of 1 - exp(-mean |p(x) - p(x'_i)|), i < t, perturbing the i % "
        "most salient pixels"
    ),
    "faithfulness": "ROAD faithfulness: harmonic mean of ROAD sufficiency and necessity",
}
_PERTURBATION_TEXT = {
    "road": "noisy linear imputation (sigma 0.01) in normalised space",
    "black": "black pixels (0 in pixel space)",
    "uniform": "U(0, 1) noise in pixel space",
    "gaussian": "N(0, 1) noise in normalised space",
}


def _road_class(kind: str, perturbation: Perturbation) -> type[_RoadMetric]:
    suffix = "" if perturbation == "road" else f"_{perturbation}"
    name = f"road_{kind}{suffix}"
    title = "".join(part.capitalize() for part in name.split("_"))
    description = (
        f"{_ROAD_TEXT[kind]}; perturbation: {_PERTURBATION_TEXT[perturbation]}. Score in [0, 1], higher is better."
    )
    attrs = {
        "name": name,
        "kind": kind,
        "perturbation": perturbation,
        "ranking": kind == "faithfulness" and perturbation == "road",
        "description": description,
        "__doc__": description,
        "__module__": __name__,
        "__qualname__": title,
    }
    return type(title, (_RoadMetric,), attrs)


ROAD_METRICS: tuple[type[_RoadMetric], ...] = tuple(
    _road_class(kind, perturbation)
    for perturbation in PERTURBATIONS
    for kind in ("sufficiency", "necessity", "faithfulness")
)
globals().update({cls.__name__: cls for cls in ROAD_METRICS})


# ----------------------------------------------------------------------------- average drop


class AverageDrop(_FaithfulnessMetric):
    """Average drop % (Chattopadhay et al. 2018): max(0, p(x) - p(x * E)) / p(x) x 100
    with E the normalised map (positive part, min-max to [0, 1]) multiplying the
    normalised input (masked-out regions tend to the dataset mean). Lower is better."""

    name = "average_drop"
    direction = "lower"
    unit = "percent"
    description = (
        "Average drop: max(0, p(x) - p(x * E)) / p(x) x 100 with E the min-max normalised positive map "
        "multiplying the normalised input; percent, lower is better."
    )

    def _score(self, ctx: _Context, shared: dict[Any, Any]) -> MetricOutput:
        p0 = _clean_probabilities(ctx, shared)
        values, reasons, curves = _empty(len(ctx.ids))
        extras: list[dict[str, Any] | None] = [None] * len(ctx.ids)
        scorer = _Scorer(ctx)
        normalised = normalise_saliency(ctx.saliency)
        for b in range(len(ctx.ids)):
            if ctx.valid[b]:
                reasons[b] = ctx.valid[b]
                continue
            extras[b] = {"degenerate": bool(normalised.degenerate[b])}
            emap = torch.from_numpy(normalised.maps[b]).float()
            scorer.add(b, (ctx.inputs[b] * emap[None])[None], int(ctx.targets[b]))
        scored = scorer.finish()
        for b, p in scored.items():
            values[b] = float(fm.average_drop(p0[b], p[0]))
            if np.isnan(values[b]):
                reasons[b] = "p(x) is 0: average drop undefined"
            curves[b] = {"p_clean": float(p0[b]), "p_masked": float(p[0])}
        return MetricOutput(values=values, reasons=reasons, curves=curves, extras=extras)


# ----------------------------------------------------------------------------- other axes


class MaxSensitivity(Metric):
    """Max-sensitivity (Yeh et al. 2019): max over ``n`` inputs perturbed by uniform
    noise of radius ``radius`` in normalised space (seeded per sample) of
    ||E - E'||_2 / ||E||_2, re-running the explainer. Lower is better."""

    name = "max_sensitivity"
    family = "other"
    direction = "lower"
    ranking = False
    needs = ("model",)
    licence = "Apache-2.0"
    version = "1.0.0"
    unit = "relative L2 distance"
    default_params: ClassVar[dict[str, Any]] = {"n": 10, "radius": 0.02}
    description = (
        "Max-sensitivity: max over n = 10 uniformly perturbed inputs (radius 0.02, normalised space) of "
        "||E - E'|| / ||E||, explainer re-run; relative L2 distance, lower is better."
    )

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        n, r = self.params["n"], self.params["radius"]
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"metric 'max_sensitivity': n must be a positive integer, got {n!r}")
        if not isinstance(r, int | float) or r < 0:
            raise ValueError(f"metric 'max_sensitivity': radius must be a number >= 0, got {r!r}")

    def score(self, batch: MetricInput) -> MetricOutput:
        size = len(batch.samples)
        if batch.explainer is None:
            return MetricOutput.not_applicable(size, "needs the explainer to re-run it on perturbed inputs")
        ctx = _context(batch)
        if isinstance(ctx, str):
            return MetricOutput.not_applicable(size, ctx)
        n, radius = int(self.params["n"]), float(self.params["radius"])
        shape = tuple(ctx.inputs.shape[1:])
        noise = np.stack(
            [
                sample_rng(ctx.seed, sid, "max_sensitivity").uniform(-radius, radius, (n, *shape)).astype(np.float32)
                for sid in ctx.ids
            ]
        )
        targets = torch.as_tensor(ctx.targets, dtype=torch.long)
        ratios = np.full((size, n), np.nan)
        for j in range(n):
            perturbed = (ctx.inputs + torch.from_numpy(noise[:, j])).to(ctx.device)
            out = batch.explainer.explain(batch.model, perturbed, targets, seed=ctx.seed)
            if isinstance(out, list):
                return MetricOutput.not_applicable(size, "the explainer returned concept explanations")
            maps = out.detach().cpu().numpy() if isinstance(out, torch.Tensor) else np.asarray(out)
            maps = _resize_maps(maps.astype(np.float64), ctx.saliency.shape[1:])
            for b in range(size):
                ratios[b, j] = fm.relative_distance(ctx.saliency[b], maps[b : b + 1])[0]
        values, reasons, curves = _empty(size)
        for b in range(size):
            if ctx.valid[b]:
                reasons[b] = ctx.valid[b]
            elif not np.linalg.norm(ctx.saliency[b]) > 0:
                reasons[b] = "all-zero saliency map: relative distance undefined"
            elif not np.isfinite(ratios[b]).all():
                reasons[b] = "the explainer returned NaN or infinite values on a perturbed input"
            else:
                values[b] = float(ratios[b].max())
                curves[b] = {"ratio": ratios[b].tolist()}
        return MetricOutput(values=values, reasons=reasons, curves=curves, forward_passes=size * n)


class Sparseness(Metric):
    """Sparseness (Chalasani et al. 2020): Gini index of |E| flattened. Higher is sparser."""

    name = "sparseness"
    family = "other"
    direction = "higher"
    ranking = False
    needs = ()
    licence = "Apache-2.0"
    version = "1.0.0"
    unit = "Gini index in [0, 1]"
    description = "Sparseness: Gini index of |E| over all pixels, in [0, 1]; higher is sparser."

    def score(self, batch: MetricInput) -> MetricOutput:
        size = len(batch.samples)
        if batch.saliency is None:
            return MetricOutput.not_applicable(size, "needs a saliency map")
        values, reasons, _ = _empty(size)
        for b, emap in enumerate(np.asarray(batch.saliency, dtype=np.float64)):
            if not np.isfinite(emap).all():
                reasons[b] = "saliency map contains NaN or infinite values"
                continue
            values[b] = fm.gini(emap)
            if np.isnan(values[b]):
                reasons[b] = "all-zero saliency map: Gini index undefined (0 / 0)"
        return MetricOutput(values=values, reasons=reasons)


FAITHFULNESS_METRICS: tuple[type[Metric], ...] = (
    Deletion,
    Insertion,
    *ROAD_METRICS,
    AverageDrop,
    MaxSensitivity,
    Sparseness,
)
