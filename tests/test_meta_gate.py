"""DESIGN 9's gate: ``leaderboard build`` with a matching ``meta.json`` shows a metric found invalid
on a track as "not ranked" in every output (CSV, JSON, Markdown, terminal, site) and leaves it out
of the family and overall ranks; a ``meta.json`` whose digests do not match is ignored with one
line; without one nothing changes."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

import xaibench
from tests.test_meta_ladder import Plugin
from xaibench.cli import main
from xaibench.plugins import manager

STATUS_START = "not ranked: invalid on this track (ladder: m(0) - m(1) = "


def _build(args: list[object], capsys: pytest.CaptureFixture[str]) -> str:
    try:
        main(["leaderboard", "build", *[str(a) for a in args]])
    except SystemExit as exc:
        assert not exc.code, capsys.readouterr()
    return " ".join(capsys.readouterr().out.split())


def _rows(board: Path) -> list[dict[str, str]]:
    with open(board / "leaderboard.csv") as f:
        return list(csv.DictReader(f))


def test_an_invalid_metric_is_shown_but_not_ranked_only_with_a_matching_meta_json(
    tmp_path: Path, registry: manager.Registry, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XAIBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "250")
    registry.add_plugin(Plugin(), name="planted")
    out = tmp_path / "out"
    result = xaibench.meta(
        ["random", "center", "gradient"],
        suite="default",
        tracks="shapes",
        metrics=["iou", "map_blind"],
        limit=10,
        output_path=out,
        progress=False,
    )
    assert result.tracks["shapes"].cards["map_blind"].validity.verdict == "invalid"
    subs, board = out / "submissions", tmp_path / "board"

    shown = _build(["--submissions", subs, "--out", board], capsys)  # finds out/meta/meta.json beside them
    # named beside the submissions' folder, so the board's files do not change with where it is built
    assert "meta-evaluation meta/meta.json applied: 1 metric(s) not ranked as invalid" in shown
    rows = _rows(board)
    blind = [r for r in rows if r["track"] == "shapes" and r["metric"] == "map_blind"]
    assert len(blind) == 3 and all(r["status"].startswith(STATUS_START) and r["rank"] == "" for r in blind)
    iou = {r["explainer"]: r["rank"] for r in rows if r["track"] == "shapes" and r["metric"] == "iou"}
    family = {r["explainer"]: r for r in rows if r["track"] == "shapes" and r["metric"] == "rank:alignment"}
    assert {x: float(r["value"]) for x, r in family.items()} == {x: float(rank) for x, rank in iou.items()}
    data = json.loads((board / "leaderboard.json").read_text())
    statuses = {r["status"] for r in data["rows"] if r["metric"] == "map_blind"}
    assert len(statuses) == 1 and statuses.pop().startswith(STATUS_START)
    assert STATUS_START in (board / "leaderboard.md").read_text()
    assert STATUS_START.split(" (")[0] in shown
    assert any(STATUS_START in p.read_text() for p in (board / "site").rglob("*.html"))
    cards = (board / "site" / "metrics.html").read_text()  # the metrics page: xaibench meta's report cards
    assert 'id="card-shapes-map_blind"' in cards and "graded-oracle ladder" in cards and "<svg" in cards
    assert 'href="metrics.html#card-shapes-iou"' in (board / "site" / "index.html").read_text()
    # without a site the files' bytes are dropped once parsed; their digests still match meta.json
    bare = tmp_path / "bare"
    shown = _build(["--submissions", subs, "--out", bare, "--no-site"], capsys)
    assert "applied: 1 metric(s) not ranked as invalid" in shown and _rows(bare) == rows

    # a changed submission: the verdicts are not these submissions' any more
    path = subs / "random.json"
    path.write_text(json.dumps(json.loads(path.read_text()), indent=1))
    shown = _build(["--submissions", subs, "--out", board], capsys)
    assert "ignored, its submission digests do not match these submissions (rerun xaibench meta)" in shown
    rows = _rows(board)
    blind = [r for r in rows if r["track"] == "shapes" and r["metric"] == "map_blind"]
    assert all(not r["status"].startswith("not ranked: invalid") for r in blind)
    assert not (board / "site" / "metrics.html").exists()  # no report cards from a meta.json that does not match
    assert any(r["rank"] for r in blind)  # ranked again, and in the family rank
    ungated = {r["explainer"]: float(r["value"]) for r in rows if r["metric"] == "rank:alignment"}
    assert ungated != {x: float(rank) for x, rank in iou.items()}

    # no meta.json at all: no note, the board as before the gate
    (out / "meta" / "meta.json").unlink()
    shown = _build(["--submissions", subs, "--out", board], capsys)
    assert "meta-evaluation" not in shown and "xaibench meta" not in shown
    assert [r for r in _rows(board) if r["metric"] == "map_blind"] == blind
