"""The record's meta and board, checked by CI (issue 41, DESIGN 10, point 4).

- The committed ``meta/`` and ``leaderboard/`` (with its site) rebuild byte for byte from the
  committed submissions and ``meta/validity.json`` (:func:`check_record_board`), and a change of
  one submission, or of one committed file, is named.
- The validity tests' verdicts kept in ``validity.json`` reach the board: an invalid metric is
  shown and not ranked.
- A sample of records of every committed submission, drawn from a fresh seed printed to CI's log,
  is re-run (``submission verify``'s engine, on a copy: CI's verdicts never enter the committed
  files) and matches.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from xaibench.metaeval.assess import Validity
from xaibench.plugins.manager import get_registry
from xaibench.publish.verify import verify_submission
from xaibench.record import build_record_board, check_record_board
from xaibench.record.validity import read_validity, write_validity
from xaibench.suites.record import RECORD_SUITE

ROOT = Path(__file__).resolve().parents[1] / "record" / RECORD_SUITE
SUBMISSIONS = sorted((ROOT / "submissions").glob("*.json")) if ROOT.is_dir() else []
BOARD_FILES = ("leaderboard.csv", "leaderboard.json")
SHARED = Path(os.environ.get("XAIBENCH_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")


def _copy_record(tmp_path: Path, names: list[str] | None = None) -> Path:
    """A copy of the committed record's submissions (``names``: only those explainers) and validity."""
    folder = tmp_path / RECORD_SUITE
    (folder / "submissions").mkdir(parents=True)
    for path in SUBMISSIONS:
        if names is None or path.stem in names:
            shutil.copyfile(path, folder / "submissions" / path.name)
    if (ROOT / "submissions" / "assets").is_dir():
        shutil.copytree(ROOT / "submissions" / "assets", folder / "submissions" / "assets")
    if (ROOT / "meta" / "validity.json").is_file():
        (folder / "meta").mkdir()
        shutil.copyfile(ROOT / "meta" / "validity.json", folder / "meta" / "validity.json")
    return folder


def test_the_committed_board_and_meta_rebuild_byte_for_byte() -> None:
    if not (ROOT / "leaderboard").is_dir():
        pytest.skip(f"no board committed yet ({ROOT}/leaderboard)")
    assert check_record_board(ROOT, RECORD_SUITE) == []


def test_a_rebuild_names_each_file_a_changed_submission_or_an_edited_file_moves(tmp_path: Path) -> None:
    if len(SUBMISSIONS) < 3:
        pytest.skip("the record holds fewer than three submissions")
    names = [p.stem for p in SUBMISSIONS if p.stem not in ("oracle", "ladder", "planted")][:3]
    folder = _copy_record(tmp_path, names)
    build_record_board(folder, RECORD_SUITE)  # no bundle: the package's is the committed record's
    assert check_record_board(folder, RECORD_SUITE, bundle_dir=None) == []  # the same bytes on a second build
    meta = json.loads((folder / "meta" / "meta.json").read_text(encoding="utf-8"))
    assert meta["created"] == max(
        json.loads((folder / "submissions" / f"{n}.json").read_text(encoding="utf-8"))["created"] for n in names
    )
    index = folder / "leaderboard" / "site" / "index.html"
    index.write_text(index.read_text(encoding="utf-8") + "<!-- edited -->", encoding="utf-8")
    (folder / "submissions" / f"{names[0]}.json").unlink()
    problems = check_record_board(folder, RECORD_SUITE, bundle_dir=None)
    assert f"{folder / 'meta' / 'meta.json'}: differs from its rebuild from the submissions" in problems
    assert f"{index}: differs from its rebuild from the submissions" in problems
    assert any(p.startswith(f"{folder / 'leaderboard' / 'leaderboard.csv'}:") for p in problems)


def test_the_validity_kept_in_the_record_reaches_the_board(tmp_path: Path) -> None:
    names = [p.stem for p in SUBMISSIONS if p.stem not in ("oracle", "ladder", "planted")][:3]
    if len(names) < 3:
        pytest.skip("the record holds fewer than three method submissions")
    folder = _copy_record(tmp_path, names)
    failed = Validity("invalid", "ladder", "m(0) - m(1)", -0.25, -0.3, -0.2, {"levels": 6})
    passed = Validity("valid", "ladder", "m(0) - m(1)", 0.5, 0.45, 0.55, {})
    verdicts = {("shapes", "iou"): failed, ("shapes", "mae"): passed}
    path = write_validity(folder / "meta" / "validity.json", verdicts, suite=RECORD_SUITE, seed=0)
    assert read_validity(path, RECORD_SUITE) == verdicts
    build_record_board(folder, RECORD_SUITE)
    cards = json.loads((folder / "meta" / "meta.json").read_text(encoding="utf-8"))["tracks"]["shapes"]["metrics"]
    assert cards["iou"]["verdict"] == "invalid" and cards["mae"]["validity"]["test"] == "ladder"
    rows = json.loads((folder / "leaderboard" / "leaderboard.json").read_text(encoding="utf-8"))["rows"]
    iou = [r for r in rows if r["track"] == "shapes" and r["metric"] == "iou"]
    assert len(iou) == 3 and all(r["rank"] is None and r["status"].startswith("not ranked: invalid") for r in iou)
    assert any(r["rank"] is not None for r in rows if r["track"] == "shapes" and r["metric"] == "mae")


