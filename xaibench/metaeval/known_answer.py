"""The known-answer test: which proxy faithfulness metric agrees with the known answer? (DESIGN 11, 9)

On a **mechanism track** (a track where some ranking metric belongs to the ``ground_truth``
family: the model decides by a mechanism built in, so every sample's true attribution A* is
known) every faithfulness metric of the run is a *proxy*: it claims to say which explainer is
faithful without knowing A*. For each (mechanism track, proxy), from the submissions' per-sample
values alone:

1. **Explainers**: the methods (references such as ``oracle``, ``planted``, ``ladder`` left out)
   with values on the proxy and on at least one ground-truth ranking metric that at least two of
   them have (a rank among one is no rank). An explainer *has* a ground-truth metric when it has
   a value on it on at least :data:`COVERED` of as many samples as the explainer with the most
   values on it: a metric defined only now and then for an explainer's maps (sign agreement,
   which an unsigned map does not have, on the samples where that explainer's map is constant and
   scores the worst value) is not counted for that explainer, and its gaps do not remove samples.
   **Samples**: those where every one of them has a value on the proxy and on each ground-truth
   metric it has (paired).
2. **The known answer's ranking**: per ground-truth metric, the explainers that have it are ranked
   by their mean over the samples (1 = best, direction-aware, tied means share the average of
   their ranks); an explainer's score is its mean rank over the ground-truth metrics it has
   (lower is better; a unitless rank).
3. **tau**: Kendall tau-b between the explainers' proxy means, signed so that higher is better
   (:func:`~xaibench.metaeval.rankings.signed`: a lower-is-better proxy is negated first), and
   minus their mean ranks: 1 when the proxy orders them as the known answer does, -1 reversed.
4. **Interval**: B = 200 paired bootstrap resamples of the samples, drawn once as a ``(B, n)``
   index array shared by the proxy and every ground-truth metric; means, ranks and tau are
   recomputed on each (vectorised); the 2.5th and 97.5th percentiles of tau, resamples where tau
   is undefined (one side ties every explainer) left out. Seeded by
   ``derive_seed(seed, "meta", track, metric, "known-answer")`` (DESIGN 9).
5. **Verdict**: ``agrees`` when the interval lies above 0, ``disagrees`` when below 0,
   ``undecided`` otherwise; ``untested``, with a reason, under 3 explainers or 8 samples, or
   when tau is undefined on all samples.

A reported test: it does not enter a metric's validity verdict or the leaderboard's gate (DESIGN
9 takes validity from the ladder and the planted-cue test; DESIGN 11 asks for this table).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from xaibench.metaeval.rankings import BOOTSTRAP, kendall_tau_b, signed
from xaibench.publish.leaderboard import Entry, scores_known_answer
from xaibench.seeds import derive_seed

TEST = "known-answer"
FIGURE = "tau"
PROXY = "faithfulness"  # the family whose metrics are tested against it
MIN_EXPLAINERS = 3
MIN_SAMPLES = 8
COVERED = 0.9
"""The share of the best-covered explainer's samples on which an explainer must have a value on a
ground-truth metric for that metric to count for it (see the module doc)."""
AGREES, DISAGREES, UNDECIDED, UNTESTED = "agrees", "disagrees", "undecided", "untested"


@dataclass(frozen=True)
class KnownAnswer:
    """The known-answer test of one proxy metric on one mechanism track (see the module doc).

    ``tau``: Kendall tau-b between the proxy's ranking and the known answer's, in [-1, 1];
    ``low``, ``high``: its 95 % paired-bootstrap interval (NaN when untested); ``explainers``:
    the methods compared; ``samples``: the paired samples; ``truth``: the ground-truth metrics
    whose mean rank made the known answer's ranking; ``reason``: why it is untested."""

    track: str
    metric: str
    direction: str
    verdict: str
    tau: float
    low: float
    high: float
    explainers: tuple[str, ...]
    samples: int
    truth: tuple[str, ...]
    reason: str | None = None


