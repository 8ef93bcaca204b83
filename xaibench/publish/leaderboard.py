"""Paired, sample-aware ranking of explainers within a track (DESIGN 7).

Per (track, ranking metric), two explainers are compared on the samples where both have a value
(their *shared* samples). With at least ``min_shared_samples`` (8) shared samples, the paired
differences d = a - b get a 95 % percentile bootstrap interval of their mean; a beats b when
that interval excludes 0 on a's side of the metric's direction, else they tie. All pairs of a
(track, metric) share one resample of its sample ids (1000 resamples, seeded from the track and
the metric); each resample's mean difference is over the drawn ids both have
(:func:`paired_table`). The rank of an explainer is 1 + the number of explainers that beat it,
so ties share ranks and the result does not depend on the input order.
An explainer sharing fewer than 8 samples with every other one gets no rank ("too few samples
(n = k)", k its largest shared count); a submission without per-sample values is not ranked.
A (track, metric) where fewer than two methods (references left out) have per-sample values
ranks nobody: a rank among one is no rank (:data:`TOO_FEW_METHODS`).

A family score is the mean rank over that family's ranking metrics (where the explainer has a
rank), and the family rank the competition rank of those means (lower is better). The overall
score is the mean of the explainer's *ranked* family ranks: alignment, faithfulness, and
perceptual only when its checkpoint is valid (labelled ``PASTA``, or a held-out technique-level
Q1 Spearman >= 0.3); otherwise the perceptual family is shown with "not ranked: <reason>". The
robustness family (DESIGN 3b) has its own ``rank:robustness`` rows but stays out of the overall
score. The sanity family is never ranked: a ``model_randomisation`` mean above 0.5 flags the explainer
"insensitive to the model". Raw values of different metrics are never added together.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from xaibench.blas_threads import one_blas_thread
from xaibench.families import DEFAULT_FAMILY, POLICIES, family_index, policy_of
from xaibench.publish.identity import check_submissions
from xaibench.publish.sample_values import SampleValues
from xaibench.publish.shapes import (
    BoardRow,
    ExplainerBlock,
    ExplainerWinRate,
    FamilyVerdict,
    JsonObject,
    JsonValue,
    Rules,
    SubmissionData,
    WinRates,
)
from xaibench.publish.submission_files import Submission, metric_values, per_sample
from xaibench.seeds import derive_seed
from xaibench.stats import N_BOOTSTRAP, paired_intervals, paired_signs, resample_counts

ROW_COLUMNS = ("track", "explainer", "metric", "family", "direction", "value", "ci_low", "ci_high", "n", "n_na", "rank")
"""The tidy columns of DESIGN 8."""
EXTRA_COLUMNS = ("status", "label", "flags")
"""Added after the DESIGN columns: why a row has no rank, the perceptual checkpoint's label, cell flags."""
CSV_COLUMNS = ROW_COLUMNS + EXTRA_COLUMNS

RULES: Rules = {
    "min_shared_samples": 8,
    "na_flag_fraction": 0.25,
    "perceptual_min_spearman": 0.3,
    "sanity_flag_above": 0.5,
}
"""The ranking rules (written into leaderboard.json): shared samples a comparison needs, the n/a
fraction above which a cell is flagged, the held-out Q1 Spearman a non-PASTA perceptual
checkpoint needs, the ``model_randomisation`` mean above which an explainer is flagged."""

NEVER_RANKED = frozenset({"pasta_q5", "pasta_q6"})
"""Metrics never ranked whatever a file says (Q5/Q6 measure change under perturbation)."""
SANITY_METRIC = "model_randomisation"
INSENSITIVE = "insensitive to the model"
SANITY_FLAGS: dict[str, tuple[str, float | None]] = {
    SANITY_METRIC: ("above", None),
    "smooth_mprt": ("above", None),
    "random_logit": ("above", 0.5),
    "efficient_mprt": ("at_most", 1.0),
}
"""Sanity metric -> when its mean flags the explainer "insensitive to the model": ``("above", t)``
a mean above t, ``("at_most", t)`` a mean of at most t; t ``None``: the rules'
``sanity_flag_above`` (DESIGN 4b's 0.5 for the Spearman-based ones). The metric classes declare
the same in ``insensitive_flag``."""


