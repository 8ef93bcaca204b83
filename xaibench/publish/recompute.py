"""A submission's summary numbers checked against its own per-sample values.

``xaibench run`` writes, for each (track, metric), the per-sample values (``/2``: ``values``
against the track's ``sample_ids``; ``/1``: ``samples``; validation hands either to
:func:`summary_errors` as the ``samples`` map) and the summary the leaderboard shows: ``n``,
``n_na``, ``na_reasons``, ``mean`` and the 95 % interval (:func:`xaibench.stats.summarise`).
A file edited by hand can claim a mean its values do not have; this module recomputes the summary
and says what differs, one message per finding.

Rules (docs/submitting.md):

- every number of a metric summary (``mean``, ``ci_low``, ``ci_high``, each per-sample value) is
  finite and at most :data:`MAX_MAGNITUDE` in size, so a difference of two values, a sum of
  values or a square of one stays finite (1e100 + 1e100 and 1e100 ** 2 = 1e200 are far below
  the float limit 1.8e308);
- ``mean`` equals the mean of the values within :data:`RELATIVE_TOLERANCE` times the mean's own
  size (at least 1). The mean is recomputed exactly rounded (:func:`math.fsum`), so values that
  cancel (``+1e100``, ``-1e100``) cannot hide a claimed mean: a tolerance that grew with the
  largest value (as it once did) let such a file claim any mean. A mean written by
  ``numpy`` (pairwise summation) of values that do not cancel catastrophically lies far within
  that tolerance;
- ``na_reasons`` counts add up to ``n_na`` (the runner keeps the :data:`NA_REASONS_KEPT`
  commonest reasons, so with that many they may add up to less);
- with the run ``seed`` recorded, ``[ci_low, ci_high]`` is the seeded bootstrap the runner draws,
  within the same tolerance: in a file whose ``intervals`` is ``shared-resample/1``
  (:data:`xaibench.stats.INTERVAL_RULE`, written since issue 28), the track's shared resample
  (:func:`xaibench.stats.shared_intervals` over the per-sample values in their order, n/a
  included, seed :func:`xaibench.stats.interval_seed` of the run seed and the track); in a file
  without it (written earlier), :func:`xaibench.stats.bootstrap_ci` of the values, seed
  ``derive_seed(seed, "bootstrap", "TRACK/EXPLAINER/METRIC")``. Without a seed, the interval
  contains the mean and lies between the smallest and the largest value (as every percentile
  bootstrap interval of a mean does). Interval ends are compared within
  :data:`RELATIVE_TOLERANCE` times their own size (at least 1), and against the smallest and
  largest values within that times those values' size.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from xaibench.publish.sample_values import SampleValues
from xaibench.seeds import derive_seed
from xaibench.stats import INTERVAL_RULE, bootstrap_ci, interval_seed, shared_intervals

MAX_MAGNITUDE = 1e100
"""Largest size of a number in a metric summary or a per-sample value."""
RELATIVE_TOLERANCE = 1e-9
"""How far a recorded mean or interval end may lie from the recomputed one, relative to that
number's own size (at least 1): never to the largest value's, which a hostile file sets."""
NA_REASONS_KEPT = 5
"""How many n/a reasons the runner keeps (the commonest)."""


def bad_number(value: Any) -> str | None:
    """Why ``value`` (a number) cannot be a summary number or a per-sample value, else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None  # the schema reports the type
    if isinstance(value, float) and not math.isfinite(value):
        return f"is {value}, not a finite number"
    if abs(value) > MAX_MAGNITUDE:
        return f"{_num(value)} is larger in size than {MAX_MAGNITUDE:g} (the bound of a metric value)"
    return None


def _num(x: float) -> str:
    return f"{x:.6g}"


def _pair(a: float, b: float) -> tuple[str, str]:
    """Two numbers shown so that they differ when they differ."""
    short = _num(a) != _num(b) or abs(a - b) <= RELATIVE_TOLERANCE * max(1.0, abs(b))
    return (_num(a), _num(b)) if short else (repr(float(a)), repr(float(b)))


def track_intervals(blocks: list[Mapping[str, Any]], seed: Any, track: str) -> dict[int, tuple[float, float]]:
    """The shared-resample intervals (:data:`INTERVAL_RULE`) of the metric blocks of one track
    whose ``samples`` are :class:`SampleValues`, by index in ``blocks``: one
    :func:`~xaibench.stats.shared_intervals` call for all blocks with the same number of ids (the
    resample depends only on that number and the seed), not one per block. ``{}`` for a seed that
    is not an integer. Pass each to :func:`summary_errors` as ``interval``."""
    if not isinstance(seed, int) or isinstance(seed, bool):
        return {}
    by_length: dict[int, list[int]] = {}
    for k, m in enumerate(blocks):
        samples = m.get("samples")
        if isinstance(samples, SampleValues):
            by_length.setdefault(len(samples.array), []).append(k)
    out: dict[int, tuple[float, float]] = {}
    for rows in by_length.values():
        values = np.stack([blocks[k]["samples"].array for k in rows])
        low, high = shared_intervals(values, interval_seed(seed, track))
        out.update((k, (float(lo), float(hi))) for k, lo, hi in zip(rows, low, high, strict=True))
    return out


