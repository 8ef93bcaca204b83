"""What explaining costs, on a track's tables: the cost column's cells and the quality-against-cost plot.

Pure data for the templates (``_track.html.j2``'s cost column, ``_cost_plot.html.j2``'s SVG),
read from the board: the cost table (:attr:`~xaibench.publish.board.Leaderboard.cost`, from
each submission's ``cost`` block and ``environment``) and the ``rank:overall`` rows. Cost never
enters a rank; it is shown beside the ranks.

The plot, for one track: x is wall seconds per image (the submission's ``per_sample_seconds``)
on a log10 scale whose ticks are whole decades, faster to the left; y is the track's overall rank
(the integer of the table's Rank column, 1 = best at the top; tied explainers share it). One
point per ranked explainer, named. The Pareto front is the set of points that no other point
beats on both axes (as fast or faster and ranked as well or better, and strictly on one); it is
drawn as a line through those points in order of seconds. References (never ranked, DESIGN 10)
and methods without an overall rank are drawn apart, in a strip under the plot on the same x
axis; explainers whose file holds no cost figure are named under the plot. Positions are SVG
user units (pixels at the plot's natural size), with one decimal.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TypedDict

from xaibench.publish.board import Leaderboard, is_reference, label_of
from xaibench.publish.shapes import ExplainerCost
from xaibench.site.submitted import Submitted

MISSING = "–"
"""What a cost cell shows when the submission holds no cost figure (as every missing cell)."""
MIN_SECONDS = 1e-6
"""The smallest seconds per image the plot places: files round ``per_sample_seconds`` to 6
decimals, so a 0 there means under a microsecond (drawn at 1 µs, its title says so)."""

WIDTH = 560
LEFT, RIGHT, TOP = 52, 16, 12
RANK_STEP = 16
"""Vertical room per overall rank (user units); the plot area is between the limits below."""
MIN_PLOT_HEIGHT, MAX_PLOT_HEIGHT = 140, 640
STRIP_GAP, STRIP_HEIGHT = 10, 24
"""The strip of references and unranked methods under the plot area."""
BELOW = 34
"""Room under the plot (and strip) for the x ticks and the axis label."""
CHAR_WIDTH = 5.6
"""The width of a name's character at the plot's 10 px font (an estimate, user units): a name that
would run past the plot's right edge is written on its point's left instead."""


class CostCell(TypedDict):
    """One explainer's cost cell in a track's table."""

    text: str
    """Seconds per image (3 significant digits), :data:`MISSING` when the file has none."""
    sort: str
    """What the column sorts by: ``repr`` of the seconds, ``""`` when unknown."""
    memory: str
    """Peak memory above the baseline: ``RSS 88 MB``, ``GPU 120 MB`` (both on a GPU); ``""`` when unknown."""
    title: str
    """The tooltip: seconds, device, threads, measured images and memory in words."""


class Tick(TypedDict):
    at: float
    """Position on its axis (user units)."""
    text: str


class CostPoint(TypedDict):
    key: str
    name: str
    seconds: float
    """Seconds per image, as the submission gives it."""
    rank: int | None
    """The overall rank on the track (``None``: not ranked)."""
    reference: bool
    front: bool
    """On the Pareto front (ranked points only)."""
    x: float
    y: float
    label_x: float
    anchor: str
    """The name's ``text-anchor``: ``start`` (right of the point) or ``end`` (left of it)."""
    title: str


class CostPlot(TypedDict):
    title: str
    width: int
    height: int
    left: int
    top: int
    plot_width: int
    plot_height: int
    right: int
    """``left + plot_width``."""
    bottom: int
    """The lowest drawn row: the plot area's bottom, or the strip's when there is one."""
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    x_label: str
    y_label: str
    points: list[CostPoint]
    """The ranked explainers with a cost, best rank first."""
    front: str
    """The Pareto front as an SVG ``points`` list (``"x,y x,y"``), in order of seconds; ``""``
    when it is one point (marked as such, no line to draw)."""
    apart: list[CostPoint]
    """References and methods without an overall rank, drawn in the strip (``y`` is its middle)."""
    strip_top: float | None
    """The strip's top (``None``: no strip)."""
    strip_height: int
    no_cost: list[str]
    """Names of the explainers on the track without seconds per image (a file written before
    costs were kept, or no image of the track explained)."""
    devices: list[str]
    """The devices the plotted figures were measured on (cost compares only on one machine)."""


class CostView(TypedDict):
    cells: dict[str, CostCell]
    """Explainer key -> its cost cell, for every explainer on the track."""
    devices: list[str]
    """The devices the track's cost figures were measured on, as the submissions name them."""
    plot: CostPlot | None
    """``None`` when no explainer on the track has a cost figure."""