def insensitive(e: Entry, rules: Rules) -> bool:
    """Whether ``e`` (a sanity metric's mean) flags its explainer "insensitive to the model"."""
    rule = SANITY_FLAGS.get(e.metric)
    if rule is None or e.value is None:
        return False
    how, threshold = rule
    limit = float(rules["sanity_flag_above"]) if threshold is None else threshold
    return e.value > limit if how == "above" else e.value <= limit


REFERENCE_STATUS = "reference, not a method: never ranked"
"""The status of every row of a reference explainer (DESIGN 10)."""
DIAGNOSIS_STATUS = "diagnosis: not in the overall rank"
"""The status of a family rank row on a track where the family is a diagnosis (DESIGN 10)."""
PASTA_LABEL = "PASTA"
NO_SAMPLES = "not ranked: no per-sample values"
MIN_RANKED = 2
"""Methods (not references) with per-sample values a (track, metric) needs before any of them is
ranked: a rank among one is no rank (a metric only one file reports would make it #1 of 1)."""
TOO_FEW_METHODS = f"not ranked: fewer than {MIN_RANKED} methods have values for this metric here"


@dataclass
class Entry:
    """One (track, explainer, metric) block of a submission."""

    track: str
    explainer: str
    metric: str
    family: str
    direction: str
    ranking: bool
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    n_na: int
    samples: Mapping[str, float | None] | None = None
    """Per-sample values (sample id -> value, None for n/a; read from files as
    :class:`~xaibench.publish.sample_values.SampleValues`); None when the file has none."""
    params: JsonObject = field(default_factory=dict)


@dataclass(frozen=True)
class Comparison:
    """The paired comparison of two explainers on one metric."""

    shared: int
    """Number of samples where both have a value."""
    winner: str | None
    """The explainer that is better (interval of the mean difference excludes 0), None for a tie
    or when there are too few shared samples."""
    low: float | None = None
    high: float | None = None
    """95 % bootstrap interval of mean(first - second), the pair in sorted order."""


@dataclass
class TrackRanking:
    """What ranking one track gives: rows, the families' state and the explainers' flags."""

    rows: list[BoardRow]
    families: dict[str, FamilyVerdict]
    """Family -> whether it is ranked on the track, why not, its checkpoint's label."""
    flags: dict[str, list[str]]
    """Explainer -> its flags on the track (``insensitive to the model``)."""


# ----------------------------------------------------------------------------- paired comparisons


def _num(x: object) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    return float(x) if math.isfinite(x) else None


def shared_samples(a: Entry, b: Entry) -> list[str]:
    """Sample ids (sorted) where both entries have a value; [] when either has no samples."""
    if a.samples is None or b.samples is None:
        return []
    return sorted(s for s, v in a.samples.items() if v is not None and b.samples.get(s) is not None)


def resample_ids(entries: Iterable[Entry]) -> list[str]:
    """The ids a (track, metric)'s shared resample draws from: the sorted union of the entries'
    sample ids (n/a ones included, so every explainer run on the track's samples gives the same)."""
    union: set[str] = set()
    for e in entries:
        if e.samples is not None:
            union.update(e.samples)
    return sorted(union)


@dataclass(frozen=True)
class PairedTable:
    """The paired comparisons of all explainers on one (track, metric), from one shared resample.

    Arrays are indexed by position in ``explainers`` (sorted names); the bounds and winners are
    set for ``i < j`` only: the 95 % interval of mean(explainers[i] - explainers[j]) over shared
    samples (NaN with fewer than ``min_shared``, or when built with ``bounds=False``), and the
    index of the better one (-1: a tie or too few shared samples)."""

    explainers: list[str]
    shared: np.ndarray
    low: np.ndarray
    high: np.ndarray
    winner: np.ndarray

    def comparison(self, a: str, b: str) -> Comparison:
        """The :class:`Comparison` of explainers ``a`` and ``b`` (either order)."""
        i, j = sorted((self.explainers.index(a), self.explainers.index(b)))
        low, high, w = self.low[i, j], self.high[i, j], int(self.winner[i, j])
        bounds = (None, None) if math.isnan(low) else (float(low), float(high))
        return Comparison(int(self.shared[i, j]), self.explainers[w] if w >= 0 else None, *bounds)


