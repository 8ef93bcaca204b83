"""A run of the official suite joins the record that travels with the package (issue 41, point 5).

- The bundle keeps every record submission's values and provenance, and nothing only the site
  shows; it is the same bytes for the same submissions, and the committed one is the bundle of
  the committed record (``xaibench record check``, tests/test_record_board.py).
- ``xaibench run -e NAME --suite record-v1`` runs NAME only, writes the record's submissions
  beside its own, and ranks NAME against them in the printed table and in the leaderboard files.
- What must match (dataset revision, model identity, each metric's version and parameters) is
  checked; a mismatch is one line and nothing is joined. A submission the join did not write is
  never overwritten.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from xaibench.cli import cli
from xaibench.publish import record_bundle
from xaibench.publish.record_bundle import bundle_bytes, join_record, make_bundle, read_bundle, values_only
from xaibench.publish.validation import validate_file
from xaibench.suites.record import RECORD_SUITE

ROOT = Path(__file__).resolve().parents[1] / "record" / RECORD_SUITE
SUBMISSIONS = ROOT / "submissions"
NEEDED = ("center.json", "deeplift.json")


def _need_record() -> None:
    if not all((SUBMISSIONS / n).is_file() for n in NEEDED):
        pytest.skip(f"the record does not hold {', '.join(NEEDED)} yet")


@pytest.fixture()
def bundle_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A package bundle made of two committed record submissions (center and deeplift)."""
    _need_record()
    folder = tmp_path / "subs"
    folder.mkdir()
    for name in NEEDED:
        (folder / name).write_bytes((SUBMISSIONS / name).read_bytes())
    target = tmp_path / "bundle"
    target.mkdir()
    (target / f"{RECORD_SUITE}.json.gz").write_bytes(bundle_bytes(make_bundle(folder, RECORD_SUITE)))
    monkeypatch.setattr(record_bundle, "BUNDLE_DIR", target)
    return target


def test_the_bundle_keeps_values_and_provenance_only_and_the_same_bytes(tmp_path: Path) -> None:
    _need_record()
    data = json.loads((SUBMISSIONS / "center.json").read_text(encoding="utf-8"))
    lean = values_only(data)
    track = lean["tracks"]["shapes"]
    assert "examples" not in track and "examples" in data["tracks"]["shapes"]
    assert all("histogram" not in m and "curve" not in m for m in track["metrics"].values())
    assert track["metrics"]["iou"]["values"] == data["tracks"]["shapes"]["metrics"]["iou"]["values"]
    assert lean["tracks"]["shapes"]["provenance"] == data["tracks"]["shapes"]["provenance"]
    path = tmp_path / "center.json"
    path.write_text(json.dumps(lean), encoding="utf-8")
    assert validate_file(path) == []  # it still validates (and ranks: its values are all there)
    bundle = make_bundle(SUBMISSIONS, RECORD_SUITE)
    assert bundle_bytes(bundle) == bundle_bytes(make_bundle(SUBMISSIONS, RECORD_SUITE))
    assert gzip.decompress(bundle_bytes(bundle))[:40].startswith(b'{"schema":"xaibench.record-bundle/1"')
    with pytest.raises(Exception, match="not a submission of record-v0"):
        make_bundle(SUBMISSIONS, "record-v0")


def _summary(track: str, revision: str, model: str, metric: str, version: str, params: dict) -> dict:
    return {
        "run": {"torch": "2.x", "platform": "here", "device": "cpu"},
        "tracks": {
            track: {
                "provenance": {"dataset": {"revision": revision}, "model": {"identity": model}},
                "explainers": {"mine": {"metrics": {metric: {"version": version, "params": params}}}},
            }
        },
    }