# ----------------------------------------------------------------------------- pure formulas


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points ``(seconds, rank)`` that no other point dominates (lower is better
    on both: another point dominates when it is no slower and no worse ranked, and differs),
    ordered by seconds, then rank. Two equal points are both on the front."""

    def dominated(p: tuple[float, float]) -> bool:
        return any(q[0] <= p[0] and q[1] <= p[1] and q != p for q in points)

    return sorted((i for i, p in enumerate(points) if not dominated(p)), key=lambda i: (points[i], i))


def decades(values: Sequence[float]) -> tuple[int, int]:
    """The whole decades ``(lo, hi)`` with ``10**lo <= min(values)`` and ``max(values) <= 10**hi``,
    ``hi > lo`` (values below :data:`MIN_SECONDS` count as it)."""
    logs = [math.log10(max(v, MIN_SECONDS)) for v in values]
    lo, hi = math.floor(min(logs)), math.ceil(max(logs))
    return lo, max(hi, lo + 1)


def log_x(seconds: float, lo: int, hi: int, left: float, width: float) -> float:
    """Where ``seconds`` lies on an axis from ``10**lo`` (at ``left``) to ``10**hi`` (at
    ``left + width``), log10 scale; below :data:`MIN_SECONDS` at that."""
    return left + width * (math.log10(max(seconds, MIN_SECONDS)) - lo) / (hi - lo)


def rank_y(rank: int, worst: int, top: float, height: float) -> float:
    """Where overall rank ``rank`` lies on an axis from 1 (at ``top``) to ``worst`` (at ``top +
    height``), linear; the middle when ``worst`` is 1."""
    return top + height / 2 if worst <= 1 else top + height * (rank - 1) / (worst - 1)


def decade_text(k: int) -> str:
    """``10**k`` seconds in words: ``1 µs`` ... ``100 µs``, ``1 ms`` ... ``100 ms``, ``1 s``, ``10 s``, ..."""
    if k >= 0:
        return f"{10**k} s"
    if k >= -3:
        return f"{10 ** (k + 3)} ms"
    if k >= -6:
        return f"{10 ** (k + 6)} µs"
    return f"1e{k} s"


def seconds_text(seconds: float) -> str:
    """Seconds with 3 significant digits and no exponent: ``0.00340``, ``12.3``, ``1234``."""
    if seconds <= 0:
        return "0"
    digits = max(0, 2 - math.floor(math.log10(seconds)))
    return f"{seconds:.{digits}f}"


def _mb(mb: float) -> str:
    return f"{mb:.1f} MB" if mb < 10 else f"{mb:.0f} MB"


# ----------------------------------------------------------------------------- views


def cost_cell(cost: ExplainerCost | None) -> CostCell:
    """The cost column's cell of one explainer (:data:`MISSING` for a file without cost figures)."""
    seconds = cost["per_sample_seconds"] if cost else None
    if cost is None or seconds is None:
        none = cost is not None and cost["measured"] == 0  # every image failed: nothing to measure
        title = "no image of this track was explained, so no cost" if none else "no cost recorded in this submission"
        return {"text": MISSING, "sort": "", "memory": "", "title": title}
    rss, dev = cost["peak_rss_mb"], cost["peak_device_mb"]
    memory = " · ".join(
        [*([f"RSS {_mb(rss)}"] if rss is not None else []), *([f"GPU {_mb(dev)}"] if dev is not None else [])]
    )
    device = cost["device"] or "an unnamed device"
    threads = cost["torch_threads"]
    words = [f"{seconds_text(seconds)} s per image (wall) on {device}"]
    words[0] += f", {threads} torch thread{'s' if threads != 1 else ''}" if threads is not None else ""
    if cost["measured"] is not None and cost["n_samples"] is not None:
        words.append(f"measured on {cost['measured']} of {cost['n_samples']} images")
    if rss is not None:
        words.append(f"peak memory {_mb(rss)} RSS above the worker's baseline")
    if dev is not None:
        words.append(f"peak device memory {_mb(dev)}")
    words.append("never ranked")
    return {"text": seconds_text(seconds), "sort": repr(seconds), "memory": memory, "title": "; ".join(words)}


def overall_ranks(board: Leaderboard, track: str) -> dict[str, int | None]:
    """Explainer key -> its overall rank on ``track`` (``None``: not ranked)."""
    return {r["explainer"]: r["rank"] for r in board.rows if r["track"] == track and r["metric"] == "rank:overall"}