def _values(entries: Sequence[Entry], ids: Sequence[str]) -> np.ndarray:
    """(E, S) values of ``entries`` on ``ids``, NaN where n/a or missing (ids outside ``ids`` are ignored)."""
    position = {s: k for k, s in enumerate(ids)}
    out = np.full((len(entries), len(ids)), np.nan)
    last: list[str] | None = None
    where = np.empty(0, dtype=np.int64)
    for row, e in enumerate(entries):
        if not e.samples:
            continue
        if isinstance(e.samples, SampleValues):
            keys, got = list(e.samples.ids), e.samples.array
        else:
            keys, got = list(e.samples), np.array(list(e.samples.values()), dtype=np.float64)  # None -> NaN
        if keys != last:  # usually every explainer lists the same ids in the same order
            where = np.fromiter((position.get(s, -1) for s in keys), dtype=np.int64, count=len(keys))
            last = keys
        inside = where >= 0
        out[row, where[inside]] = got[inside]
    return out


def paired_table(
    entries: Sequence[Entry],
    min_shared: int = int(RULES["min_shared_samples"]),
    ids: Sequence[str] | None = None,
    *,
    bounds: bool = True,
) -> PairedTable:
    """Paired comparisons of ``entries`` (one track and metric, each with per-sample values) from
    one resample of ``ids`` (default :func:`resample_ids`) seeded by
    ``derive_seed(0, "paired", track, metric)``: :func:`xaibench.stats.paired_intervals`. A pair
    with at least ``min_shared`` shared samples has a winner when its interval excludes 0 on the
    side of the metric's direction (that of the first of the pair in sorted order).
    ``bounds=False``: the winners only (:func:`xaibench.stats.paired_signs`, the same answer
    without computing the percentiles), the bounds left NaN."""
    have = sorted(entries, key=lambda e: e.explainer)
    names = [e.explainer for e in have]
    n = len(have)
    ids = resample_ids(have) if ids is None else list(ids)
    values = _values(have, ids)
    mask = np.isfinite(values)
    low, high = np.full((n, n), np.nan), np.full((n, n), np.nan)
    if n < 2 or not ids:
        shared = np.rint(mask.astype(np.float64) @ mask.T.astype(np.float64)).astype(np.int64)
        return PairedTable(names, shared, low, high, np.full((n, n), -1))
    counts = resample_counts(len(ids), derive_seed(0, "paired", have[0].track, have[0].metric), N_BOOTSTRAP)
    with one_blas_thread():  # the products of a paired table are small
        if bounds:
            shared, low, high = paired_intervals(values, mask, counts, min_shared)
            with np.errstate(invalid="ignore"):
                above, below = low > 0, high < 0
        else:
            shared, above, below = paired_signs(values, mask, counts, min_shared)
    higher = np.array([e.direction == "higher" for e in have])[:, None]
    first_wins = np.where(higher, above, below)  # mean(first - second) beyond 0 on first's side
    second_wins = np.where(higher, below, above)
    rows = np.arange(n)
    winner = np.where(first_wins, rows[:, None], np.where(second_wins, rows[None, :], -1))
    return PairedTable(names, shared, low, high, winner)


def compare(
    a: Entry, b: Entry, min_shared: int = int(RULES["min_shared_samples"]), ids: Sequence[str] | None = None
) -> Comparison:
    """Paired comparison of ``a`` and ``b`` (same track and metric) on their shared samples: the
    two-explainer case of :func:`paired_table`, so ``compare(a, b)`` and ``compare(b, a)`` agree.

    The resample is of ``ids``, by default the union of the two entries' sample ids; it agrees
    with :func:`rank_metric`, whose resample is of the union over all the metric's explainers,
    whenever those list the same ids (every explainer run on the track's samples), else pass
    that union (:func:`resample_ids`) as ``ids``.
    """
    if a.samples is None or b.samples is None:
        return Comparison(0, None)
    return paired_table([a, b], min_shared, ids).comparison(a.explainer, b.explainer)