def average_ranks(means: np.ndarray) -> np.ndarray:
    """Ranks along the last axis of ``means`` (1 = the largest; tied values share the average of
    their ranks, as ``scipy.stats.rankdata(-x, method="average")``); a NaN is not ranked, stays
    NaN and takes no rank from the others."""
    a = means[..., :, None]
    b = means[..., None, :]
    above = (b > a).sum(axis=-1)
    tied = (b == a).sum(axis=-1) - 1  # the value itself left out
    return np.where(np.isnan(means), np.nan, 1.0 + above + 0.5 * tied)


def mean_rank(truth_means: np.ndarray) -> np.ndarray:
    """``(..., E)`` mean rank of each explainer over the ground-truth metrics it has, from the
    ``(..., M, E)`` signed means of M metrics (NaN where an explainer has no value on a metric):
    lower is better; NaN for an explainer with none."""
    ranks = average_ranks(truth_means)
    counts = (~np.isnan(ranks)).sum(axis=-2)
    total = np.nansum(ranks, axis=-2)
    return np.where(counts > 0, total / np.maximum(counts, 1), np.nan)


def tau_b_rows(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Kendall tau-b between each row of ``first`` and the same row of ``second`` (both
    ``(B, E)``), ties counted as tau-b does; NaN where either row ties every pair. Row ``b``
    equals ``scipy.stats.kendalltau(first[b], second[b]).statistic``."""
    i, j = np.triu_indices(first.shape[-1], k=1)
    dx = np.sign(first[:, i] - first[:, j])
    dy = np.sign(second[:, i] - second[:, j])
    s = (dx * dy).sum(axis=1)
    denominator = np.sqrt(np.count_nonzero(dx, axis=1).astype(float) * np.count_nonzero(dy, axis=1))
    positive = denominator > 0
    return np.where(positive, s / np.where(positive, denominator, 1.0), np.nan)


def known_answer_tau(proxy: np.ndarray, truth: np.ndarray, rng: np.random.Generator) -> tuple[float, float, float]:
    """``(tau, low, high)`` of the known-answer test on paired values: ``proxy`` ``(E, n)`` and
    ``truth`` ``(M, E, n)``, both signed so that higher is better, ``truth[m, e]`` all NaN where
    explainer ``e`` has no value on metric ``m`` and finite elsewhere. ``tau`` on all samples;
    ``low``, ``high``: the 2.5th and 97.5th percentiles over :data:`BOOTSTRAP` paired resamples
    drawn from ``rng`` (NaN when no resample defines tau)."""
    n = proxy.shape[1]
    tau = float(kendall_tau_b(proxy.mean(axis=1), -mean_rank(truth.mean(axis=2))))
    index = rng.integers(0, n, size=(BOOTSTRAP, n))
    proxy_b = proxy[:, index].mean(axis=2).T  # (B, E)
    truth_b = truth[:, :, index].mean(axis=3).transpose(2, 0, 1)  # (B, M, E); NaN rows stay NaN
    taus = tau_b_rows(proxy_b, -mean_rank(truth_b))
    taus = taus[~np.isnan(taus)]
    if not taus.size:
        return tau, math.nan, math.nan
    low, high = np.percentile(taus, [2.5, 97.5])
    return tau, float(low), float(high)


def verdict(low: float, high: float) -> str:
    """``agrees`` when the interval ``[low, high]`` lies above 0, ``disagrees`` below, else ``undecided``."""
    if low > 0:
        return AGREES
    if high < 0:
        return DISAGREES
    return UNDECIDED


def mechanism_tracks(entries: Iterable[Entry]) -> list[str]:
    """The tracks of ``entries`` scored against a known answer (:func:`scores_known_answer`)."""
    return sorted({e.track for e in entries if scores_known_answer(e)})


def _valued(entry: Entry) -> dict[str, float]:
    """The samples with a number (n/a and non-finite values left out)."""
    out: dict[str, float] = {}
    for sample, value in (entry.samples or {}).items():
        if value is not None and math.isfinite(float(value)):
            out[str(sample)] = float(value)
    return out


def _covering(values: Mapping[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """The explainers of ``values`` (explainer -> sample -> value, of one ground-truth metric) that
    have the metric: values on at least :data:`COVERED` of as many samples as the one with the most."""
    most = max((len(v) for v in values.values()), default=0)
    return {x: v for x, v in values.items() if len(v) >= COVERED * most}


def known_answer(entries: Iterable[Entry], *, seed: int = 0, reference: Iterable[str] = ()) -> list[KnownAnswer]:
    """The known-answer test of every (mechanism track, faithfulness metric) of ``entries`` (see
    the module doc), sorted by track and metric. ``reference``: explainer keys that are references,
    not methods (never compared)."""
    given = list(entries)
    left_out = set(reference)
    by_track: dict[str, dict[str, dict[str, Entry]]] = defaultdict(lambda: defaultdict(dict))
    for e in given:
        if e.explainer not in left_out:
            by_track[e.track][e.metric][e.explainer] = e
    out: list[KnownAnswer] = []
    for track in mechanism_tracks(given):
        metrics = by_track.get(track, {})
        truth = sorted(m for m, es in metrics.items() if any(scores_known_answer(e) for e in es.values()))
        proxies = sorted(m for m, es in metrics.items() if any(e.family == PROXY for e in es.values()))
        for metric in proxies:
            out.append(_one(track, metric, metrics, truth, seed))
    return out


def _one(
    track: str, metric: str, metrics: Mapping[str, Mapping[str, Entry]], truth: Sequence[str], seed: int
) -> KnownAnswer:
    """The test of one proxy ``metric`` against the ground-truth metrics ``truth`` of ``track``."""
    direction = next(iter(metrics[metric].values())).direction
    proxy = {x: v for x, e in metrics[metric].items() if (v := _valued(e))}
    have = {m: _covering({x: v for x, e in metrics[m].items() if x in proxy and (v := _valued(e))}) for m in truth}
    used = {m: v for m, v in have.items() if len(v) >= 2}
    explainers = sorted(x for x in proxy if any(x in v for v in used.values()))
    names = sorted(used)
    shared: set[str] = set.intersection(*(set(proxy[x]) for x in explainers)) if explainers else set()
    for values in used.values():
        for found in values.values():
            shared &= set(found)
    ids = sorted(shared)

    def untested(reason: str) -> KnownAnswer:
        nan = math.nan
        return KnownAnswer(
            track, metric, direction, UNTESTED, nan, nan, nan, tuple(explainers), len(ids), tuple(names), reason
        )

    if len(explainers) < MIN_EXPLAINERS:
        count = len(explainers)
        return untested(
            f"fewer than {MIN_EXPLAINERS} explainers with values on {metric} and the known answer (n = {count})"
        )
    if len(ids) < MIN_SAMPLES:
        return untested(f"fewer than {MIN_SAMPLES} samples shared by the {len(explainers)} explainers (n = {len(ids)})")
    proxy_values = signed(np.array([[proxy[x][s] for s in ids] for x in explainers]), direction)
    truth_values = np.full((len(names), len(explainers), len(ids)), np.nan)
    for k, m in enumerate(names):
        m_direction = next(iter(metrics[m].values())).direction
        for row, x in enumerate(explainers):
            if x in used[m]:
                truth_values[k, row] = signed(np.array([used[m][x][s] for s in ids]), m_direction)
    rng = np.random.default_rng(derive_seed(seed, "meta", track, metric, TEST))
    tau, low, high = known_answer_tau(proxy_values, truth_values, rng)
    if math.isnan(tau):
        return untested("the proxy or the known answer gives every explainer the same mean")
    return KnownAnswer(
        track, metric, direction, verdict(low, high), tau, low, high, tuple(explainers), len(ids), tuple(names)
    )