def cost_view(board: Leaderboard, track: str, by_key: Mapping[str, Submitted]) -> CostView:
    """The cost cells of every explainer on ``track`` and its quality-against-cost plot."""
    costs = board.cost.get(track, {})
    keys = sorted({r["explainer"] for r in board.rows if r["track"] == track} | set(costs))
    return {
        "cells": {k: cost_cell(costs.get(k)) for k in keys},
        "devices": sorted({d for c in costs.values() if c["per_sample_seconds"] is not None and (d := c["device"])}),
        "plot": cost_plot(board, track, by_key, keys),
    }


def cost_plot(board: Leaderboard, track: str, by_key: Mapping[str, Submitted], keys: Sequence[str]) -> CostPlot | None:
    """The quality-against-cost plot of ``track`` (see the module doc); ``None`` without any cost."""
    costs = board.cost.get(track, {})
    ranks = overall_ranks(board, track)

    def name(k: str) -> str:
        sub = by_key.get(k)
        return sub.name if sub else label_of(board, k)

    def reference(k: str) -> bool:
        sub = by_key.get(k)
        info = board.explainers.get(k)
        return bool(sub.reference) if sub else info is not None and is_reference(info)

    seconds = {k: s for k in keys if (c := costs.get(k)) and (s := c["per_sample_seconds"]) is not None}
    if not seconds:
        return None
    ranked = sorted(
        (k for k in seconds if ranks.get(k) is not None and not reference(k)),
        key=lambda k: (ranks[k], seconds[k], k),
    )
    apart = sorted((k for k in seconds if k not in ranked), key=lambda k: (seconds[k], k))
    worst = max((ranks[k] or 1 for k in ranked), default=1)
    plot_h = min(max(RANK_STEP * (worst - 1), MIN_PLOT_HEIGHT), MAX_PLOT_HEIGHT)
    plot_w = WIDTH - LEFT - RIGHT
    strip_top = TOP + plot_h + STRIP_GAP if apart else None
    bottom = TOP + plot_h + (STRIP_GAP + STRIP_HEIGHT if apart else 0)
    lo, hi = decades(list(seconds.values()))
    front = set(pareto_front([(max(seconds[k], MIN_SECONDS), float(ranks[k] or 0)) for k in ranked]))

    def point(k: str, y: float, on_front: bool) -> CostPoint:
        x = round(log_x(seconds[k], lo, hi, LEFT, plot_w), 1)
        flip = x + 6 + CHAR_WIDTH * len(name(k)) > WIDTH
        rank = ranks.get(k)
        what = "reference, not ranked" if reference(k) else f"overall rank {rank}" if rank is not None else "no rank"
        shown = seconds_text(seconds[k]) + (" (under 1 µs)" if seconds[k] < MIN_SECONDS else "")
        return {
            "key": k,
            "name": name(k),
            "seconds": seconds[k],
            "rank": None if reference(k) else rank,
            "reference": reference(k),
            "front": on_front,
            "x": x,
            "y": round(y, 1),
            "label_x": round(x - 6 if flip else x + 6, 1),
            "anchor": "end" if flip else "start",
            "title": f"{name(k)}: {shown} s per image; {what}" + ("; on the Pareto front" if on_front else ""),
        }

    points = [point(k, rank_y(ranks[k] or 1, worst, TOP, plot_h), i in front) for i, k in enumerate(ranked)]
    strip_mid = (strip_top or 0) + STRIP_HEIGHT / 2
    on_front = sorted((p for p in points if p["front"]), key=lambda p: (p["x"], p["y"]))
    step = 1 if worst <= 12 else math.ceil(worst / 10)
    y_ranks = sorted({*range(1, worst + 1, step), worst})
    devices = sorted({d for k in seconds if (d := costs[k]["device"]) is not None})
    return {
        "title": f"Quality against cost on {track}: overall rank against seconds per image (log scale)",
        "width": WIDTH,
        "height": bottom + BELOW,
        "left": LEFT,
        "top": TOP,
        "plot_width": plot_w,
        "plot_height": plot_h,
        "right": LEFT + plot_w,
        "bottom": bottom,
        "x_ticks": [
            {"at": round(log_x(10.0**k, lo, hi, LEFT, plot_w), 1), "text": decade_text(k)} for k in range(lo, hi + 1)
        ],
        "y_ticks": [{"at": round(rank_y(r, worst, TOP, plot_h), 1), "text": str(r)} for r in y_ranks],
        "x_label": "seconds per image (wall, log scale)" + (f", on {', '.join(devices)}" if devices else ""),
        "y_label": "overall rank (1 = best)",
        "points": points,
        "front": " ".join(f"{p['x']},{p['y']}" for p in on_front) if len(on_front) > 1 else "",
        "apart": [point(k, strip_mid, False) for k in apart],
        "strip_top": strip_top,
        "strip_height": STRIP_HEIGHT,
        "no_cost": sorted(name(k) for k in keys if k not in seconds),
        "devices": devices,
    }