def rank_metric(
    entries: Sequence[Entry], min_shared: int = int(RULES["min_shared_samples"])
) -> dict[str, tuple[int | None, str]]:
    """Rank and status of each explainer on one (track, metric): rank = 1 + number of explainers
    that beat it in a paired comparison (:func:`paired_table`, one shared resample). Status ``""``
    when ranked, else why not. ``entries`` are the methods (references left out by the caller):
    with fewer than :data:`MIN_RANKED` of them having per-sample values, none is ranked
    (:data:`TOO_FEW_METHODS`), so a metric only one file reports makes nobody "#1 of 1"."""
    out: dict[str, tuple[int | None, str]] = {e.explainer: (None, NO_SAMPLES) for e in entries if e.samples is None}
    have = sorted((e for e in entries if e.samples is not None), key=lambda e: e.explainer)
    valued = [e for e in have if any(v is not None for v in e.samples.values())]  # type: ignore[union-attr]
    if len(valued) < MIN_RANKED:  # nobody to compare with: a rank of one is no rank
        out.update((e.explainer, (None, TOO_FEW_METHODS)) for e in have)
        return out
    table = paired_table(have, min_shared, bounds=False)
    n = len(have)
    upper = np.triu(np.ones((n, n), dtype=bool), 1)
    wins = upper & (table.winner >= 0)
    losers = np.where(table.winner == np.arange(n)[:, None], np.arange(n)[None, :], np.arange(n)[:, None])
    beaten = np.bincount(losers[wins], minlength=n)
    others = table.shared.copy()
    np.fill_diagonal(others, 0)
    most_shared = others.max(axis=1)
    for k, e in enumerate(have):
        shared = int(most_shared[k])
        ranked = shared >= min_shared
        out[e.explainer] = (1 + int(beaten[k]), "") if ranked else (None, f"too few samples (n = {shared})")
    return out


def rank_by_mean(scores: dict[str, float]) -> dict[str, int]:
    """Competition ranks of mean ranks (lower is better); equal scores tie."""
    ordered = sorted(scores.items(), key=lambda kv: (kv[1], kv[0]))
    ranks: dict[str, int] = {}
    for position, (name, score) in enumerate(ordered, start=1):
        previous = ordered[position - 2] if position > 1 else None
        ranks[name] = ranks[previous[0]] if previous and abs(previous[1] - score) < 1e-12 else position
    return ranks


# ----------------------------------------------------------------------------- families


def _short(x: float, threshold: float) -> str:
    text = f"{x:.2f}"
    return text if float(text) < threshold else f"{x:.4g}"


def perceptual_validity(entries: Iterable[Entry], rules: Rules = RULES) -> tuple[bool, str | None, str | None]:
    """``(ranked, reason, label)`` of a track's perceptual family from its ranking blocks' params.

    Valid when every perceptual ranking block is labelled ``PASTA`` or reports a held-out
    technique-level Q1 Spearman of at least ``perceptual_min_spearman``."""
    threshold = float(rules["perceptual_min_spearman"])
    labels: list[str] = []
    reason: str | None = None
    blocks = [e for e in entries if policy_of(e.family).needs_validity]
    for e in sorted(blocks, key=lambda e: (e.explainer, e.metric)):
        label = e.params.get("label")
        if isinstance(label, str) and label not in labels:
            labels.append(label)
        if not e.ranking or e.metric in NEVER_RANKED or reason is not None or label == PASTA_LABEL:
            continue
        rho = _num(e.params.get("heldout_q1_spearman"))
        if rho is not None and rho >= threshold:
            continue
        who = (
            "proxy checkpoint"
            if isinstance(label, str) and "proxy" in label.lower()
            else "checkpoint not labelled PASTA"
        )
        shown = "not reported" if rho is None else f"{_short(rho, threshold)} < {threshold:g}"
        reason = f"{who}, held-out Q1 technique-level Spearman {shown}"
    return reason is None, reason, "; ".join(labels) or None


def _metric_row(e: Entry, rank: int | None, status: str, label: str, flags: str) -> BoardRow:
    return {
        "track": e.track,
        "explainer": e.explainer,
        "metric": e.metric,
        "family": e.family,
        "direction": e.direction,
        "value": e.value,
        "ci_low": e.ci_low,
        "ci_high": e.ci_high,
        "n": e.n,
        "n_na": e.n_na,
        "rank": rank,
        "status": status,
        "label": label,
        "flags": flags,
    }


