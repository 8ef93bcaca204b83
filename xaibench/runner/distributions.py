"""Per-metric distributions and mean curves of per-sample records, for summaries and the site.

A run summary (and so a submission) keeps, besides the mean and interval of each metric, a
histogram of the per-sample values and, for metrics whose records carry a curve of
``fraction`` vs ``probability`` (deletion, insertion) or ``fraction`` vs ``value``
(``model_randomisation``: the Spearman correlation after each randomised block), the mean curve
over samples. These are descriptive only: ranks never use them.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

HIST_BINS = 20
DECIMALS = 6


def histogram(values: Sequence[float], bins: int = HIST_BINS) -> dict[str, Any] | None:
    """Counts of the finite ``values`` in ``bins`` equal bins, with five quantiles.

    The range is [0, 1] when every value lies in it (most scores, so histograms of different
    explainers share their bins), else [min, max] of the values (a single value ``v``
    gets [v - 0.5, v + 0.5]). Returns ``None`` when there is no finite value.
    ``edges`` has ``bins + 1`` entries; ``quantiles`` are min, 25 %, median, 75 %, max.

    Any finite values give a valid histogram (edges finite and increasing once rounded, counts
    adding up to the values): where that rule's bins cannot be made (a value of 1e200, whose
    ±0.5 is lost to rounding; values a millionth apart, whose edges round to one; a span beyond
    float range) the range is widened around the values until they can, and when even that
    fails (values near the largest float) there is no histogram (``None``): it is descriptive only.
    """
    arr = np.asarray([v for v in values if v is not None], dtype=np.float64)
    arr = arr[np.isfinite(arr)]
    if arr.size == 0:
        return None
    lo, hi = float(arr.min()), float(arr.max())
    if lo >= 0.0 and hi <= 1.0:
        lo, hi = 0.0, 1.0
    elif hi - lo <= 1e-12 * max(1.0, abs(hi)):
        lo, hi = lo - 0.5, hi + 0.5
    with np.errstate(all="ignore"):
        out = _histogram(arr, bins, (lo, hi))
        if out is None:  # widened: half-width at least 0.5, a millionth of the values' magnitude, half their span
            centre = lo / 2 + hi / 2
            half = max(hi / 2 - lo / 2, 0.5, 1e-6 * max(abs(lo), abs(hi)))
            out = _histogram(arr, bins, centre + half * np.linspace(-1.0, 1.0, bins + 1))
    return out


def _histogram(arr: np.ndarray, bins: int, given: tuple[float, float] | np.ndarray) -> dict[str, Any] | None:
    """:func:`histogram` of ``arr`` on ``bins`` equal bins over the range ``(lo, hi)``, or on the
    edges ``given``; ``None`` when numpy cannot make them or the result would not be valid."""
    try:
        if isinstance(given, tuple):
            counts, edges = np.histogram(arr, bins=bins, range=given)
        else:
            counts, edges = np.histogram(arr, bins=given)
    except (ValueError, OverflowError, FloatingPointError):
        return None
    rounded = _round(edges)
    if (
        len(rounded) != bins + 1
        or not np.all(np.isfinite(rounded))
        or any(b <= a for a, b in itertools.pairwise(rounded))
        or int(counts.sum()) != arr.size
    ):
        return None
    quantiles = np.quantile(arr, [0.0, 0.25, 0.5, 0.75, 1.0])
    if not np.all(np.isfinite(quantiles)):  # interpolation beyond float range: the nearest values
        quantiles = np.quantile(arr, [0.0, 0.25, 0.5, 0.75, 1.0], method="nearest")
    if not np.all(np.isfinite(_round(quantiles))):
        return None
    return {
        "edges": rounded,
        "counts": [int(c) for c in counts],
        "quantiles": _round(quantiles),
    }


def mean_curve(curves: Iterable[dict[str, Any] | None]) -> dict[str, Any] | None:
    """Mean of per-sample ``{"fraction": [...], "probability": [...]}`` curves (the y key may be
    ``"value"`` instead of ``"probability"``; a curve with both uses ``"probability"``).

    Curves on another fraction grid than the most common one are linearly interpolated onto
    it. Returns ``{"fraction", "mean", "q25", "q75", "n"}`` (``q25``/``q75``: the interquartile
    band across samples at each fraction; ``n``: curves averaged) or ``None`` without curves.
    """
    usable: list[tuple[np.ndarray, np.ndarray]] = []
    for curve in curves:
        if not isinstance(curve, dict):
            continue
        x, y = curve.get("fraction"), curve.get("probability", curve.get("value"))
        if not isinstance(x, list) or not isinstance(y, list) or len(x) != len(y) or len(x) < 2:
            continue
        xa, ya = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
        if np.all(np.isfinite(xa)) and np.all(np.isfinite(ya)):
            usable.append((xa, ya))
    if not usable:
        return None
    grid_key, _ = Counter(tuple(x.tolist()) for x, _ in usable).most_common(1)[0]
    grid = np.asarray(grid_key)
    stack = np.stack(
        [y if x.shape == grid.shape and np.array_equal(x, grid) else np.interp(grid, x, y) for x, y in usable]
    )
    return {
        "fraction": _round(grid),
        "mean": _round(stack.mean(axis=0)),
        "q25": _round(np.quantile(stack, 0.25, axis=0)),
        "q75": _round(np.quantile(stack, 0.75, axis=0)),
        "n": len(usable),
    }


def distribution_summary(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``{"histogram": ..., "curve": ...}`` of one metric's records (keys only when available)."""
    out: dict[str, Any] = {}
    hist = histogram([r["value"] for r in records if r.get("value") is not None])
    if hist is not None:
        out["histogram"] = hist
    curve = mean_curve(r.get("curve") for r in records if r.get("value") is not None)
    if curve is not None:
        out["curve"] = curve
    return out


def _round(a: np.ndarray) -> list[float]:
    return [round(float(v), DECIMALS) for v in np.asarray(a, dtype=np.float64)]
