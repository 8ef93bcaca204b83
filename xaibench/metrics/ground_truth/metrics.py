"""The four ``ground_truth`` metrics (DESIGN 11): one class per metric, all ranked, higher is better.

Each reads the batch's shared :class:`~xaibench.metrics.ground_truth.batch.GroundTruthBatch` (the
signed maps resized once) and one computation of :mod:`xaibench.metrics.ground_truth.formulas`;
the two region metrics share one pass of region sums.
"""

from __future__ import annotations

from typing import ClassVar

from xaibench.api import Metric, MetricCost, MetricInput, MetricOutput
from xaibench.metrics.ground_truth import formulas as gt
from xaibench.metrics.ground_truth.batch import GroundTruthBatch


class GroundTruthMetric(Metric):
    """Base of the ground-truth metrics: the family's class data; ``score`` reads the shared batch
    and leaves the metric's own computation to :meth:`compute`; ``extra_fields`` are the
    per-sample extras copied from the scores into the output."""

    family = "ground_truth"
    direction = "higher"
    cost = MetricCost()  # the map against the known answer: no forward pass
    ranking = True
    version = "1.0.0"
    licence = "Apache-2.0"
    needs = ("mask",)
    scores_constant_maps = True  # a constant map scores the worst value, not n/a (DESIGN 11)
    extra_fields: ClassVar[tuple[str, ...]] = ()

    def compute(self, ctx: GroundTruthBatch) -> gt.Scores:
        """The metric's scores over the whole batch (memoised in the batch)."""
        raise NotImplementedError

    def score(self, batch: MetricInput) -> MetricOutput:
        ctx = GroundTruthBatch.of(batch)
        if not ctx.groups:
            return ctx.output(None)
        return ctx.output(self.compute(ctx), extras=self.extra_fields)


class GtMassInside(GroundTruthMetric):
    """Share of the map's magnitude inside A*: sum |E| inside A* / sum |E|. Fraction in [0, 1],
    higher is better; a constant map scores 0, an empty A* is n/a."""

    name = "gt_mass_inside"
    unit = "fraction in [0, 1]"
    value_range = (0.0, 1.0)
    description = (
        "known answer: sum of |E| inside A* / sum of |E| on the signed map resized to the ground truth "
        "(higher is better; fraction in [0, 1])."
    )

    def compute(self, ctx: GroundTruthBatch) -> gt.Scores:
        return ctx.results(self.name, lambda g: gt.mass_inside(g.E, g.A, g.constant))


class GtPointing(GroundTruthMetric):
    """1 when the maximum of |E| lies in A* (no tolerance; tied maxima hit only when all lie in
    A*), else 0; the extras record ``tied_maxima``. Hit (0 or 1), higher is better."""

    name = "gt_pointing"
    unit = "hit (0 or 1); mean = hit rate"
    value_range = (0.0, 1.0)
    extra_fields = ("tied_maxima",)
    description = (
        "known answer: 1 if the maximum of |E| lies inside A* (no tolerance; tied maxima hit only if all lie "
        "inside), else 0 (higher is better; hit (0 or 1); mean = hit rate)."
    )

    def compute(self, ctx: GroundTruthBatch) -> gt.Scores:
        return ctx.results(self.name, lambda g: gt.pointing(g.E, g.A, g.constant))


class GtRankCorrelation(GroundTruthMetric):
    """Spearman correlation (average ranks for ties) between E summed per region and the exact
    contributions. In [-1, 1], higher is better; n/a without a known answer or when the
    contributions are all equal; a constant map scores -1."""

    name = "gt_rank_correlation"
    unit = "Spearman correlation in [-1, 1]"
    value_range = (-1.0, 1.0)
    description = (
        "known answer: Spearman correlation between the signed map summed per region and the exact "
        "per-region contributions (higher is better; Spearman correlation in [-1, 1])."
    )

    def compute(self, ctx: GroundTruthBatch) -> gt.Scores:
        return ctx.region_scores(self.name, lambda s, c, const, mass, _signed: gt.rank_correlation(s, c, const, mass))


class GtSignAgreement(GroundTruthMetric):
    """Share of the regions with a nonzero contribution whose signed sum of E has the
    contribution's sign (a sum of 0 agrees with none). Fraction in [0, 1], higher is better;
    n/a where the contributions do not have both signs, and for a map with no negative value
    ("unsigned map"); a constant map scores 0."""

    name = "gt_sign_agreement"
    unit = "fraction in [0, 1]"
    value_range = (0.0, 1.0)
    description = (
        "known answer: share of regions with a nonzero contribution whose signed sum of E has the "
        "contribution's sign; signed maps only (higher is better; fraction in [0, 1])."
    )

    def compute(self, ctx: GroundTruthBatch) -> gt.Scores:
        return ctx.region_scores(self.name, gt.sign_agreement)


GROUND_TRUTH_METRICS: tuple[type[GroundTruthMetric], ...] = (
    GtMassInside,
    GtPointing,
    GtRankCorrelation,
    GtSignAgreement,
)
"""Every ground-truth metric, one class per id, in registration order."""