def _rank_row(
    track: str,
    explainer: str,
    metric: str,
    family: str,
    value: float | None,
    rank: int | None,
    *,
    status: str,
    label: str = "",
    flags: str = "",
) -> BoardRow:
    """A ``rank:<family>`` or ``rank:overall`` row: its value is a mean rank (lower is better)."""
    return {
        "track": track,
        "explainer": explainer,
        "metric": metric,
        "family": family,
        "direction": "lower",
        "value": value,
        "ci_low": None,
        "ci_high": None,
        "n": None,
        "n_na": None,
        "rank": rank,
        "status": status,
        "label": label,
        "flags": flags,
    }


def na_flag(n: int, n_na: int, rules: Rules = RULES) -> str | None:
    """``"n/a P %"`` when more than ``na_flag_fraction`` of the samples are n/a, else None."""
    total = n + n_na
    if total <= 0 or n_na / total <= float(rules["na_flag_fraction"]):
        return None
    return f"n/a {round(100 * n_na / total)} %"


def scores_known_answer(e: Entry) -> bool:
    """Whether ``e`` scores maps against a known answer on its track: a ranking metric of a
    known-answer family (a row with ``known_answer``, :mod:`xaibench.families`) with values (it is
    n/a wherever the samples carry no known answer). The one test of a mechanism track, for the
    board and for meta-evaluation (DESIGN 11)."""
    return policy_of(e.family).known_answer != "" and e.ranking and e.n > e.n_na


def known_answer_diagnosis(entries: Sequence[Entry]) -> dict[str, str]:
    """family -> why it is a diagnosis, on a track scored against a known answer (DESIGN 11): where
    a ranking metric of a known-answer family has values (:func:`scores_known_answer`; n/a on
    samples without a known answer, so on every ordinary track), every other counted family is
    shown and ranked within itself but leaves the overall rank, with that row's reason; elsewhere
    nothing."""
    known = next((e.family for e in entries if scores_known_answer(e)), None)
    if known is None:
        return {}
    reason = policy_of(known).known_answer
    return {p.name: reason.format(family=p.name) for p in POLICIES if p.counted_overall and p.name != known}


