"""The committed record (``record/record-v1/``) as data CI checks (issue 41, DESIGN 10).

Every committed submission validates against the schema (summaries recomputed from the
per-sample values), is the record's (suite ``record-v1``, seed 0, default parameters, every
sample), holds only the suite's tracks, keeps its example overlays to the synthetic tracks and
``photos`` (no render of a ``shared/data`` image is committed), and names each overlay it ships.
The record is computed across sessions; these checks hold for every file committed so far.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xaibench.publish.validation import validate_file
from xaibench.suites.record import RECORD_SUITE, RECORD_TRACKS

ROOT = Path(__file__).resolve().parents[1] / "record" / RECORD_SUITE
SUBMISSIONS = sorted((ROOT / "submissions").glob("*.json")) if ROOT.is_dir() else []
TRACKS = {t.spec.name for t in RECORD_TRACKS}
OVERLAY_TRACKS = {t.spec.name for t in RECORD_TRACKS if not t.real}


def test_the_record_folder_holds_only_what_the_record_writes() -> None:
    if not ROOT.is_dir():
        pytest.skip(f"no record committed yet ({ROOT})")
    allowed = {"submissions", "meta", "leaderboard"}
    assert {p.name for p in ROOT.iterdir()} <= allowed
    for path in (ROOT / "submissions").rglob("*"):
        if path.is_file():
            assert path.suffix in (".json", ".jpg", ".png"), path  # .png: overlays written before JPEG ones


@pytest.mark.parametrize("path", SUBMISSIONS, ids=[p.stem for p in SUBMISSIONS])
def test_every_committed_submission_is_a_valid_submission_of_the_record(path: Path) -> None:
    assert validate_file(path) == [], path
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["suite"] == RECORD_SUITE and data["seed"] == 0
    assert "executor" not in data["environment"], "the record holds sandboxed runs only (never --executor inprocess)"
    assert data["run"].get("limit") is None, "the record uses every sample"
    assert "@" not in path.stem, "the record holds default parameters only"
    assert set(data["tracks"]) <= TRACKS
    for name, track in data["tracks"].items():
        examples = [e for e in track.get("examples", []) if "jpeg" in e or "png" in e]
        if name not in OVERLAY_TRACKS:
            assert not examples, f"{path.name}: an overlay of a shared/data image on {name}"
        for example in examples:
            overlay = path.parent / example.get("jpeg", example.get("png", ""))
            assert overlay.is_file(), overlay