@pytest.mark.slow
@pytest.mark.parametrize("path", SUBMISSIONS, ids=[p.stem for p in SUBMISSIONS])
def test_a_fresh_sample_of_every_committed_submission_reruns_to_its_values(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, record_verify_seed: int
) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    real = {"human-attention", "voc2012-seg", "oxford-pets", "coco"}
    if real & set(data["tracks"]) and not SHARED.is_dir():
        pytest.skip(f"the record's real tracks need the shared data ({SHARED})")
    monkeypatch.setenv("XAIBENCH_DATA_DIR", str(SHARED))
    monkeypatch.setenv("XAIBENCH_CACHE", str(tmp_path / "cache"))
    seed = record_verify_seed  # fresh each session, printed in the test header (tests/conftest.py)
    copy = tmp_path / path.name
    shutil.copyfile(path, copy)
    result = verify_submission(copy, get_registry(), samples=1, seed=seed, log=print)
    print("\n".join(result.lines()))
    assert result.passed, result.lines()
    assert copy.read_bytes() == path.read_bytes()  # the verdict goes to the log, not into a file


def test_the_readme_shows_the_committed_boards_top_rows(tmp_path: Path) -> None:
    from xaibench.record.readme import START, readme_problem, record_rows, update_readme

    if not (ROOT / "leaderboard").is_dir():
        pytest.skip(f"no board committed yet ({ROOT}/leaderboard)")
    readme = ROOT.parents[1] / "README.md"
    assert readme_problem(readme, ROOT, RECORD_SUITE) is None
    rows = record_rows(ROOT, RECORD_SUITE, "record/record-v1")
    board = json.loads((ROOT / "leaderboard" / "leaderboard.json").read_text(encoding="utf-8"))["rows"]
    first = sorted(
        (r["rank"], r["explainer"])
        for r in board
        if r["metric"] == "rank:overall" and r["track"] == "shapes" and r["rank"]
    )[0]
    assert f"| shapes | {first[1]} ({first[0]}) |" in rows
    assert "oracle" not in rows  # a reference takes no rank, so never a top row
    stale = tmp_path / "README.md"
    stale.write_text(readme.read_text(encoding="utf-8").replace(f"| shapes | {first[1]}", "| shapes | sobel"))
    assert readme_problem(stale, ROOT, RECORD_SUITE) == (
        f"{stale}: its record rows are not the committed board's (run xaibench record board)"
    )
    assert update_readme(stale, ROOT, RECORD_SUITE) and START in stale.read_text(encoding="utf-8")


def test_the_record_site_links_its_submissions_overlays_and_board_files_in_place() -> None:
    """The record's site does not copy the submission files, overlays and leaderboard files (they
    would be in the record twice): its links reach them in ``submissions/`` and ``leaderboard/``,
    and every one resolves."""
    import re

    site = ROOT / "leaderboard" / "site"
    if not site.is_dir():
        pytest.skip(f"no site committed yet ({site})")
    assert not (site / "data" / "submissions").exists() or not any((site / "data" / "submissions").iterdir())
    assert not (site / "assets" / "overlays").exists() or not any((site / "assets" / "overlays").iterdir())
    linked = board_links = 0
    for page in site.rglob("*.html"):
        for href in re.findall(r'(?:href|src)="([^"#?]+)"', page.read_text(encoding="utf-8")):
            if "submissions/" in href and not href.startswith(("http:", "https:")):
                target = (page.parent / href).resolve()
                assert target.is_file(), (page.relative_to(site), href)
                assert target.is_relative_to((ROOT / "submissions").resolve()), href
                linked += 1
            elif href.endswith(("leaderboard.csv", "leaderboard.json")):
                assert (page.parent / href).resolve() in {(ROOT / "leaderboard" / n).resolve() for n in BOARD_FILES}, (
                    href
                )
                board_links += 1
    assert linked >= len(SUBMISSIONS)  # at least each file's own link
    assert not (site / "data" / "leaderboard.json").exists() and board_links >= 2 * len(SUBMISSIONS)