def rank_track(
    track: str,
    entries: Sequence[Entry],
    rules: Rules = RULES,
    invalid: Mapping[str, str] | None = None,
    *,
    references: Collection[str] = (),
    diagnosis: Mapping[str, str] | None = None,
) -> TrackRanking:
    """Rows of one track: metric rows, then ``rank:<family>`` and ``rank:overall`` rows.
    ``invalid``: metric -> status of the metrics meta-evaluation found invalid on the track
    (:mod:`xaibench.publish.gate`): shown with that status, outside every rank.
    ``references``: explainer keys that are references, not methods (``oracle``, ``planted``,
    ``ladder``, anything disclosed ``reference_only``): shown with :data:`REFERENCE_STATUS`, never
    ranked, and left out of the comparisons that rank the methods (DESIGN 10).
    ``diagnosis``: family -> why it is a diagnosis on this track (the model relies on a planted cue,
    so alignment to the object is no evidence of a faithful map): its metrics and family rank rows
    are shown, ranked among the methods, but the family leaves the overall rank."""
    min_shared = int(rules["min_shared_samples"])
    explainers = sorted({e.explainer for e in entries})
    refs = frozenset(references)
    diagnosis = {**known_answer_diagnosis(entries), **(diagnosis or {})}
    by_metric: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        by_metric[e.metric].append(e)
    perceptual_ok, perceptual_reason, perceptual_label = perceptual_validity(entries, rules)

    flags: dict[str, list[str]] = {x: [] for x in explainers}
    for e in entries:
        if insensitive(e, rules) and INSENSITIVE not in flags[e.explainer]:
            flags[e.explainer].append(INSENSITIVE)

    rows: list[BoardRow] = []
    family_ranks: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    family_status: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    ref_members: dict[str, set[str]] = defaultdict(set)  # references with a ranking metric of the family
    for metric in sorted(by_metric, key=lambda m: (family_index(by_metric[m][0].family), m)):
        group = by_metric[metric]
        ranks: dict[str, tuple[int | None, str]]
        policy = policy_of(group[0].family)
        gated = (invalid or {}).get(metric)
        ranked = gated is None and all(e.ranking for e in group) and metric not in NEVER_RANKED
        methods = [e for e in group if e.explainer not in refs]
        if gated is not None:
            ranks = {e.explainer: (None, gated) for e in group}
        elif ranked and policy.ranked_within and (not policy.needs_validity or perceptual_ok):
            ranks = rank_metric(methods, min_shared) if methods else {}
        elif ranked and policy.ranked_within:  # the checkpoint is not valid
            ranks = {e.explainer: (None, f"not ranked: {perceptual_reason}") for e in group}
        else:
            ranks = {e.explainer: (None, policy.unranked_status) for e in group}
        ranks.update({e.explainer: (None, REFERENCE_STATUS) for e in group if e.explainer in refs})
        for e in sorted(group, key=lambda e: e.explainer):
            rank, status = ranks[e.explainer]
            cell_flags = [f for f in (na_flag(e.n, e.n_na, rules),) if f]
            if insensitive(e, rules):
                cell_flags.append(INSENSITIVE)
            label = (perceptual_label or "") if policy_of(e.family).needs_validity else ""
            rows.append(_metric_row(e, rank, status, label, "; ".join(cell_flags)))
            if ranked and policy_of(e.family).ranked_within and e.explainer in refs:
                ref_members[e.family].add(e.explainer)
            elif ranked and policy_of(e.family).ranked_within:
                if rank is not None:
                    family_ranks[e.family][e.explainer].append(rank)
                else:
                    family_status[e.family][e.explainer].add(status)

    families: dict[str, FamilyVerdict] = {}
    present = sorted({e.family for e in entries}, key=family_index)
    family_scores: dict[str, dict[str, float]] = {}
    for family in present:
        policy = policy_of(family)
        label = perceptual_label if policy.needs_validity else None
        if not policy.ranked_within:
            families[family] = {"ranked": False, "reason": policy.unranked_reason, "label": label}
            continue
        members = sorted(set(family_ranks[family]) | set(family_status[family]))
        if not members:  # the family has no ranking metric on this track
            families[family] = {"ranked": False, "reason": "no ranking metric", "label": label}
            continue
        if policy.needs_validity and not perceptual_ok:
            families[family] = {"ranked": False, "reason": perceptual_reason, "label": label}
            status, shown = f"not ranked: {perceptual_reason}", label or ""
            for x in members:
                rows.append(_rank_row(track, x, f"rank:{family}", family, None, None, status=status, label=shown))
            for x in sorted(ref_members[family]):
                rows.append(_rank_row(track, x, f"rank:{family}", family, None, None, status=REFERENCE_STATUS))
            continue
        scores = {x: sum(r) / len(r) for x, r in family_ranks[family].items() if r}
        ranks_of = rank_by_mean(scores)
        if scores and family in diagnosis:  # shown and ranked among methods, out of the overall rank
            families[family] = {"ranked": False, "reason": diagnosis[family], "label": label}
        elif scores:
            if policy.counted_overall:  # robustness is ranked within itself only (DESIGN 3b)
                family_scores[family] = scores
            families[family] = {"ranked": True, "reason": None, "label": label}
        else:
            families[family] = {
                "ranked": False,
                "reason": _why_not(set().union(*family_status[family].values())).removeprefix("not ranked: "),
                "label": label,
            }
        for x in members:
            status = "" if x in scores else _why_not(family_status[family][x])
            if x in scores and family in diagnosis:
                status = DIAGNOSIS_STATUS
            value, rank = scores.get(x), ranks_of.get(x)
            rows.append(_rank_row(track, x, f"rank:{family}", family, value, rank, status=status, label=label or ""))
        for x in sorted(ref_members[family]):
            rows.append(_rank_row(track, x, f"rank:{family}", family, None, None, status=REFERENCE_STATUS, label=""))

    overall: dict[str, float] = {}
    for x in explainers:
        mine = [s[x] for s in family_scores.values() if x in s]
        if mine:
            overall[x] = sum(mine) / len(mine)
    overall_ranks = rank_by_mean(overall)
    for x in explainers:
        eligible = [
            p.name
            for p in POLICIES
            if p.counted_overall
            and p.name in family_status
            and (not p.needs_validity or perceptual_ok)
            and p.name not in diagnosis
        ]
        statuses = set().union(*(family_status[f][x] for f in eligible))
        status = "" if x in overall else _why_not(statuses or {"not ranked: no ranked family"})
        if x in refs:
            status = REFERENCE_STATUS
        value, rank, mine = overall.get(x), overall_ranks.get(x), "; ".join(flags[x])
        rows.append(_rank_row(track, x, "rank:overall", "overall", value, rank, status=status, flags=mine))
    for row in rows:  # explainer flags also on its family rank rows
        if row["metric"].startswith("rank:") and row["metric"] != "rank:overall" and flags[row["explainer"]]:
            row["flags"] = "; ".join(flags[row["explainer"]])
    return TrackRanking(rows=rows, families=families, flags=flags)


