"""Inline SVG charts for the static site: curves, histograms, correlation heatmaps.

Pure functions from numbers to :class:`markupsafe.Markup`. Every string that reaches the
SVG (labels, titles) goes through :func:`markupsafe.escape`; numbers are formatted here. No
inline ``style`` attributes (the site's Content-Security-Policy forbids them): presentation
attributes and CSS classes from ``site.css`` only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape


@dataclass
class Series:
    """One line of a curve chart; ``main`` lines are drawn on top, in colour, with their band. A
    grey line with ``low`` and ``high`` is drawn with a grey band (several lines summarised as
    one: their median and spread); ``band_label`` names what the band spans."""

    label: str
    x: Sequence[float]
    y: Sequence[float]
    main: bool = False
    low: Sequence[float] | None = None
    high: Sequence[float] | None = None
    band_label: str = "IQR"


def _f(v: float) -> str:
    return f"{v:.2f}".rstrip("0").rstrip(".") if math.isfinite(v) else "0"


def _points(xs: Sequence[float], ys: Sequence[float], sx: object, sy: object) -> str:
    return " ".join(f"{_f(sx(x))},{_f(sy(y))}" for x, y in zip(xs, ys, strict=False))  # type: ignore[operator]


OTHER_POINTS = 26
"""The most points of a grey context line (a 51-point deletion curve is drawn from every other
point): with 50 explainers on a track, their lines are most of an explainer page's bytes."""


def _thin(xs: Sequence[float], ys: Sequence[float], most: int = OTHER_POINTS) -> tuple[list[float], list[float]]:
    """At most ``most`` points of a line, evenly spaced, the last one kept."""
    n = min(len(xs), len(ys))
    if n <= most:
        return list(xs[:n]), list(ys[:n])
    step = math.ceil((n - 1) / (most - 1))
    keep = [*range(0, n - 1, step), n - 1]
    return [xs[k] for k in keep], [ys[k] for k in keep]


def _points1(xs: Sequence[float], ys: Sequence[float], sx: object, sy: object) -> str:
    """Points with one decimal (a tenth of a pixel), for the grey context lines."""
    return " ".join(
        f"{sx(x):.1f},{sy(y):.1f}".replace(".0,", ",").removesuffix(".0")  # type: ignore[operator]
        for x, y in zip(xs, ys, strict=False)
    )


_CURVE_MARGINS = (44, 12, 12, 38)  # left, right, top, bottom (px)
CURVE_SIZE = (380, 240)
"""A curve chart's default width and height (px); only charts of this size share a page's frame."""
HISTOGRAM_SIZE = (180, 40)
"""A histogram's default width and height (px); only histograms of this size share a page's frame."""


def _checked_range(y_range: tuple[float, float]) -> tuple[float, float]:
    y_lo, y_hi = float(y_range[0]), float(y_range[1])
    if not (math.isfinite(y_lo) and math.isfinite(y_hi) and y_hi > y_lo):
        raise ValueError(f"y_range must be two finite numbers, low < high; got {y_range!r}")
    return y_lo, y_hi


def _id_part(text: str) -> str:
    """``text`` as a part of an element id: letters and digits kept, anything else ``_<hex>``."""
    return re.sub(r"[^A-Za-z0-9]", lambda m: f"_{ord(m.group()):x}", text)


def curve_frame_id(y_range: tuple[float, float] = (0.0, 1.0)) -> str:
    """The page-wide id of the frame (grid, ticks, border) of default-size curve charts over ``y_range``."""
    y_lo, y_hi = _checked_range(y_range)
    width, height = CURVE_SIZE
    return f"curve-frame-{width}x{height}-{_id_part(_f(y_lo))}-{_id_part(_f(y_hi))}"


def histogram_frame_id(bounds: tuple[float, float]) -> str:
    """The page-wide id of the frame (base line, bound labels) of default-size histograms over ``bounds``."""
    width, height = HISTOGRAM_SIZE
    return f"hist-frame-{width}x{height}-{_id_part(_g(bounds[0]))}-{_id_part(_g(bounds[1]))}"


def _frame(width: int, height: int, y_lo: float, y_hi: float) -> str:
    """Grid lines, tick labels and border of a curve chart: the same for every chart of one size
    over one range."""
    left, right, top, bottom = _CURVE_MARGINS
    pw, ph = width - left - right, height - top - bottom
    parts = []
    for t in (0.0, 0.25, 0.5, 0.75, 1.0):
        at = top + ph * (1.0 - t)
        parts.append(f'<line class="grid" x1="{left}" x2="{left + pw}" y1="{_f(at)}" y2="{_f(at)}"/>')
        parts.append(f'<text class="tick" x="{left - 6}" y="{_f(at + 4)}" text-anchor="end">')
        parts.append(f"{_f(y_lo + t * (y_hi - y_lo))}</text>")
        parts.append(
            f'<text class="tick" x="{_f(left + pw * t)}" y="{top + ph + 14}" text-anchor="middle">{_f(t)}</text>'
        )
    parts.append(f'<rect class="frame" x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none"/>')
    return "".join(parts)