def summary_errors(
    where: str,
    label: str,
    m: Mapping[str, Any],
    seed: Any,
    *,
    rule: Any = None,
    track: str = "",
    interval: tuple[float, float] | None = None,
) -> Iterator[tuple[str, str]]:
    """``(key, message)`` of every summary number of metric block ``m`` that is not finite, too
    large, or differs from what its per-sample values give. ``where`` names the track, the metric
    and the explainer (``"track shapes, metric iou, explainer gradient"``), ``label`` is the
    runner's bootstrap label (``"shapes/gradient/iou"``), ``seed`` the file's run seed, ``rule``
    its ``intervals`` (see the module doc) and ``track`` the track's name; ``key`` is the block's
    key the finding is about (``samples/<id>`` for one value). ``interval``: the block's interval
    under the shared-resample rule when the caller computed it already (:func:`track_intervals`)."""
    bad = False
    for key in ("mean", "ci_low", "ci_high"):
        why = bad_number(m.get(key))
        if why is not None:
            bad = True
            yield key, f"{where}: {key} {why}"
    samples = m.get("samples")
    if isinstance(samples, SampleValues):  # a /2 file's values, already checked finite and in bounds
        values: Any = samples.array[~np.isnan(samples.array)]
    elif isinstance(samples, dict):
        values = []
        for sample_id, value in samples.items():
            why = bad_number(value)
            if why is not None:
                yield f"samples/{sample_id}", f"{where}: per-sample value of {sample_id!r} {why}"
                return
            if isinstance(value, int | float) and not isinstance(value, bool):
                values.append(float(value))
    else:
        return
    yield from _na_reason_errors(where, m)
    if bad or len(values) != m.get("n"):
        return  # the count mismatch is reported by the caller
    if len(values) == 0:
        for key in ("ci_low", "ci_high"):
            if m.get(key) is not None:
                yield key, f"{where}: {key} is set but there is no per-sample value"
        return
    smallest, largest = float(np.min(values)), float(np.max(values))
    mean, recomputed = m.get("mean"), exact_mean(values)
    if isinstance(mean, int | float) and abs(mean - recomputed) > _tolerance(recomputed):
        shown, actual = _pair(mean, recomputed)
        yield "mean", f"{where}: mean {shown} but its {len(values)} per-sample values average {actual}"
        return
    low, high = m.get("ci_low"), m.get("ci_high")
    if not isinstance(low, int | float) or not isinstance(high, int | float):
        return  # no interval to check (the board then shows none)
    if not low - _tolerance(low) <= recomputed <= high + _tolerance(high):
        return  # the caller reports an interval that does not contain the mean
    if isinstance(seed, int) and not isinstance(seed, bool):
        if rule == INTERVAL_RULE and interval is not None:
            want = interval
        elif rule == INTERVAL_RULE:  # over every id in order, n/a (NaN) included
            row = (
                samples.array
                if isinstance(samples, SampleValues)
                else np.array([_value_or_nan(v) for v in samples.values()], dtype=np.float64)
            )
            (lo,), (hi,) = shared_intervals(row[None], interval_seed(seed, track))
            want = (float(lo), float(hi))
        else:
            want = bootstrap_ci(values, derive_seed(seed, "bootstrap", label))
        off_low, off_high = abs(low - want[0]) > _tolerance(want[0]), abs(high - want[1]) > _tolerance(want[1])
        if off_low or off_high:
            (low_s, want_low), (high_s, want_high) = _pair(low, want[0]), _pair(high, want[1])
            yield (
                "ci_low" if off_low else "ci_high",
                f"{where}: interval [{low_s}, {high_s}] but the seeded bootstrap of its {len(values)} "
                f"per-sample values (seed {seed}) gives [{want_low}, {want_high}]",
            )
    elif low < smallest - _tolerance(smallest) or high > largest + _tolerance(largest):
        yield (
            "ci_low",
            f"{where}: interval [{_num(low)}, {_num(high)}] reaches beyond its per-sample values "
            f"[{_num(smallest)}, {_num(largest)}]",
        )


def exact_mean(values: Any) -> float:
    """The mean of ``values`` (finite floats) from their exactly rounded sum (:func:`math.fsum`):
    no cancellation error, whatever their sizes and order."""
    items = values.tolist() if isinstance(values, np.ndarray) else list(values)
    return math.fsum(items) / len(items)


def _tolerance(x: float) -> float:
    """How far a recorded number may lie from ``x`` (recomputed): relative to ``x``'s own size."""
    return RELATIVE_TOLERANCE * max(1.0, abs(float(x)))


def _value_or_nan(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan


def _na_reason_errors(where: str, m: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    reasons = m.get("na_reasons")
    if not isinstance(reasons, dict) or not isinstance(m.get("n_na"), int):
        return
    total, n_na = sum(v for v in reasons.values() if isinstance(v, int)), m["n_na"]
    if total > n_na or (total < n_na and len(reasons) < NA_REASONS_KEPT):
        yield "na_reasons", f"{where}: na_reasons count {total} n/a but n_na = {n_na}"
