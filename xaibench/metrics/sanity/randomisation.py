"""Model randomisation (Adebayo et al. 2018, DESIGN 4b): does the explanation depend on the model?"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import torch

from xaibench.api import ExplainContext, Metric, MetricCost, MetricInput, MetricOutput, Model
from xaibench.metrics.faithfulness.context import faithfulness_batch, resize_maps
from xaibench.metrics.sanity.formulas import spearman_rows
from xaibench.params import Param
from xaibench.randomisation import parameter_blocks, randomised_model
from xaibench.seeds import derive_seed

CONCEPTS_REASON = "concept explanations have no pixel ranking"
CONSTANT_REASON = "constant map: Spearman undefined"


def randomisation_seed(metric_seed: int) -> int:
    """The seed of the re-initialised weights, from the batch's metric seed (the same for every
    batch of a run, so every sample of a track is explained on the same randomised models)."""
    return derive_seed(metric_seed, "model_randomisation")


class ModelRandomisation(Metric):
    """Cascading model-parameter randomisation (Adebayo et al. 2018): the explainer is re-run on
    copies of the model whose parameter blocks 1..k are re-initialised from the output down
    (k = 1..G, ``blocks`` = G, seeded; see :mod:`xaibench.randomisation`), on the same inputs and
    targets, and once on the model itself (k = 0) with the same seed and samples: that re-run is
    the reference, so an explainer that draws its own noise (``random``) is compared with the
    same draw and found insensitive. Value: the Spearman rank correlation (average ranks for
    ties) between |E| on the model and |E| on the fully randomised copy (k = G); the record's
    curve holds the correlation after each k. Spearman rank correlation in [-1, 1]; lower is
    better (an explanation that survives randomising the model does not explain the model; a
    mean above 0.5 is flagged "insensitive to the model"); never ranked.

    Cost per sample: G + 1 explanations (``forward_passes`` counts them, as ``max_sensitivity``
    does; each costs what one explanation of the explainer costs)."""

    name = "model_randomisation"
    family = "sanity"
    direction = "lower"
    ranking = False
    needs = ("model",)
    licence = "Apache-2.0"
    version = "1.1.0"
    unit = "Spearman rank correlation in [-1, 1]"
    value_range = (-1.0, 1.0)
    cost = MetricCost(explanations="blocks + 1")  # the model, then each randomised copy
    explanation_kinds = ("saliency", "concept")
    default_params: ClassVar[Mapping[str, Any]] = {"blocks": 5}
    param_specs: ClassVar[Mapping[str, Param]] = {"blocks": Param(int, low=1)}
    description = (
        "Model randomisation (Adebayo et al. 2018): Spearman correlation of |E| on the model and on a copy "
        "re-initialised block by block from the output (G = 5 blocks, seeded), explainer re-run; "
        "lower is better, mean > 0.5 flagged 'insensitive to the model'; not ranked."
    )

    def randomised(self, model: Model, upto: int, blocks: int, seed: int) -> Model:
        """The copy of ``model`` with blocks 1..``upto`` of ``blocks`` re-initialised, kept for
        the next batches of the same model (built lazily: a worker-run explainer only needs its
        identity)."""
        kept: dict[tuple[str, int, int, int], Model] = self.__dict__.setdefault("_randomised", {})
        key = (model.identity, upto, blocks, seed)
        if key not in kept:
            if any(k[0] != model.identity for k in kept):  # another track's model: forget its copies
                kept.clear()
            kept[key] = randomised_model(model, upto=upto, blocks=blocks, seed=seed)
        return kept[key]

    def score(self, batch: MetricInput) -> MetricOutput:
        size = len(batch.samples)
        if batch.saliency is None:
            return MetricOutput.not_applicable(size, CONCEPTS_REASON)
        if batch.explainer is None:
            return MetricOutput.not_applicable(size, "needs the explainer to re-run it on randomised models")
        ctx = faithfulness_batch(batch)
        if isinstance(ctx, str):
            return MetricOutput.not_applicable(size, ctx)
        model = batch.model
        assert model is not None
        groups = len(parameter_blocks(model.module, int(self.params["blocks"])))
        if groups == 0:
            return MetricOutput.not_applicable(size, "the model has no parameters to randomise")
        seed = randomisation_seed(ctx.seed)
        inputs = ctx.inputs.to(ctx.device)
        targets = torch.as_tensor(ctx.targets, dtype=torch.long)
        context = ExplainContext(samples=list(batch.samples))
        rho = np.full((size, groups), np.nan)
        finite = np.ones((size, groups), dtype=bool)
        reference, reference_finite = np.zeros(0), np.ones(size, dtype=bool)
        for k in range(0, groups + 1):
            randomised = model if k == 0 else self.randomised(model, k, groups, seed)
            try:
                out = batch.explainer.explain(randomised, inputs, targets, seed=ctx.seed, context=context)
            except Exception as exc:  # noqa: BLE001 - the explainer's failure is the batch's n/a reason
                text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                return MetricOutput.not_applicable(size, f"explainer failed on a randomised model: {text}"[:300])
            if isinstance(out, list) and out and isinstance(out[0], dict):
                return MetricOutput.not_applicable(size, CONCEPTS_REASON)
            maps = out.detach().cpu().numpy() if isinstance(out, torch.Tensor) else np.asarray(out)
            if maps.ndim != 3 or maps.shape[0] != size or 0 in maps.shape:
                reason = f"explainer returned maps of shape {maps.shape} for {size} inputs on a randomised model"
                return MetricOutput.not_applicable(size, reason)
            maps = maps.astype(np.float32).astype(np.float64)  # as the runner keeps (and caches) maps
            rerun = np.abs(np.nan_to_num(maps, nan=0.0, posinf=0.0, neginf=0.0))
            if k == 0:
                reference_finite = np.isfinite(maps).reshape(size, -1).all(axis=1)
                reference = rerun
                continue
            finite[:, k - 1] = np.isfinite(maps).reshape(size, -1).all(axis=1)
            rho[:, k - 1] = spearman_rows(reference, resize_maps(rerun, tuple(reference.shape[1:])))
        rho[~finite] = np.nan
        values = np.full(size, np.nan)
        reasons: list[str | None] = [None] * size
        curves: list[dict[str, Any] | None] = [None] * size
        fractions = [k / groups for k in range(1, groups + 1)]
        for b in range(size):
            original = np.abs(ctx.saliency[b])
            if ctx.valid[b]:
                reasons[b] = ctx.valid[b]
            elif original.max() == original.min() or reference[b].max() == reference[b].min():
                reasons[b] = CONSTANT_REASON
            elif not reference_finite[b]:
                reasons[b] = "the explainer returned NaN or infinite values when re-run on the model"
            elif not finite[b, -1]:
                reasons[b] = "the explainer returned NaN or infinite values on the randomised model"
            elif np.isnan(rho[b, -1]):
                reasons[b] = CONSTANT_REASON
            else:
                values[b] = float(rho[b, -1])
                curves[b] = {
                    "fraction": fractions,
                    "value": [None if np.isnan(r) else float(r) for r in rho[b]],
                }
        return MetricOutput(values=values, reasons=reasons, curves=curves, forward_passes=size * (groups + 1))