def _why_not(statuses: set[str]) -> str:
    """One status for a family/overall row without a rank, from its metrics' statuses."""
    statuses = {s for s in statuses if s}
    if len(statuses) == 1:
        only = next(iter(statuses))
        return only if only.startswith("not ranked") else f"not ranked: {only}"
    if statuses and all(s.startswith("too few samples") for s in statuses):
        return "not ranked: too few samples"
    return "not ranked: no ranked metric"


def leaderboard_rows(entries: Sequence[Entry], rules: Rules = RULES) -> list[BoardRow]:
    """Tidy rows (DESIGN 8) of every track: one per (track, explainer, metric) plus
    ``rank:<family>`` and ``rank:overall`` rows, with the extra columns status, label, flags."""
    by_track: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        by_track[e.track].append(e)
    return [row for track in sorted(by_track) for row in rank_track(track, by_track[track], rules).rows]


# ----------------------------------------------------------------------------- across tracks


def win_rates(rows: Iterable[BoardRow]) -> WinRates:
    """Mean win rate (HELM style) from the ``rank:overall`` rows.

    On a track, an explainer's win rate is (others with a strictly worse overall rank + 0.5 x
    others tied) / others, over the other explainers with an overall rank there (higher is
    better, in [0, 1]); the mean is over the tracks where it has a rank and at least one other
    explainer is ranked. ``order`` sorts by mean win rate (descending), then key."""
    ranks: dict[str, dict[str, int]] = defaultdict(dict)
    everyone: set[str] = set()
    for r in rows:
        if r["metric"] == "rank:overall":
            everyone.add(r["explainer"])
            if r["rank"] is not None:
                ranks[r["track"]][r["explainer"]] = int(r["rank"])
    rates: dict[str, list[float]] = defaultdict(list)
    for on_track in ranks.values():
        if len(on_track) < 2:
            continue
        for x, mine in on_track.items():
            others = [r for y, r in on_track.items() if y != x]
            wins = sum(1 for r in others if r > mine) + 0.5 * sum(1 for r in others if r == mine)
            rates[x].append(wins / len(others))
    explainers: dict[str, ExplainerWinRate] = {
        x: {
            "mean_win_rate": sum(rates[x]) / len(rates[x]) if rates[x] else None,
            "tracks": len(rates[x]),
            "overall_ranks": {t: on_track[x] for t, on_track in sorted(ranks.items()) if x in on_track},
        }
        for x in sorted(everyone)
    }
    order = sorted(
        explainers, key=lambda x: (explainers[x]["mean_win_rate"] is None, -(explainers[x]["mean_win_rate"] or 0.0), x)
    )
    return {"explainers": explainers, "order": order}


# ----------------------------------------------------------------------------- from submissions


def entries_from_submissions(submissions: Iterable[Submission | tuple[Path, SubmissionData]]) -> list[Entry]:
    """One entry per (file, track, metric); the explainer key is the file's stem."""
    entries: list[Entry] = []
    for item in submissions:
        sub = Submission.of(item)
        for track_name, track in sub.data["tracks"].items():
            metrics = track.get("metrics", {}) if isinstance(track, dict) else {}
            for metric_id, m in (metrics if isinstance(metrics, dict) else {}).items():
                if not isinstance(m, dict):
                    continue
                samples = _sample_values(track, m)
                params = m.get("params")
                entries.append(
                    Entry(
                        track=str(track_name),
                        explainer=sub.key,
                        metric=str(metric_id),
                        family=str(m.get("family", DEFAULT_FAMILY)),
                        direction=str(m.get("direction", "higher")),
                        ranking=bool(m.get("ranking", False)),
                        value=_num(m.get("mean")),
                        ci_low=_num(m.get("ci_low")),
                        ci_high=_num(m.get("ci_high")),
                        n=_count(m.get("n")),
                        n_na=_count(m.get("n_na")),
                        samples=samples,
                        params=params if isinstance(params, dict) else {},
                    )
                )
    return entries


