"""Explainer pages draw the other explainers' curves as lines while they are few, and as one
median line with its 10th-90th percentile band beyond :data:`MAX_OTHER_LINES`, so a page's size
grows with the board once, not once per pair (the record's site: issue 41)."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from xaibench.site import charts
from xaibench.site.views.explainers import MAX_OTHER_LINES, curves, others_envelope

X = [0.0, 0.5, 1.0]


def _sub(name: str, mean: list[float]) -> Any:
    curve = {"fraction": X, "mean": mean, "n": 4}
    return SimpleNamespace(name=name, data={"tracks": {"t": {"metrics": {"deletion": {"curve": curve}}}}})


def test_the_envelope_is_the_median_and_the_10th_to_90th_percentile_on_the_pages_grid() -> None:
    others = [charts.Series(f"e{i}", X, [1.0, 0.5 - 0.05 * i, 0.0]) for i in range(10)]
    env = others_envelope(others, [0.0, 0.25, 0.5, 1.0])
    # at 0.5: values 0.5, 0.45, ..., 0.05; median (0.25 + 0.3) / 2; 10th percentile 0.05 + 0.9 x 0.05
    assert env.y[2] == pytest.approx(0.275) and env.low[2] == pytest.approx(0.095)  # type: ignore[index]
    assert env.high[2] == pytest.approx(0.455)  # type: ignore[index]
    # at 0.25 each curve is interpolated: (1 + 0.5 - 0.05 i) / 2, median over i = 0..9
    assert env.y[1] == pytest.approx(0.75 - 0.025 * 4.5)
    assert env.label == "the 10 other explainers: median" and not env.main


@pytest.mark.parametrize("n_others", [MAX_OTHER_LINES, MAX_OTHER_LINES + 1, 30])
def test_few_others_are_lines_many_are_one_band(n_others: int) -> None:
    subs = {f"x{i}": _sub(f"x{i}", [1.0, 0.5 - 0.01 * i, 0.0]) for i in range(n_others + 1)}
    me = subs["x0"]
    (view,) = curves(me, "t", subs)
    svg = str(view["svg"])
    assert view["others"] == n_others
    if n_others <= MAX_OTHER_LINES:
        assert svg.count('<polyline class="line other"') == n_others and "band other" not in svg
        assert not view["summarised"]
    else:
        assert svg.count('<polyline class="line other"') == 1 and svg.count('class="band other"') == 1
        assert view["summarised"] and f"the {n_others} other explainers: median" in svg
    assert svg.count('<polyline class="line main"') == 1


def test_a_page_grows_linearly_with_the_board() -> None:
    def size(n: int) -> int:
        subs = {f"x{i}": _sub(f"x{i}", list(np.round([1.0, 0.5 - 0.001 * i, 0.0], 4))) for i in range(n)}
        return len(str(curves(subs["x0"], "t", subs)[0]["svg"]))

    assert size(40) == size(20)  # the summarised chart holds one grey line and one band at any size


def test_a_histogram_is_one_path_with_its_bins_in_one_tooltip() -> None:
    """Bars of counts 1, 0, 3, 2 over [0, 1] in a 180 x 40 chart (plot height 22, peak 3): the
    empty bin draws nothing, each bar is 44.5 px wide (45 less a 0.5 px gap)."""
    svg = str(charts.histogram_chart([0, 0.25, 0.5, 0.75, 1], [1, 0, 3, 2], title="t", mean=0.5))
    assert svg.count("<path") == 1 and "<rect" not in svg
    assert 'd="M0 18.67h44.5v7.33h-44.5zM90 4h44.5v22h-44.5zM135 11.33h44.5v14.67h-44.5z"' in svg
    assert "<title>[0, 0.25): 1; [0.5, 0.75): 3; [0.75, 1): 2</title>" in svg


def test_charts_with_a_shared_frame_refer_to_the_one_the_page_defines() -> None:
    """A histogram over [-0.5, 2] and a correlation curve (-1 to 1): with ``shared_frame`` each draws
    its data and a ``<use>`` of a frame that :func:`charts.shared_frames` defines once, holding the
    base line, grid and bound labels the chart otherwise draws itself."""
    own = str(charts.histogram_chart([-0.5, 0.75, 2], [1, 3], title="t"))
    hist = str(charts.histogram_chart([-0.5, 0.75, 2], [1, 3], title="t", shared_frame=True))
    curve = str(
        charts.curve_chart(
            [charts.Series("a", [0, 1], [0.5, -0.5], main=True)],
            title="c",
            x_label="x",
            y_label="y",
            y_range=(-1.0, 1.0),
            shared_frame=True,
        )
    )
    defs = str(charts.shared_frames([(-1.0, 1.0), (-1, 1)], [(-0.5, 2.0), (-0.5, 2.0)]))
    refs = [re.search(r'<use href="#([^"]+)"/>', svg).group(1) for svg in (hist, curve)]  # type: ignore[union-attr]
    assert refs == ["hist-frame-180x40-_2d0_2e5-2", "curve-frame-380x240-_2d1-1"]
    assert "<text" not in hist and '<line class="base"' not in hist and '<line class="grid"' not in curve
    groups = dict(re.findall(r'<g id="([^"]+)">(.*?)</g>', defs))
    assert sorted(groups) == sorted(refs)  # one each, though asked twice
    assert '<text class="tick" x="0" y="38">-0.5</text>' in groups[refs[0]] and '<line class="base"' in groups[refs[0]]
    assert own.replace(groups[refs[0]], f'<use href="#{refs[0]}"/>') == hist  # the same frame, drawn elsewhere
    assert groups[refs[1]].count('<line class="grid"') == 5 and ">-0.5</text>" in groups[refs[1]]
    assert str(charts.shared_frames()) == ""
