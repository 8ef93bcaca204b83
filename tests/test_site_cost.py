"""Cost as an axis on the board (issue 44, points 3 and 5): the cost column, the quality-against-cost
plot, the board's ``cost`` table, and files written before costs were kept.

The hand-made board is the site tests' synthetic one (``_site_data``: two tracks, six explainers,
``oracle`` a reference, ``evil`` hostile) with a ``cost`` block added to each track of five files
(``gamma``'s file has none, as a file written before costs were kept) and ``tuned-net`` measured
on a GPU. Its overall ranks (from the paired ranking, not from cost) are, on ``synth-a``: alpha 1,
tuned-net 1 (tied), beta 3, gamma 4, evil 5; on ``synth-b``: alpha 1, tuned-net 2, beta 3,
gamma 4, evil 5. The seconds per image below put the fronts where the tests say.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from _site_data import EVIL_NAME, MEANS, submission

from xaibench.publish.board import board_json, build_board, build_leaderboard, explainer_cost
from xaibench.publish.submission import read_submissions
from xaibench.publish.validation import require_valid
from xaibench.publish.writers import to_csv, to_markdown
from xaibench.site import build_site
from xaibench.site.views.cost import (
    MISSING,
    cost_cell,
    decade_text,
    decades,
    log_x,
    pareto_front,
    rank_y,
    seconds_text,
)
from xaibench.site.views.overview import track_anchor

GOLDEN = Path(__file__).parent / "golden" / "submissions"
TRACKS = ("synth-a", "synth-b")
# explainer -> seconds per image (both tracks); gamma's file has no cost block
SECONDS = {"alpha": 0.2, "tuned-net": 0.02, "beta": 0.005, "evil": 0.0004, "oracle": 0.00005}
RSS = {"alpha": 310.0, "tuned-net": 88.4, "beta": 7.25, "evil": 0.0, "oracle": 1.0}
GPU_MB = 512.0  # tuned-net's peak device memory
OVERALL = {  # the board's overall ranks, as the module doc states them (checked against the board below)
    "synth-a": {"alpha": 1, "tuned-net": 1, "beta": 3, "gamma": 4, "evil": 5},
    "synth-b": {"alpha": 1, "tuned-net": 2, "beta": 3, "gamma": 4, "evil": 5},
}
FRONT = {  # by hand: no other point is as fast and as well ranked
    "synth-a": ["evil", "beta", "tuned-net"],  # alpha: tuned-net is faster at the same rank
    "synth-b": ["evil", "beta", "tuned-net", "alpha"],
}
# The plot's geometry (site/views/cost.py): plot area x 52..544, y from 12 (rank 1) to 152 (rank 5);
# the seconds span 5e-5 .. 0.2, so the decades 1e-5 .. 1 s.
LEFT, PLOT_W, TOP, PLOT_H, LO, HI = 52, 492, 12, 140, -5, 0


def _costly(name: str, folder: Path, *, cost: bool = True) -> dict[str, Any]:
    data = submission(name, folder, examples=False)
    if name == "tuned-net":
        data["environment"].update(device="cuda:0", device_name="NVIDIA H200", torch_threads=1)
    elif name != "evil":
        data["environment"].update(device="cpu", device_name="cpu", torch_threads=2)
    if cost and name in SECONDS:
        for block in data["tracks"].values():
            block["cost"] = {
                "seconds": round(SECONDS[name] * 10, 6),
                "per_sample_seconds": SECONDS[name],
                "peak_rss_mb": RSS[name],
                "peak_device_mb": GPU_MB if name == "tuned-net" else None,
                "measured": 10,
                "n_samples": 10,
            }
    return data


def _write(folder: Path, *, cost: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in MEANS:
        text = json.dumps(_costly(name, folder, cost=cost), indent=2) + "\n"
        (folder / f"{name}.json").write_text(text, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def costly(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cost")
    subs = _write(root / "subs")
    require_valid(sorted(subs.glob("*.json")))  # a cost block is part of the format
    build_site(subs, root / "site")
    return root


# ----------------------------------------------------------------------------- reading the built page


def _figure(html: str, track: str) -> str:
    start = html.index(f'<figure class="cost-plot" id="{track_anchor(track)}-cost">')
    return html[start : html.index("</figure>", start)]


def _section(html: str, track: str) -> str:
    start = html.index(f'<section class="track" id="{track_anchor(track)}"')
    return html[start : html.index("</section>", start)]


POINT = re.compile(
    r'<g class="pt([^"]*)" data-key="([^"]*)"><title>([^<]*)</title>'
    r'(?:<circle cx="([\d.]+)" cy="([\d.]+)"|<rect x="([\d.]+)" y="([\d.]+)")'
)


def _points(figure: str) -> dict[str, dict[str, Any]]:
    """key -> class, title and centre of each point drawn in a plot."""
    out = {}
    for m in POINT.finditer(figure):
        cls, key, title = m.group(1).split(), m.group(2), m.group(3)
        if m.group(4):  # a circle: its centre
            x, y = float(m.group(4)), float(m.group(5))
        else:  # a 7 x 7 square: its corner
            x, y = float(m.group(6)) + 3.5, float(m.group(7)) + 3.5
        out[key] = {"class": cls, "title": title, "x": x, "y": y}
    return out


COST_CELL = re.compile(
    r'<td class="cost" data-sort="[^"]*" title="([^"]*)">([^<]*)'  # title, seconds
    r'(?:<span class="sub">([^<]*)</span>)?'  # memory
)


def _cost_cells(section: str) -> dict[str, tuple[str, str, str]]:
    """key -> (text, memory line, title) of each row's cost cell in a track's main table."""
    table = section[: section.index("</table>")]
    out = {}
    for chunk in table.split("<tr")[1:]:
        key = re.search(r'data-key="([^"]*)"', chunk)
        cell = COST_CELL.search(chunk)
        if key and cell:
            out[key.group(1)] = (cell.group(2), cell.group(3) or "", cell.group(1))
    return out


def _overall(site: Path) -> dict[str, dict[str, int | None]]:
    """track -> key -> overall rank, from the site's own leaderboard.json."""
    rows = json.loads((site / "data" / "leaderboard.json").read_text(encoding="utf-8"))["rows"]
    out: dict[str, dict[str, int | None]] = {}
    for r in rows:
        if r["metric"] == "rank:overall":
            out.setdefault(r["track"], {})[r["explainer"]] = r["rank"]
    return out