def _histogram_frame(width: int, height: int, lo: float, hi: float) -> str:
    """Base line and bound labels of a histogram: the same for every histogram of one size over one range."""
    base = height - 14
    return (
        f'<line class="base" x1="0" x2="{width}" y1="{base}" y2="{base}"/>'
        f'<text class="tick" x="0" y="{height - 2}">{_g(lo)}</text>'
        f'<text class="tick" x="{width}" y="{height - 2}" text-anchor="end">{_g(hi)}</text>'
    )


def shared_frames(
    curve_ranges: Iterable[tuple[float, float]] = (), histogram_bounds: Iterable[tuple[float, float]] = ()
) -> Markup:
    """The frames of a page's default-size curve charts over ``curve_ranges`` and histograms over
    ``histogram_bounds``, defined once (a hidden SVG that :func:`curve_chart` and
    :func:`histogram_chart` with ``shared_frame`` refer to): a page of fifty curves and hundreds of
    histograms repeats no grid, border or bound label."""
    groups = {curve_frame_id(r): _frame(*CURVE_SIZE, *r) for r in {_checked_range(r) for r in curve_ranges}}
    for lo, hi in histogram_bounds:
        groups[histogram_frame_id((lo, hi))] = _histogram_frame(*HISTOGRAM_SIZE, float(lo), float(hi))
    if not groups:
        return Markup("")
    body = "".join(f'<g id="{key}">{groups[key]}</g>' for key in sorted(groups))
    return Markup(
        f'<svg class="chart defs" width="0" height="0" aria-hidden="true" focusable="false"><defs>{body}</defs></svg>'
    )


def curve_chart(
    series: Sequence[Series],
    *,
    title: str,
    x_label: str,
    y_label: str,
    width: int = CURVE_SIZE[0],
    height: int = CURVE_SIZE[1],
    y_range: tuple[float, float] = (0.0, 1.0),
    shared_frame: bool = False,
) -> Markup:
    """Lines of ``y`` over ``x`` in [0, 1] x ``y_range``; grey context lines, coloured ``main`` lines.

    Values outside the ranges are drawn at the border (clamped). With ``shared_frame``, and the
    default size, the grid, ticks and border are a reference to the page's :func:`shared_frames`
    (which the page must hold), else they are drawn in the chart.
    """
    left, right, top, bottom = _CURVE_MARGINS
    pw, ph = width - left - right, height - top - bottom
    y_lo, y_hi = _checked_range(y_range)

    def sx(x: float) -> float:
        return left + pw * min(max(x, 0.0), 1.0)

    def sy(y: float) -> float:
        return top + ph * (1.0 - min(max((y - y_lo) / (y_hi - y_lo), 0.0), 1.0))

    parts = [
        f'<svg class="chart curve" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="{escape(title)}">',
        f'<use href="#{curve_frame_id(y_range)}"/>'
        if shared_frame and (width, height) == CURVE_SIZE
        else _frame(width, height, y_lo, y_hi),
    ]
    ordered = sorted(series, key=lambda s: s.main)
    for s in ordered:
        if s.low is not None and s.high is not None:
            # a band's outline at a tenth of a pixel (the line itself keeps two decimals)
            upper = _points1(s.x, s.high, sx, sy)
            lower = _points1(list(reversed(s.x)), list(reversed(s.low)), sx, sy)
            band = "band" if s.main else "band other"
            title = f"{escape(s.label)}: {escape(s.band_label)}"
            parts.append(f'<polygon class="{band}" points="{upper} {lower}"><title>{title}</title></polygon>')
        cls = "line main" if s.main else "line other"
        points = _points(s.x, s.y, sx, sy) if s.main else _points1(*_thin(s.x, s.y), sx, sy)
        parts.append(f'<polyline class="{cls}" fill="none" points="{points}">')
        parts.append(f"<title>{escape(s.label)}</title></polyline>")
    parts.append(
        f'<text class="axis" x="{left + pw / 2:.1f}" y="{height - 4}" text-anchor="middle">{escape(x_label)}</text>'
    )
    parts.append(
        f'<text class="axis" transform="translate(11 {top + ph / 2:.1f}) rotate(-90)" '
        f'text-anchor="middle">{escape(y_label)}</text>'
    )
    parts.append("</svg>")
    return Markup("".join(parts))