def _sample_values(track: Mapping[str, object], m: Mapping[str, object]) -> Mapping[str, float | None] | None:
    """A metric's per-sample values (``/1`` map or ``/2`` arrays) as :class:`SampleValues`;
    ``None`` when absent or unreadable (validation reports those)."""
    try:
        got = metric_values(track, m)
    except ValueError:  # a value that is not a number: n/a for that sample, as before
        try:
            samples = per_sample(track, m)
        except ValueError:
            return None
        return {str(k): _num(v) for k, v in samples.items()} if samples is not None else None
    return None if got is None else SampleValues(*got)


def _count(x: object) -> int:
    return x if isinstance(x, int) and not isinstance(x, bool) and x >= 0 else 0


def resolve_duplicates(submissions: Sequence[Submission]) -> list[Submission]:
    """The submissions, checked to be one per explainer name and parameters, with names that do
    not look alike (:func:`xaibench.publish.identity.check_submissions`): two files for one
    explainer and parameters are an error naming both, whatever their ``created`` dates (a
    file's date is its own claim: a later one no longer supersedes an earlier one). Returns the
    submissions unchanged."""
    check_submissions(submissions)
    return list(submissions)


# ----------------------------------------------------------------------------- display labels

LABEL_MAX_PARAMS = 3
"""At most this many parameters in a variant's label; more are shown as ``…``."""
LABEL_MAX_VALUE = 24
"""Characters of one parameter value in a label; a longer value is cut with ``…``."""


def _short_value(value: JsonValue) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)
    return text if len(text) <= LABEL_MAX_VALUE else text[: LABEL_MAX_VALUE - 1] + "…"


def _param_label(name: str, params: Mapping[str, JsonValue], keys: Sequence[str]) -> str:
    shown = [f"{k}={_short_value(params[k])}" for k in keys[:LABEL_MAX_PARAMS]]
    shown += ["…"] if len(keys) > LABEL_MAX_PARAMS else []
    return f"{name} ({', '.join(shown)})" if shown else name


def _is_variant(key: str, block: ExplainerBlock) -> bool:
    """A parameter variant's file is named ``<name>@<params digest>`` (see ``submission_filename``)."""
    digest = block.get("params_digest")
    return "@" in key and (not isinstance(digest, str) or key.endswith("@" + digest))


def explainer_labels(blocks: Mapping[str, ExplainerBlock]) -> dict[str, str]:
    """Display label of each explainer key (file stem -> the submission's ``explainer`` block).

    The label is the explainer's name; a parameter variant (a file ``<name>@<digest>``) adds
    the parameters that set it apart, e.g. ``zennit-lrp (epsilon=0.25)``: those differing from
    the default-parameter file of the same name on the board, else those differing among the
    variants of that name, else all its parameters (at most :data:`LABEL_MAX_PARAMS`, values cut
    at :data:`LABEL_MAX_VALUE` characters). A label two keys would share falls back to the key,
    so labels stay unique; the key (with its digest) stays the identifier in rows, CSV and JSON.
    """
    by_name: dict[str, list[str]] = defaultdict(list)
    for key, block in blocks.items():
        by_name[str(block.get("name", key))].append(key)
    labels: dict[str, str] = {}
    for name, keys in by_name.items():
        params = {k: p if isinstance(p := blocks[k].get("params"), dict) else {} for k in keys}
        plain = [k for k in keys if not _is_variant(k, blocks[k])]
        reference = params[plain[0]] if len(plain) == 1 else None
        for key in keys:
            if key in plain:
                labels[key] = name if key == name or len(plain) == 1 else key
                continue
            mine = params[key]
            if reference is not None:
                differ = [p for p in mine if p not in reference or reference[p] != mine[p]]
            else:
                others = [params[k] for k in keys if k != key]
                differ = [p for p in mine if any(p not in o or o[p] != mine[p] for o in others)]
            labels[key] = _param_label(name, mine, differ or list(mine)) if mine else key
    counts: dict[str, int] = defaultdict(int)
    for label in labels.values():
        counts[label] += 1
    return {k: label if counts[label] == 1 else k for k, label in labels.items()}