# ----------------------------------------------------------------------------- the formulas, by hand


def test_the_pareto_front_on_a_hand_made_case() -> None:
    points = [(0.01, 3), (0.001, 5), (0.1, 1), (0.05, 2), (0.2, 2), (0.001, 5), (0.02, 4), (0.1, 1.5)]
    # (0.02, 4) is beaten by (0.01, 3); (0.2, 2) and (0.1, 1.5) by (0.1, 1); the two (0.001, 5) are equal: both stay
    assert pareto_front(points) == [1, 5, 0, 3, 2]
    assert pareto_front([(1.0, 2.0)]) == [0] and pareto_front([]) == []
    assert pareto_front([(1.0, 1.0), (2.0, 1.0)]) == [0]  # as good and faster: the slower one is beaten


def test_log_scale_positions_and_tick_words() -> None:
    assert decades([0.00005, 0.2]) == (-5, 0)
    assert decades([0.003, 0.004]) == (-3, -2)  # within one decade: that decade
    assert decades([0.001]) == (-3, -2) and decades([1.0, 10.0]) == (0, 1)
    assert decades([0.0]) == (-6, -5)  # under a microsecond counts as one
    assert log_x(1e-3, -5, 0, 52, 492) == pytest.approx(52 + 492 * 2 / 5)
    assert log_x(10**-2.5, -5, 0, 52, 492) == pytest.approx(52 + 492 * 2.5 / 5)
    assert log_x(1.0, -5, 0, 52, 492) == pytest.approx(544) and log_x(1e-5, -5, 0, 52, 492) == pytest.approx(52)
    assert log_x(0.0, -6, -5, 0, 100) == pytest.approx(0)  # drawn at 1 µs
    assert rank_y(1, 5, 12, 140) == 12 and rank_y(5, 5, 12, 140) == 152 and rank_y(3, 5, 12, 140) == 82
    assert rank_y(1, 1, 12, 140) == 82  # a single rank sits in the middle
    assert [decade_text(k) for k in range(-7, 3)] == [
        "1e-7 s", "1 µs", "10 µs", "100 µs", "1 ms", "10 ms", "100 ms", "1 s", "10 s", "100 s",
    ]  # fmt: skip
    assert [seconds_text(v) for v in (0.003402, 0.2, 12.34, 1234.5, 0.000053, 0.0)] == [
        "0.00340", "0.200", "12.3", "1234", "0.0000530", "0",
    ]  # fmt: skip


