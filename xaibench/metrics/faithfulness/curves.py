"""Deletion and insertion (Petsiuk et al. 2018): a probability curve over the fraction of pixels
removed or inserted most-salient-first, summarised by its trapezoid area."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np
import torch

from xaibench.api import MetricCost, MetricOutput
from xaibench.metrics.faithfulness import formulas as fm
from xaibench.metrics.faithfulness.base import FaithfulnessMetric, unscored
from xaibench.metrics.faithfulness.context import BatchedScorer, FaithfulnessBatch
from xaibench.metrics.faithfulness.perturbation import blurred, device_ranks, pixel_count, replace
from xaibench.params import Param


class CurveMetric(FaithfulnessMetric):
    """Base of deletion and insertion: ``steps`` equal steps of the pixels, most salient first.

    Subclasses implement :meth:`score_batch` with :meth:`curves`, giving the image at each
    step and the probabilities known without a forward pass.
    """

    value_range = (0.0, 1.0)  # the area under a probability over a fraction in [0, 1]
    cost = MetricCost(forward_passes="steps + 1")
    default_params: ClassVar[Mapping[str, Any]] = {"steps": 50}
    param_specs: ClassVar[Mapping[str, Param]] = {"steps": Param(int, low=1)}

    def counts(self, n: int) -> np.ndarray:
        """Pixels changed at each of the ``steps + 1`` points of the curve, for ``n`` pixels."""
        steps = self.params["steps"]
        return pixel_count(np.arange(steps + 1), steps, n)

    def curves(
        self,
        ctx: FaithfulnessBatch,
        build: Callable[[int, torch.Tensor], torch.Tensor],
        known: Callable[[int, int], float | None],
    ) -> MetricOutput:
        """Score ``build(b, masks)`` for every distinct count not resolved by ``known(b, count)``;
        ``masks`` (``(K, H, W)`` bool) are made on the model's device from each map's pixel ranks,
        sorted there for all samples at once."""
        n_pix = ctx.pixels
        counts = self.counts(n_pix)
        fractions = counts / n_pix
        values, reasons, curves = unscored(len(ctx.ids))
        scorer = BatchedScorer(ctx)
        plans: dict[int, tuple[np.ndarray, dict[int, float]]] = {}
        shape = ctx.saliency.shape[1:]
        valid = ctx.scorable
        ranks = dict(zip(valid, device_ranks(ctx.saliency[valid], "descending", ctx.device), strict=True))
        for b in range(len(ctx.ids)):
            if ctx.valid[b]:
                reasons[b] = ctx.valid[b]
                continue
            distinct = np.unique(counts)
            fixed = {int(c): v for c in distinct if (v := known(b, int(c))) is not None}
            todo = np.array([c for c in distinct if int(c) not in fixed], dtype=np.int64)
            limits = torch.from_numpy(todo).to(ctx.device)  # before the forwards: one small copy per sample

            def make(start: int, stop: int, b: int = b, limits: torch.Tensor = limits):
                # Only this slice of the curve's images exists at a time (memory bound by the batch size).
                masks = ranks[b][None, :] < limits[start:stop, None]  # the first k pixels of the order
                return build(b, masks.view(stop - start, *shape))

            scorer.add_lazy(b, len(todo), make, int(ctx.targets[b]))
            plans[b] = (todo, fixed)
        scored = scorer.finish()
        for b, (todo, fixed) in plans.items():
            lookup = {**fixed, **{int(c): float(p) for c, p in zip(todo, scored[b], strict=True)}}
            probs = np.array([lookup[int(c)] for c in counts])
            values[b] = fm.trapezoid_auc(fractions, probs)
            curves[b] = {"fraction": fractions.tolist(), "probability": probs.tolist(), "steps": len(counts) - 1}
        return MetricOutput(values=values, reasons=reasons, curves=curves)


class Deletion(CurveMetric):
    """Deletion AUC (Petsiuk et al. 2018): remove pixels most-salient-first in ``steps`` equal
    steps, replacing them with 0 in normalised space (the dataset mean); trapezoid area under
    p(target) over the removed fraction, in [0, 1]. Lower is better."""

    name = "deletion"
    modalities = ("image", "text")  # on text, a removed token is replaced by the padding token (DESIGN 12)
    direction = "lower"
    ranking = True
    unit = "AUC of probability over removed fraction, in [0, 1]"
    description = (
        "Deletion AUC: remove pixels most-salient-first in S steps (baseline: the dataset mean); "
        "area under the target-class probability over the removed fraction, in [0, 1]. Lower is better."
    )

    def score_batch(self, ctx: FaithfulnessBatch) -> MetricOutput:
        n_pix = ctx.pixels
        p0 = ctx.clean_probabilities()
        zero = torch.zeros(ctx.inputs.shape[1], 1, 1, device=ctx.device)

        def known(b: int, count: int) -> float | None:
            if count == 0:
                return float(p0[b])
            if count == n_pix:
                return float(ctx.baseline_probabilities("zeros", zero)[int(ctx.targets[b])])
            return None

        return self.curves(ctx, lambda b, masks: replace(ctx.device_inputs[b], masks, zero), known)


class Insertion(CurveMetric):
    """Insertion AUC: start from a Gaussian-blurred copy (``blur_sigma`` pixels at model input
    size, > 0) and insert original pixels most-salient-first; trapezoid area under p(target)
    over the inserted fraction, in [0, 1]. Higher is better.

    On a token sequence (DESIGN 12) the start is the all-padding sequence (zero, the explainers'
    baseline and deletion's fill) and the tokens are inserted in the order of the ``(1, L)`` map,
    ``steps`` equal steps of the L positions (padding positions insert padding: no change), as
    deletion removes them; ``blur_sigma`` is not used."""

    name = "insertion"
    modalities = ("image", "text")  # on text, tokens are inserted into the all-padding sequence (DESIGN 12)
    direction = "higher"
    ranking = True
    unit = "AUC of probability over inserted fraction, in [0, 1]"
    default_params: ClassVar[Mapping[str, Any]] = {"steps": 50, "blur_sigma": 5.0}
    param_specs: ClassVar[Mapping[str, Param]] = {"steps": Param(int, low=1), "blur_sigma": Param(float, low=0.0)}
    description = (
        "Insertion AUC: insert original pixels most-salient-first into a blurred copy (Gaussian, sigma "
        "recorded) in S steps; area under the target-class probability over the inserted fraction, "
        "in [0, 1]. Higher is better."
    )

    def validate_params(self, params: dict[str, Any]) -> dict[str, Any]:
        if not params["blur_sigma"] > 0:
            raise ValueError(
                f"metric {self.name!r}: parameter 'blur_sigma' must be a number > 0, got {params['blur_sigma']!r}"
            )
        return params

    def score_batch(self, ctx: FaithfulnessBatch) -> MetricOutput:
        if ctx.modality == "text":
            return self._tokens(ctx)
        n_pix = ctx.pixels
        p0 = ctx.clean_probabilities()
        sigma = float(self.params["blur_sigma"])

        valid = ctx.scorable
        copies: dict[int, torch.Tensor] = {}
        if valid:  # blurred on the host, all in one copy to the device before the forwards
            stacked = torch.stack([blurred(ctx.inputs[b], sigma) for b in valid]).to(ctx.device)
            copies = dict(zip(valid, stacked, strict=True))

        def build(b: int, masks: torch.Tensor) -> torch.Tensor:
            # The first k pixels (most salient first) come from x, the others from the blurred copy.
            return replace(copies[b], masks, ctx.device_inputs[b])

        return self.curves(ctx, build, lambda b, c: float(p0[b]) if c == n_pix else None)

    def _tokens(self, ctx: FaithfulnessBatch) -> MetricOutput:
        """Text: the first k tokens of the map's order come from x, the others are padding (zero)."""
        n_pos = ctx.pixels
        p0 = ctx.clean_probabilities()
        zero = torch.zeros(ctx.inputs.shape[1], 1, 1, device=ctx.device)
        start = zero.expand(ctx.inputs.shape[1:])

        def known(b: int, count: int) -> float | None:
            if count == n_pos:
                return float(p0[b])
            if count == 0:  # the all-padding sequence: the same for every sample
                return float(ctx.baseline_probabilities("zeros", zero)[int(ctx.targets[b])])
            return None

        return self.curves(ctx, lambda b, masks: replace(start, masks, ctx.device_inputs[b]), known)