def test_a_run_that_differs_from_the_record_is_named_in_one_line_and_not_joined(
    bundle_dir: Path, tmp_path: Path
) -> None:
    record = read_bundle(RECORD_SUITE)
    assert record is not None
    prov = record["submissions"]["center.json"]["tracks"]["shapes"]["provenance"]
    iou = record["submissions"]["center.json"]["tracks"]["shapes"]["metrics"]["iou"]
    revision, model = prov["dataset"]["revision"], prov["model"]["identity"]
    subs = tmp_path / "run-subs"
    subs.mkdir()
    cases = {
        "revision": (_summary("shapes", "0" * 16, model, "iou", iou["version"], iou["params"]), "dataset revision"),
        "model": (_summary("shapes", revision, "other/model@1", "iou", iou["version"], iou["params"]), "model"),
        "version": (_summary("shapes", revision, model, "iou", "9.9.9", iou["params"]), "version 9.9.9 here"),
        "params": (_summary("shapes", revision, model, "iou", iou["version"], {"k": 3}), "parameters {'k': 3} here"),
        "track": (_summary("elsewhere", revision, model, "iou", iou["version"], iou["params"]), "is not in the record"),
    }
    for case, (summary, said) in cases.items():
        joined = join_record(subs, summary, RECORD_SUITE)
        assert joined is not None and not joined.joined and not joined.files, case
        [line] = joined.lines
        assert line.startswith(f"not ranked against the record of {RECORD_SUITE}: ") and said in line, (case, line)
    assert list(subs.iterdir()) == []  # nothing written
    ok = join_record(subs, _summary("shapes", revision, model, "iou", iou["version"], iou["params"]), RECORD_SUITE)
    assert ok is not None and ok.joined and sorted(p.name for p in ok.files) == sorted(NEEDED)
    assert "torch 2.x on here" in ok.lines[-1]  # informative only
    assert join_record(subs, {"tracks": {}}, "default") is None  # a suite without a record


def test_the_join_never_overwrites_a_submission_it_did_not_write(bundle_dir: Path, tmp_path: Path) -> None:
    record = read_bundle(RECORD_SUITE)
    assert record is not None
    prov = record["submissions"]["center.json"]["tracks"]["shapes"]["provenance"]
    summary = {"run": {}, "tracks": {"shapes": {"provenance": prov, "explainers": {}}}}
    subs = tmp_path / "run-subs"
    subs.mkdir()
    own = subs / "deeplift.json"
    own.write_text("my own deeplift run\n", encoding="utf-8")
    first = join_record(subs, summary, RECORD_SUITE)
    assert first is not None and [p.name for p in first.files] == ["center.json"]
    assert own.read_text(encoding="utf-8") == "my own deeplift run\n"
    (subs / "center.json").write_text("edited by hand\n", encoding="utf-8")
    again = join_record(subs, summary, RECORD_SUITE)
    assert again is not None and again.files == []  # edited since the join wrote it: kept
    assert (subs / "center.json").read_text(encoding="utf-8") == "edited by hand\n"


@pytest.mark.slow
def test_run_of_one_explainer_on_the_official_suite_is_ranked_against_the_record(
    bundle_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XAIBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "250")
    result = CliRunner().invoke(
        cli, ["run", "-e", "gradient", "--suite", RECORD_SUITE, "--track", "shapes", "--metric", "iou", "--quiet"]
    )
    assert result.exit_code == 0, result.output
    assert f"ranked against the record of {RECORD_SUITE}: 2 of its submissions" in result.output
    records = [json.loads(x) for x in (tmp_path / ".xaibench" / "results" / "shapes.jsonl").read_text().splitlines()]
    assert {r["explainer"]["name"] for r in records} == {"gradient"}  # only the new explainer was explained
    rows = json.loads((tmp_path / "leaderboard" / "leaderboard.json").read_text(encoding="utf-8"))["rows"]
    iou = {r["explainer"]: r["rank"] for r in rows if r["track"] == "shapes" and r["metric"] == "iou"}
    assert set(iou) == {"gradient", "center", "deeplift"} and all(v is not None for v in iou.values())
    table = result.output[result.output.index("shapes") :]
    assert "deeplift" in table and "center" in table  # the printed table ranks it against them too