def test_a_cost_figure_a_file_gets_wrong_is_none() -> None:
    bad = {"per_sample_seconds": True, "seconds": math.nan, "peak_rss_mb": -1, "peak_device_mb": "9", "measured": 1.5}
    assert explainer_cost(bad, {"device": 3, "torch_threads": "2"}) == {
        "per_sample_seconds": None,
        "seconds": None,
        "peak_rss_mb": None,
        "peak_device_mb": None,
        "measured": None,
        "n_samples": None,
        "device": None,
        "torch_threads": None,
    }
    good = {"seconds": 2, "per_sample_seconds": 0.25, "peak_rss_mb": 3.5, "peak_device_mb": None, "measured": 8}
    assert explainer_cost(good, {"device": "cuda:0", "device_name": "NVIDIA H200", "torch_threads": 1}) == {
        "per_sample_seconds": 0.25,
        "seconds": 2.0,
        "peak_rss_mb": 3.5,
        "peak_device_mb": None,
        "measured": 8,
        "n_samples": None,
        "device": "NVIDIA H200",
        "torch_threads": 1,
    }
    assert explainer_cost(None, None)["device"] is None
    failed = explainer_cost({"seconds": 0, "per_sample_seconds": None, "measured": 0, "n_samples": 8}, {})
    assert cost_cell(failed) == {
        "text": MISSING,
        "sort": "",
        "memory": "",
        "title": "no image of this track was explained, so no cost",
    }
    assert cost_cell(explainer_cost(None, {}))["title"] == "no cost recorded in this submission"


# ----------------------------------------------------------------------------- the board and the site


def test_the_board_carries_each_tracks_cost_and_cost_never_enters_a_rank(costly: Path, tmp_path: Path) -> None:
    board = build_leaderboard(costly / "subs")
    data = board_json(board)
    assert list(data["cost"]) == list(TRACKS) and all(list(data["cost"][t]) == sorted(MEANS) for t in TRACKS)
    assert data["cost"]["synth-a"]["tuned-net"] == {
        "per_sample_seconds": 0.02,
        "seconds": 0.2,
        "peak_rss_mb": 88.4,
        "peak_device_mb": GPU_MB,
        "measured": 10,
        "n_samples": 10,
        "device": "NVIDIA H200",
        "torch_threads": 1,
    }
    gamma = data["cost"]["synth-b"]["gamma"]
    assert gamma["per_sample_seconds"] is None and gamma["peak_rss_mb"] is None and gamma["device"] == "cpu"
    assert json.loads((costly / "site" / "data" / "leaderboard.json").read_text())["cost"] == data["cost"]
    ranks = {t: {x: r for x, r in by.items() if r is not None} for t, by in _overall(costly / "site").items()}
    assert ranks == OVERALL
    # the same files without their cost blocks rank the same, row for row, and write the same CSV and Markdown
    plain = build_leaderboard(_write(tmp_path / "plain", cost=False))
    assert plain.rows == board.rows and plain.summary == board.summary
    assert to_csv(plain.rows) == to_csv(board.rows) and to_markdown(plain) == to_markdown(board)


def test_the_plots_points_are_the_submissions_figures(costly: Path) -> None:
    html = (costly / "site" / "index.html").read_text(encoding="utf-8")
    files = {name: json.loads((costly / "subs" / f"{name}.json").read_text()) for name in MEANS}
    ranks = _overall(costly / "site")
    for track in TRACKS:
        figure = _figure(html, track)
        points = _points(figure)
        assert set(points) == set(SECONDS)  # gamma has no cost: named under the plot, not drawn
        assert "Not plotted, no seconds per image (no cost recorded, or no image explained): gamma." in figure
        for key, p in points.items():
            seconds = files[key]["tracks"][track]["cost"]["per_sample_seconds"]
            assert p["x"] == pytest.approx(LEFT + PLOT_W * (math.log10(seconds) - LO) / (HI - LO), abs=0.05), key
            assert f": {seconds_text(seconds)} s per image;" in p["title"]
            if key == "oracle":  # a reference: drawn apart, in the strip under the plot area
                assert {"apart", "ref"} <= set(p["class"]) and p["y"] > TOP + PLOT_H
                assert "reference, not ranked" in p["title"]
                continue
            rank = ranks[track][key]
            assert rank == OVERALL[track][key]
            assert p["y"] == pytest.approx(TOP + PLOT_H * (rank - 1) / (5 - 1), abs=0.05), key
            assert f"overall rank {rank}" in p["title"]
            assert ("on-front" in p["class"]) == (key in FRONT[track]), (track, key)
        front = re.search(r'<polyline class="front" fill="none" points="([^"]*)">', figure)
        assert front is not None
        assert front.group(1) == " ".join(f"{points[k]['x']},{points[k]['y']}" for k in FRONT[track])
        # the evil explainer's name is text in the SVG, escaped like everywhere else
        assert EVIL_NAME not in figure and "&lt;script&gt;window.__pwned=1&lt;/script&gt;</text>" in figure
        ticks = re.findall(r'text-anchor="middle">([^<]*)</text>', figure)
        assert ticks[:6] == ["10 µs", "100 µs", "1 ms", "10 ms", "100 ms", "1 s"]