def histogram_chart(
    edges: Sequence[float],
    counts: Sequence[int],
    *,
    title: str,
    mean: float | None = None,
    width: int = HISTOGRAM_SIZE[0],
    height: int = HISTOGRAM_SIZE[1],
    shared_frame: bool = False,
) -> Markup:
    """Bars of ``counts`` over ``edges``; the mean as a vertical tick; bounds written below (with
    ``shared_frame``, and the default size, by a reference to the page's :func:`shared_frames`)."""
    if len(edges) != len(counts) + 1 or not counts:
        return Markup("")
    lo, hi = float(edges[0]), float(edges[-1])
    span = hi - lo if hi > lo else 1.0
    top, bottom = 4, 14
    ph = height - top - bottom
    peak = max(max(counts), 1)

    def sx(x: float) -> float:
        return width * (float(x) - lo) / span

    parts = [
        f'<svg class="chart hist" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="{escape(title)}">',
        f'<use href="#{histogram_frame_id((lo, hi))}"/>'
        if shared_frame and (width, height) == HISTOGRAM_SIZE
        else _histogram_frame(width, height, lo, hi),
    ]
    # all bars as one path, their bins and counts in its one tooltip: a page holds hundreds of
    # these charts, and one element per bar doubled their size
    bars, bins = [], []
    for a, b, c in zip(edges, edges[1:], counts, strict=False):
        if c == 0:
            continue  # an empty bin draws nothing
        h = ph * c / peak
        x0, x1 = sx(a), sx(b)
        bars.append(
            f"M{_f(x0)} {_f(top + ph - h)}h{_f(max(x1 - x0 - 0.5, 0.5))}v{_f(h)}h-{_f(max(x1 - x0 - 0.5, 0.5))}z"
        )
        bins.append(f"[{_g(a)}, {_g(b)}): {int(c)}")
    if bars:
        parts.append(f'<path class="bars" d="{"".join(bars)}"><title>{escape("; ".join(bins))}</title></path>')
    if mean is not None and math.isfinite(mean):
        mx = min(max(sx(mean), 0.5), width - 0.5)
        parts.append(
            f'<line class="mean" x1="{mx:.2f}" x2="{mx:.2f}" y1="{top}" y2="{top + ph}">'
            f"<title>mean {_g(mean)}</title></line>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def _g(v: float) -> str:
    return f"{float(v):.3g}"


def diverging_colour(rho: float) -> str:
    """Blue (-1) through white (0) to red (+1), as ``#rrggbb``."""
    rho = min(max(rho, -1.0), 1.0)
    end = (178, 24, 43) if rho >= 0 else (33, 102, 172)
    t = abs(rho)
    r, g, b = (round(255 + (e - 255) * t) for e in end)
    return f"#{r:02x}{g:02x}{b:02x}"


def heatmap(labels: Sequence[str], matrix: Sequence[Sequence[float | None]], *, title: str, cell: int = 30) -> Markup:
    """A square matrix of correlations in [-1, 1], written in each cell; ``None`` is n/a."""
    n = len(labels)
    label_w = 8 + 7 * max((len(str(x)) for x in labels), default=1)
    size = label_w + n * cell + 4
    parts = [
        f'<svg class="chart heat" viewBox="0 0 {size} {size}" width="{size}" height="{size}" '
        f'role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
    ]
    for i, name in enumerate(labels):
        y = label_w + i * cell + cell / 2 + 4
        parts.append(f'<text class="label" x="{label_w - 6}" y="{y:.1f}" text-anchor="end">{escape(name)}</text>')
        x = label_w + i * cell + cell / 2 + 4
        parts.append(
            f'<text class="label" transform="translate({x:.1f} {label_w - 6}) rotate(-90)">{escape(name)}</text>'
        )
    for i in range(n):
        for j in range(n):
            v = matrix[i][j]
            x, y = label_w + j * cell, label_w + i * cell
            fill = "#e6e6e6" if v is None else diverging_colour(v)
            tip = f"{escape(labels[i])} vs {escape(labels[j])}: " + ("n/a" if v is None else f"{v:+.2f}")
            parts.append(
                f'<rect class="cell" x="{x}" y="{y}" width="{cell}" height="{cell}" fill="{fill}">'
                f"<title>{tip}</title></rect>"
            )
            text = "n/a" if v is None else f"{v:.2f}".replace("0.", ".", 1) if abs(v) < 1 else f"{v:.0f}"
            dark = v is not None and abs(v) > 0.6
            parts.append(
                f'<text class="val{" on-dark" if dark else ""}" x="{x + cell / 2:.1f}" y="{y + cell / 2 + 4:.1f}" '
                f'text-anchor="middle">{text}</text>'
            )
    parts.append("</svg>")
    return Markup("".join(parts))
