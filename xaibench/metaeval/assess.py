"""Meta-evaluation of the metrics of a set of submissions: one card per (track, metric) (DESIGN 9).

:func:`assess` reads what the leaderboard reads (the submissions' per-sample values, their
families and directions; reference-only explainers left out) and computes, for every metric
present on every track, plugin metrics included:

- **rank stability** (:func:`xaibench.metaeval.rankings.rank_stability`): mean and 5th-percentile
  Kendall tau under 200 paired bootstrap resamples, P(the top explainer stays first), the n at
  which tau reaches 0.9; the ``unstable`` flag;
- **agreement** (:func:`xaibench.metaeval.rankings.agreement`): Kendall tau between every two
  metrics' explainer rankings with a bootstrap interval, and each track's mean within each family
  and across families.

Every figure is seeded by ``derive_seed(seed, "meta", track, metric, ...)``. A metric's verdict is
``valid``/``invalid`` when a validity test of DESIGN 9 (the graded-oracle ladder, the planted-cue
test) has been run on the track, else ``untested``; ``unstable`` stands beside it as a flag.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xaibench.metaeval.rankings import Agreement, Stability, agreement, rank_stability, signed
from xaibench.publish.leaderboard import Entry
from xaibench.seeds import derive_seed

UNTESTED = "untested"


@dataclass
class Validity:
    """The outcome of a validity test on one (track, metric): ``valid``, ``invalid`` or
    ``untested``, the test's name (``ladder``, ``planted-cue``) and its deciding figure."""

    verdict: str = UNTESTED
    test: str | None = None
    figure: str | None = None
    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class Card:
    """Everything meta-evaluation says about one metric on one track."""

    track: str
    metric: str
    family: str
    direction: str
    ranking: bool
    stability: Stability
    agreement: dict[str, Agreement] = field(default_factory=dict)
    validity: Validity = field(default_factory=Validity)
    ceiling: Any = None  # the human ceiling (xaibench.metaeval.ceiling.Ceiling) where the track has one
    consistency: Any = None  # IAC, IEC, MC (xaibench.metaeval.consistency.MetaConsistency) where measured
    protocol: Any = None  # the protocol sensitivity (xaibench.metaeval.protocol.Protocol) where measured

    @property
    def flags(self) -> list[str]:
        return ["unstable"] if self.stability.unstable else []

    @property
    def verdict(self) -> str:
        """The verdict as shown: ``valid``, ``invalid`` or ``untested``, with ``, unstable``."""
        return ", ".join([self.validity.verdict, *self.flags])


@dataclass
class TrackMeta:
    """The cards of one track, and its agreement means (within each family, across families)."""

    cards: dict[str, Card]
    within: dict[str, float]
    across: float


def matrix(entries: Sequence[Entry], explainers: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """``values[e, s]`` of one (track, metric) over ``explainers`` and the samples where every one
    of them has a value (sorted ids), signed so that higher is better."""
    by = {e.explainer: e for e in entries}
    samples = [by[x].samples or {} for x in explainers]
    ids = sorted(set.intersection(*(set(k for k, v in s.items() if v is not None) for s in samples)))
    values = np.array([[float(s[i]) for i in ids] for s in samples], dtype=np.float64).reshape(len(explainers), -1)
    return signed(values, entries[0].direction), ids


def assess(
    entries: Iterable[Entry],
    *,
    seed: int = 0,
    reference: Iterable[str] = (),
    validity: Mapping[tuple[str, str], Validity] | None = None,
) -> dict[str, TrackMeta]:
    """The cards of every (track, metric) of ``entries`` (see the module doc). ``reference``:
    explainer keys left out of every ranking (reference-only explainers); ``validity``: the
    outcome of the validity tests run, by (track, metric)."""
    left_out = set(reference)
    by_track: dict[str, dict[str, list[Entry]]] = defaultdict(lambda: defaultdict(list))
    for e in entries:
        # an explainer with no value on a (track, metric) cannot apply there (attention rollout on a
        # CNN): it is left out, else no sample would be paired across the explainers that do
        applies = e.samples is not None and any(v is not None for v in e.samples.values())
        if e.explainer not in left_out and applies:
            by_track[e.track][e.metric].append(e)
    out: dict[str, TrackMeta] = {}
    for track in sorted(by_track):
        metrics = by_track[track]
        explainers = {m: sorted(e.explainer for e in es) for m, es in metrics.items()}
        cards: dict[str, Card] = {}
        for metric in sorted(metrics):
            es = sorted(metrics[metric], key=lambda e: e.explainer)
            values, _ = matrix(es, explainers[metric])
            rng = np.random.default_rng(derive_seed(seed, "meta", track, metric, "stability"))
            first = es[0]
            cards[metric] = Card(
                track=track,
                metric=metric,
                family=first.family,
                direction=first.direction,
                ranking=first.ranking,
                stability=rank_stability(values, rng),
                validity=(validity or {}).get((track, metric), Validity()),
            )
        names = sorted(cards)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                shared = sorted(set(explainers[a]) & set(explainers[b]))
                if len(shared) < 2:
                    continue
                pair = _pair(metrics[a], metrics[b], shared, seed, track)
                cards[a].agreement[b] = cards[b].agreement[a] = pair
        out[track] = TrackMeta(cards, *_means(cards))
    return out


def _pair(first: Sequence[Entry], second: Sequence[Entry], explainers: list[str], seed: int, track: str) -> Agreement:
    """The agreement of two metrics over ``explainers``, on the samples both have for all of them."""
    a = [e for e in first if e.explainer in explainers]
    b = [e for e in second if e.explainer in explainers]
    va, ida = matrix(sorted(a, key=lambda e: e.explainer), explainers)
    vb, idb = matrix(sorted(b, key=lambda e: e.explainer), explainers)
    both = sorted(set(ida) & set(idb))
    keep_a = [ida.index(s) for s in both]
    keep_b = [idb.index(s) for s in both]
    rng = np.random.default_rng(derive_seed(seed, "meta", track, a[0].metric, b[0].metric, "agreement"))
    return agreement(va[:, keep_a], vb[:, keep_b], rng)


def _means(cards: Mapping[str, Card]) -> tuple[dict[str, float], float]:
    """Mean tau within each family (over its pairs of metrics) and across families."""
    within: dict[str, list[float]] = defaultdict(list)
    across: list[float] = []
    for name, card in cards.items():
        for other, pair in card.agreement.items():
            if other <= name or math.isnan(pair.tau):
                continue
            if cards[other].family == card.family:
                within[card.family].append(pair.tau)
            else:
                across.append(pair.tau)
    return (
        {family: float(np.mean(taus)) for family, taus in sorted(within.items())},
        float(np.mean(across)) if across else float("nan"),
    )