def test_each_track_table_has_a_cost_column_with_the_device_and_memory(costly: Path) -> None:
    html = (costly / "site" / "index.html").read_text(encoding="utf-8")
    for track in TRACKS:
        section = _section(html, track)
        head = re.search(r'<th scope="col" class="cost"[^>]*title="([^"]*)"><button type="button">s / image<', section)
        assert head is not None and "on NVIDIA H200, cpu" in head.group(1) and "never ranked" in head.group(1)
        cells = _cost_cells(section)
        assert {k for k in cells} >= {"alpha", "beta", "gamma", "tuned-net", "evil"}
        assert cells["alpha"][:2] == ("0.200", "RSS 310 MB")
        assert cells["beta"][:2] == ("0.00500", "RSS 7.2 MB")
        assert cells["tuned-net"][:2] == ("0.0200", "RSS 88 MB · GPU 512 MB")
        assert cells["gamma"] == (MISSING, "", "no cost recorded in this submission")
        assert "on NVIDIA H200, 1 torch thread;" in cells["tuned-net"][2]
        assert "on cpu, 2 torch threads;" in cells["alpha"][2] and "measured on 10 of 10 images" in cells["alpha"][2]
        assert "on an unnamed device" in cells["evil"][2]  # its environment names no device


@pytest.mark.parametrize("folder", sorted(p.name for p in GOLDEN.iterdir() if p.is_dir()))
def test_files_written_before_costs_were_kept_validate_load_and_build_with_a_dash(folder: str, tmp_path: Path) -> None:
    files = sorted((GOLDEN / folder).glob("*.json"))
    require_valid(files)
    board = build_board(read_submissions(GOLDEN / folder))
    assert board.cost and all(c["per_sample_seconds"] is None for by in board.cost.values() for c in by.values())
    build_site(GOLDEN / folder, tmp_path / "site")
    html = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert 'class="cost-plot"' not in html  # nothing to plot
    for track in board.track_names():
        cells = _cost_cells(_section(html, track))
        assert cells and all(c == (MISSING, "", "no cost recorded in this submission") for c in cells.values())


# ----------------------------------------------------------------------------- a real run


@pytest.mark.slow
def test_a_default_runs_submissions_carry_cost_and_its_site_plots_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import xaibench

    monkeypatch.setenv("XAIBENCH_CACHE", str(tmp_path / "cache"))
    explainers = ["random", "gradient", "oracle"]
    res = xaibench.run(
        explainers, suite="default", metrics=["iou", "deletion"], limit=8, output_path=tmp_path / "out", progress=False
    )
    assert res.site_dir is not None and res.failed == {}
    html = (res.site_dir / "index.html").read_text(encoding="utf-8")
    ranks = _overall(res.site_dir)
    assert len(res.tracks) >= 3
    for key in explainers:
        data = json.loads((tmp_path / "out" / "submissions" / f"{key}.json").read_text())
        assert data["environment"]["device_name"] == "cpu"
        assert sorted(data["tracks"]) == sorted(res.tracks)
        for track, block in data["tracks"].items():
            cost = block["cost"]
            if key == "oracle" and block["explained"].get("failed") == 8:  # no ground truth to read (photos)
                assert cost["measured"] == 0 and cost["per_sample_seconds"] is None
                assert key not in _points(_figure(html, track))
                cell = _cost_cells(_section(html, track)).get(key)
                assert cell is None or cell == (MISSING, "", "no image of this track was explained, so no cost")
                continue
            assert cost["measured"] == cost["n_samples"] == 8, (key, track)
            assert cost["per_sample_seconds"] > 0 and cost["peak_rss_mb"] >= 0, (key, track, cost)
            cell = _cost_cells(_section(html, track)).get(key)
            assert cell is None or cell[0] == seconds_text(cost["per_sample_seconds"])
            if key != "oracle":  # oracle is a reference: its row may be drawn as a line
                assert cell is not None and cell[1].startswith("RSS ") and "on cpu" in cell[2]
            point = _points(_figure(html, track))[key]
            assert f": {seconds_text(cost['per_sample_seconds'])} s per image;" in point["title"]
            if key == "oracle":
                assert "ref" in point["class"]
            elif ranks[track][key] is not None:
                assert f"overall rank {ranks[track][key]};" in point["title"] + ";"
