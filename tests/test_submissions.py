"""Submission files: JSON Schema, line-precise validation, golden files, what `run` writes."""

from __future__ import annotations

import copy
import hashlib
import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from _site_data import submission, write_submissions
from click.testing import CliRunner

from xaibench.api import Explainer, TrackSpec
from xaibench.cli import cli
from xaibench.files import dumps_readable
from xaibench.plugins import manager
from xaibench.publish.board import build_leaderboard
from xaibench.publish.leaderboard import REFERENCE_STATUS
from xaibench.publish.submission import load_submission, load_submissions
from xaibench.publish.submission_files import compact_track, decode_values, encode_values, per_sample
from xaibench.publish.validation import pointer, schema_errors, submission_schema, validate_file, validate_text
from xaibench.runner.distributions import histogram, mean_curve
from xaibench.site import build_site

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden" / "submissions"


def _line_of(text: str, needle: str) -> int:
    """1-based line of the only occurrence of ``needle``."""
    assert text.count(needle) == 1, needle
    return text[: text.index(needle)].count("\n") + 1


def _text(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2) + "\n"


# ----------------------------------------------------------------------------- schema


def test_published_schema_is_the_package_schema_and_a_valid_draft_2020_12_schema() -> None:
    docs = json.loads((REPO / "docs" / "submission.schema.json").read_text(encoding="utf-8"))
    assert docs == submission_schema()
    jsonschema.Draft202012Validator.check_schema(docs)
    assert docs["properties"]["disclosure"]["required"] == ["tuned_on_benchmark"]


@pytest.mark.parametrize("folder", sorted(p.name for p in GOLDEN.iterdir() if p.is_dir() and p.name.startswith("v1")))
def test_golden_submissions_of_every_earlier_format_still_validate_load_rank_and_build(
    folder: str, tmp_path: Path
) -> None:
    root = GOLDEN / folder
    files = sorted(root.glob("*.json"))
    assert files
    for f in files:
        assert validate_file(f) == [], f
        assert load_submission(f)["schema"] == "xaibench.submission/1"
    board = build_leaderboard(root)
    overall = {r["explainer"]: (r["rank"], r["status"]) for r in board.rows if r["metric"] == "rank:overall"}
    # files from before per-sample values: shown, never ranked (paired ranking needs `samples`)
    # (the oracle is a reference: never ranked, whatever its file holds; DESIGN 10)
    assert overall == {
        **dict.fromkeys(("gradient", "random"), (None, "not ranked: no per-sample values")),
        "oracle": (None, REFERENCE_STATUS),
    }
    iou = {r["explainer"]: r for r in board.rows if r["metric"] == "iou"}
    assert iou["oracle"]["value"] is not None and iou["oracle"]["status"] == REFERENCE_STATUS
    pages = build_site(root, tmp_path / "site")
    assert (tmp_path / "site" / "index.html") in pages
    shown = sum(p.read_text(encoding="utf-8").count('<img src="../assets/overlays/') for p in pages)
    assert shown == (3 if folder == "v1-with-extras" else 0)


# ----------------------------------------------------------------------------- validation errors


@pytest.fixture()
def valid(tmp_path: Path) -> dict[str, Any]:
    data = submission("alpha", tmp_path)
    assert validate_text(_text(data), "alpha.json", tmp_path) == []
    return data


def test_samples_sanity_family_and_verification_are_in_the_schema_and_checked(valid: dict[str, Any]) -> None:
    data = copy.deepcopy(valid)
    iou = data["tracks"]["synth-a"]["metrics"]["iou"]
    iou["samples"] = {f"s{k}": 0.62 for k in range(10)}  # n = 10, n_na = 0
    iou.update(ci_low=0.62, ci_high=0.62)  # the bootstrap of ten equal values
    mae = data["tracks"]["synth-b"]["metrics"]["mae"]
    mae["family"] = "sanity"
    data["verification"] = {
        "verified_at": "2026-02-01T10:00:00+00:00",
        "checked": 8,
        "matched": 8,
        "tolerance": 1e-6,
        "passed": True,
        "xaibench": "0.2.0",
    }
    assert validate_text(_text(data), "alpha.json") == []
    iou["samples"]["s0"] = None  # now 9 values and 1 null, but n = 10, n_na = 0
    iou["samples"]["s1"] = "x"
    data["verification"]["checked"] = -1
    del data["verification"]["passed"]
    text = _text(data)
    issues = {(i.pointer, i.message) for i in validate_text(text, "alpha.json")}
    assert (
        "/tracks/synth-a/metrics/iou/samples/s1",
        'schema: "x" is not allowed here: expected type number or null',
    ) in issues
    assert ("/verification/checked", "schema: -1 is not allowed here: minimum 0") in issues
    assert ("/verification", "schema: 'passed' is a required property") in issues
    iou["samples"]["s1"] = 0.5
    data["verification"].update(checked=8, passed=False)
    [issue] = validate_text(_text(data), "alpha.json")
    assert issue.pointer == "/tracks/synth-a/metrics/iou/samples"
    assert issue.message == "samples has 9 values and 1 null but n = 10, n_na = 0"


def test_arrays_of_plain_values_are_checked_as_jsonschema_checks_them(valid: dict[str, Any]) -> None:
    """schema_errors checks arrays of plain values (sample ids, histogram bins, curve points) in one
    loop and hands an array with a bad item to jsonschema's own ``items``: the same findings as
    stock jsonschema, for good and bad items alike."""
    stock_cls = jsonschema.validators.validator_for(submission_schema())
    stock = stock_cls(submission_schema(), format_checker=stock_cls.FORMAT_CHECKER)

    def findings(data: dict[str, Any]) -> tuple[list[str], list[str]]:
        ours = sorted(f"{ptr} {msg}" for ptr, msg in schema_errors(data))
        theirs = sorted(f"{pointer(e.absolute_path)} {e.message}" for e in stock.iter_errors(data))
        return ours, theirs

    metric = next(m for m in valid["tracks"]["synth-a"]["metrics"].values() if "histogram" in m and "curve" in m)
    assert findings(valid)[0] == [] and findings(valid)[1] == []
    metric["histogram"]["counts"][0] = -1  # below the minimum
    metric["histogram"]["counts"][1] = 1.5  # not an integer
    metric["histogram"]["edges"][2] = True  # a boolean is not a number
    metric["curve"]["mean"][3] = "0.5"
    metric["curve"]["fraction"][0] = None
    ours, theirs = findings(valid)
    assert len(ours) == len(theirs) == 5
    assert [o.split(" ", 1)[0] for o in ours] == [t.split(" ", 1)[0] for t in theirs]  # the same places
    metric["histogram"]["counts"][:2] = [2.0, 0]  # 2.0 is an integer in JSON Schema
    metric["histogram"]["edges"][2] = 0.5
    metric["curve"]["mean"][3], metric["curve"]["fraction"][0] = 0.5, 0.0
    assert findings(valid) == ([], [])


def test_json_syntax_error_gives_line_and_column() -> None:
    text = '{\n  "schema": "xaibench.submission/1",\n  "explainer": {"name": "x",}\n}\n'
    [issue] = validate_text(text, "s.json")
    assert (issue.line, issue.column) == (3, 29)
    assert str(issue).startswith("s.json:3:29: invalid JSON")


def test_schema_errors_point_at_the_line_of_the_offending_key(valid: dict[str, Any]) -> None:
    data = copy.deepcopy(valid)
    data["tracks"]["synth-b"]["metrics"]["mae"]["direction"] = "sideways"
    data["tracks"]["synth-a"]["metrics"]["iou"]["n"] = "ten"
    data["explainer"]["kind"] = 7
    text = _text(data)
    issues = validate_text(text, "alpha.json")
    where = {i.pointer: i.line for i in issues}
    assert where == {
        "/explainer/kind": _line_of(text, '"kind": 7'),
        "/tracks/synth-a/metrics/iou/n": _line_of(text, '"n": "ten"'),
        "/tracks/synth-b/metrics/mae/direction": _line_of(text, '"direction": "sideways"'),
    }
    sideways = next(i for i in issues if i.pointer.endswith("direction"))
    assert 'expected one of "higher", "lower"' in sideways.message
    assert [i.line for i in issues] == sorted(i.line for i in issues)


def test_an_error_in_an_array_of_plain_values_points_at_its_item(valid: dict[str, Any]) -> None:
    """Arrays of plain scalars are passed in one step while locating keys; a finding in one still
    points at the line of its own item (found again when needed), in an array on one line too."""
    data = copy.deepcopy(valid)
    counts = data["tracks"]["synth-a"]["metrics"]["iou"]["histogram"]["counts"]
    counts[2] = -7
    text = _text(data)
    issue = next(i for i in validate_text(text, "alpha.json") if i.pointer.endswith("/counts/2"))
    assert issue.line == _line_of(text, "-7")
    start = text.index("[", text.index('"counts": ['))
    end = text.index("]", start) + 1
    flat = text[:start] + json.dumps(counts) + text[end:]
    assert flat != text and _line_of(flat, "-7") < issue.line  # the array now sits on one line
    issue = next(i for i in validate_text(flat, "alpha.json") if i.pointer.endswith("/counts/2"))
    assert (issue.line, issue.column) == (
        _line_of(flat, "-7"), flat.index("-7") - flat.rindex("\n", 0, flat.index("-7"))
    )  # fmt: skip


def test_a_missing_required_key_points_at_the_object_that_lacks_it(valid: dict[str, Any]) -> None:
    data = copy.deepcopy(valid)
    del data["disclosure"]["tuned_on_benchmark"]
    text = _text(data)
    [issue] = validate_text(text, "alpha.json")
    assert issue.pointer == "/disclosure" and issue.line == _line_of(text, '"disclosure": {')
    assert "'tuned_on_benchmark' is a required property" in issue.message


def test_nan_and_duplicate_keys_are_reported_where_they_are() -> None:
    text = '{\n  "schema": "xaibench.submission/1",\n  "seed": 1,\n  "seed": NaN\n}\n'
    messages = {(i.line, i.message.split(" (")[0]) for i in validate_text(text, "x.json")}
    assert (4, "duplicate key 'seed'") in messages
    assert (4, "NaN is not valid JSON; write null for a missing value") in messages


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_files_with_other_line_ends_read_as_text_reads_them(
    tmp_path: Path, valid: dict[str, Any], newline: str
) -> None:
    """Each file is read once as bytes; its text is what ``read_text`` gives (line ends as \\n)."""
    text = _text(valid).replace('"seed": 0', '"seed": 0,\n  "seed": NaN')
    path = tmp_path / "x.json"
    path.write_bytes(text.replace("\n", newline).encode("utf-8"))
    issues = validate_file(path)
    assert issues == validate_text(path.read_text(encoding="utf-8"), str(path), tmp_path)
    assert {i.line for i in issues} == {_line_of(text, '"seed": NaN')}
    path.write_bytes(_text(valid).replace("\n", newline).encode("utf-8"))
    assert validate_file(path) == [] and load_submission(path) == valid


def test_consistency_errors_interval_counts_disclosure(valid: dict[str, Any]) -> None:
    data = copy.deepcopy(valid)
    iou = data["tracks"]["synth-a"]["metrics"]["iou"]
    iou["ci_low"] = 0.987654  # above the mean 0.62
    iou["histogram"]["counts"][0] = 3  # counts now add up to n + 3
    data["tracks"]["synth-b"]["metrics"]["mae"]["n_na"] = 4  # n + n_na != n_samples
    data["explainer"]["tuned_on_benchmark"] = True  # but the disclosure says false
    text = _text(data)
    issues = {i.pointer: (i.line, i.message) for i in validate_text(text, "alpha.json")}
    assert issues["/tracks/synth-a/metrics/iou/ci_low"][0] == _line_of(text, '"ci_low": 0.987654')
    assert "does not contain the mean 0.62" in issues["/tracks/synth-a/metrics/iou/ci_low"][1]
    assert "counts add up to 13 but n = 10" in issues["/tracks/synth-a/metrics/iou/histogram/counts"][1]
    assert "n_samples = 10" in issues["/tracks/synth-b/metrics/mae/n"][1]
    assert issues["/disclosure/tuned_on_benchmark"][0] == _line_of(text, '"tuned_on_benchmark": false,\n    "reference')


def test_overlay_files_are_checked_path_signature_and_digest(tmp_path: Path, valid: dict[str, Any]) -> None:
    data = copy.deepcopy(valid)
    examples = data["tracks"]["synth-a"]["examples"]
    (tmp_path / examples[0]["jpeg"]).write_bytes(b"\xff\xd8\xff tampered")
    examples[1]["jpeg"] = "assets/alpha@abc/synth-a/missing.jpg"
    path = tmp_path / "alpha.json"
    path.write_text(_text(data), encoding="utf-8")
    issues = {i.pointer: i.message for i in validate_file(path)}
    assert "sha256 differs" in issues["/tracks/synth-a/examples/0/jpeg"]
    assert "not found" in issues["/tracks/synth-a/examples/1/jpeg"]
    assert len(issues) == 2
    data["tracks"]["synth-b"]["examples"][0]["jpeg"] = "assets/../../etc/passwd.jpg"
    path.write_text(_text(data), encoding="utf-8")
    issues = {i.pointer: i.message for i in validate_file(path)}
    assert "pattern" in issues["/tracks/synth-b/examples/0/jpeg"]


def _as_png_entry(example: dict[str, Any], folder: Path) -> None:
    """Turn a ``jpeg`` example entry into one as older submissions wrote it: a PNG file, ``png``."""
    from PIL import Image

    jpg = folder / example.pop("jpeg")
    buf = io.BytesIO()
    Image.open(jpg).save(buf, format="PNG")
    png = jpg.with_suffix(".png")
    png.write_bytes(buf.getvalue())
    example["png"] = png.relative_to(folder).as_posix()
    example["sha256"] = hashlib.sha256(png.read_bytes()).hexdigest()


def test_an_older_png_overlay_still_validates_and_is_shown(tmp_path: Path, valid: dict[str, Any]) -> None:
    data = copy.deepcopy(valid)
    _as_png_entry(data["tracks"]["synth-a"]["examples"][0], tmp_path)
    path = tmp_path / "alpha.json"
    path.write_text(_text(data), encoding="utf-8")
    assert validate_file(path) == []
    pages = build_site(tmp_path, tmp_path / "site")
    page = next(p for p in pages if p.name == "alpha.html").read_text(encoding="utf-8")
    shown = re.findall(r'<img src="\.\./(assets/overlays/[0-9a-f]{24}\.(?:jpg|png))"', page)
    assert len(shown) == 4 and sum(s.endswith(".png") for s in shown) == 1
    assert all((tmp_path / "site" / s).is_file() for s in shown)
    # a PNG file under a png key that is not a PNG is refused, as before
    (tmp_path / data["tracks"]["synth-a"]["examples"][0]["png"]).write_bytes(b"\xff\xd8\xff not a png")
    [issue] = validate_file(path)
    assert issue.pointer == "/tracks/synth-a/examples/0/png" and issue.message == "the overlay file is not a PNG"


def test_a_jpeg_overlay_with_a_wrong_signature_or_digest_is_one_line(tmp_path: Path, valid: dict[str, Any]) -> None:
    data = copy.deepcopy(valid)
    path = tmp_path / "alpha.json"
    path.write_text(_text(data), encoding="utf-8")
    overlay = tmp_path / data["tracks"]["synth-a"]["examples"][0]["jpeg"]
    good = overlay.read_bytes()
    overlay.write_bytes(good + b"x")  # the digest no longer matches
    [issue] = validate_file(path)
    assert issue.pointer == "/tracks/synth-a/examples/0/jpeg" and "\n" not in str(issue)
    assert issue.message == "the overlay file's sha256 differs from the recorded one"
    png = b"\x89PNG\r\n\x1a\n" + good[3:]  # not a JPEG, whatever its name, even with the digest recorded
    overlay.write_bytes(png)
    data["tracks"]["synth-a"]["examples"][0]["sha256"] = hashlib.sha256(png).hexdigest()
    path.write_text(_text(data), encoding="utf-8")
    [issue] = validate_file(path)
    assert issue.pointer == "/tracks/synth-a/examples/0/jpeg" and "\n" not in str(issue)
    assert issue.message == "the overlay file is not a JPEG"
    assert not (tmp_path / "site").exists()
    build_site(tmp_path, tmp_path / "site", validate=False)  # the site does not show it either
    page = (tmp_path / "site" / "explainers" / "alpha.html").read_text(encoding="utf-8")
    assert page.count('<img src="../assets/overlays/') == 3


def test_an_example_naming_both_a_jpeg_and_a_png_is_refused(tmp_path: Path, valid: dict[str, Any]) -> None:
    data = copy.deepcopy(valid)
    example = data["tracks"]["synth-a"]["examples"][0]
    example["png"] = example["jpeg"].removesuffix(".jpg") + ".png"
    text = _text(data)
    [issue] = validate_text(text, "alpha.json", tmp_path)
    assert issue.pointer == "/tracks/synth-a/examples/0" and "\n" not in str(issue)
    assert issue.message == "schema: jpeg and png are not allowed together (one of them)"
    assert issue.line == _line_of(text, f'"jpeg": "{example["jpeg"]}"') - 5  # the entry's opening brace


def test_jpeg_overlays_are_deterministic_baseline_and_close_to_the_render() -> None:
    from PIL import Image

    from xaibench.pasta.render import render_overlay
    from xaibench.publish.examples import JPEG_QUALITY, jpeg_bytes

    y, x = np.mgrid[0:40, 0:40] / 39.0
    photo = np.stack([x, y, (x + y) / 2], axis=-1)  # smooth, as photographs mostly are
    image = render_overlay(photo, np.exp(-((x - 0.4) ** 2 + (y - 0.6) ** 2) * 8))
    first, second = jpeg_bytes(image), jpeg_bytes(image.copy())
    assert first == second and first.startswith(b"\xff\xd8\xff")
    assert b"\xff\xc0" in first and b"\xff\xc2" not in first  # baseline (SOF0), not progressive (SOF2)
    decoded = Image.open(io.BytesIO(first))
    assert decoded.format == "JPEG" and decoded.mode == "RGB" and decoded.size == (224, 224)
    assert not decoded.info.get("progressive") and JPEG_QUALITY == 85
    error = np.abs(np.asarray(decoded, dtype=float) - image.astype(float)).mean()
    assert error < 3, error


# ----------------------------------------------------------------------------- submission JSON text


def test_dumps_readable_keeps_arrays_of_scalars_on_one_line() -> None:
    data = {
        "schema": "x",
        "ids": ["a", "b"],
        "values": [0.5, None, 1, -2.5e-07, True],
        "empty": [],
        "none": {},
        "nested": {"histogram": {"edges": [0.0, 0.5, 1.0], "counts": [3, 4]}, "rows": [{"k": [1]}, [2, "x"], []]},
        "text": "caf\u00e9 <b>",
    }
    expected = """{
  "schema": "x",
  "ids": ["a", "b"],
  "values": [0.5, null, 1, -2.5e-07, true],
  "empty": [],
  "none": {},
  "nested": {
    "histogram": {
      "edges": [0.0, 0.5, 1.0],
      "counts": [3, 4]
    },
    "rows": [
      {
        "k": [1]
      },
      [2, "x"],
      []
    ]
  },
  "text": "caf\\u00e9 <b>"
}"""
    assert dumps_readable(data) == expected
    assert json.loads(expected) == data
    plain = {"a": {"b": [], "c": {}, "d": [{"e": None}]}, "f": 1.5}  # no array of scalars: json.dumps' text
    assert dumps_readable(plain) == json.dumps(plain, indent=2)
    with pytest.raises(ValueError, match="Out of range float"):
        dumps_readable({"values": [float("nan")]})


def test_dumps_readable_with_flat_objects_puts_each_object_of_scalars_on_one_line() -> None:
    board = {
        "schema": "b",
        "rules": {"min": 8, "frac": 0.25},
        "rows": [{"track": "t", "rank": 1, "value": 0.5, "status": ""}, {"track": "u", "rank": None, "value": None}],
        "tracks": {"t": {"dataset": {"name": "d"}, "ids": ["a"]}},
        "empty": {},
    }
    expected = """{
  "schema": "b",
  "rules": {"min": 8, "frac": 0.25},
  "rows": [
    {"track": "t", "rank": 1, "value": 0.5, "status": ""},
    {"track": "u", "rank": null, "value": null}
  ],
  "tracks": {
    "t": {
      "dataset": {"name": "d"},
      "ids": ["a"]
    }
  },
  "empty": {}
}"""
    assert dumps_readable(board, flat_objects=True) == expected
    assert json.loads(expected) == board
    with pytest.raises(ValueError, match="Out of range float"):
        dumps_readable({"rows": [{"value": float("inf")}]}, flat_objects=True)


def test_cli_validate_prints_file_line_column_and_exits_1(tmp_path: Path, valid: dict[str, Any]) -> None:
    good = tmp_path / "alpha.json"
    good.write_text(_text(valid), encoding="utf-8")
    bad_data = copy.deepcopy(valid)
    bad_data["schema"] = "xaibench.submission/99"
    bad = tmp_path / "bad.json"
    bad.write_text(_text(bad_data), encoding="utf-8")
    ok = CliRunner().invoke(cli, ["submission", "validate", str(good)])
    assert ok.exit_code == 0 and ok.output.strip() == f"{good}: ok"
    result = CliRunner().invoke(cli, ["submission", "validate", str(tmp_path)])
    assert result.exit_code == 1
    assert f"{bad}:2:3: schema: " in result.output and "(at /schema)" in result.output
    assert f"{good}: ok" in result.output


# ----------------------------------------------------------------------------- distributions


def test_histogram_bins_on_unit_range_with_quantiles() -> None:
    h = histogram([0.05, 0.15, 0.15, 1.0, None, float("nan")], bins=10)  # type: ignore[list-item]
    assert h is not None
    assert h["edges"] == pytest.approx([k / 10 for k in range(11)])
    assert h["counts"] == [1, 2, 0, 0, 0, 0, 0, 0, 0, 1]
    assert h["quantiles"] == pytest.approx([0.05, 0.125, 0.15, 0.3625, 1.0])
    assert histogram([2.0, 4.0], bins=2)["edges"] == [2.0, 3.0, 4.0]  # type: ignore[index]
    assert histogram([5.0], bins=2)["edges"] == [4.5, 5.0, 5.5]  # type: ignore[index]
    assert histogram([]) is None


def test_mean_curve_interpolates_other_grids_and_skips_bad_curves() -> None:
    curves = [
        {"fraction": [0, 0.5, 1], "probability": [1, 0.5, 0]},
        {"fraction": [0, 0.5, 1], "probability": [1, 1, 0]},
        {"fraction": [0, 1], "probability": [0, 0]},  # interpolated onto [0, 0.5, 1]
        {"fraction": [0, 1], "probability": [0]},  # lengths differ: skipped
        {"fraction": [0, 0.5, 1], "probability": [1, float("nan"), 0]},  # NaN: skipped
        None,
    ]
    c = mean_curve(curves)
    assert c is not None and c["n"] == 3
    assert c["fraction"] == [0.0, 0.5, 1.0]
    assert c["mean"] == pytest.approx([2 / 3, 0.5, 0.0], abs=1e-6)
    assert c["q25"] == pytest.approx([0.5, 0.25, 0.0])
    assert mean_curve([None]) is None


# ----------------------------------------------------------------------------- what run writes


def test_run_writes_valid_submissions_with_overlays_histograms_curves(
    tmp_path: Path, registry: manager.Registry
) -> None:
    from xaibench.publish.submission import write_run
    from xaibench.runner.run import RunConfig, run

    config = RunConfig(
        explainers=["random", "oracle"],
        tracks=["shapes"],
        metrics=["iou", "deletion"],
        limit=5,
        workdir=tmp_path / "work",
        progress=False,
        examples=2,
    )
    result = run(config, registry)
    assert "examples" not in result.summary["tracks"]["shapes"]["explainers"]["random"]  # publishing renders them
    assert [(s.track, s.explainer["name"], len(s.examples)) for s in result.examples] == [
        ("shapes", "random", 2),
        ("shapes", "oracle", 2),
    ]
    write_run(result, registry, tmp_path / "subs")
    subs = dict((p.stem, d) for p, d in load_submissions(tmp_path / "subs"))
    assert set(subs) == {"oracle", "random"}
    for path in sorted((tmp_path / "subs").glob("*.json")):
        assert validate_file(path) == [], path
    track = subs["random"]["tracks"]["shapes"]
    assert [e["sample_id"] for e in track["examples"]] == ["shapes-test-0000", "shapes-test-0001"]
    overlay = tmp_path / "subs" / track["examples"][0]["jpeg"]
    assert overlay.name == "0-shapes-test-0000.jpg" and "png" not in track["examples"][0]
    from PIL import Image

    assert Image.open(overlay).size == (224, 224) and Image.open(overlay).format == "JPEG"
    iou = track["metrics"]["iou"]
    assert sum(iou["histogram"]["counts"]) == iou["n"] == 5
    assert subs["random"]["schema"] == "xaibench.submission/2"
    assert track["sample_ids"] == [f"shapes-test-{k:04d}" for k in range(5)]
    assert "samples" not in iou and isinstance(iou["values"], str) and len(iou["values"]) == 56  # 5 x 8 bytes base64
    samples = per_sample(track, iou)
    assert samples is not None and np.mean(list(samples.values())) == pytest.approx(iou["mean"])
    # the round trip: every per-sample value of the run summary reads back bit for bit
    for who in ("random", "oracle"):
        written = subs[who]["tracks"]["shapes"]
        for metric, m in result.summary["tracks"]["shapes"]["explainers"][who]["metrics"].items():
            assert per_sample(written, written["metrics"][metric]) == m["samples"], (who, metric)
    deletion = track["metrics"]["deletion"]["curve"]
    assert deletion["n"] == 5 and len(deletion["fraction"]) == 51 and deletion["fraction"][-1] == 1.0
    records = [json.loads(x) for x in (tmp_path / "work" / "results" / "shapes.jsonl").read_text().splitlines()]
    probs = [
        r["curve"]["probability"] for r in records if r["metric"] == "deletion" and r["explainer"]["name"] == "random"
    ]
    assert deletion["mean"] == pytest.approx(np.mean(probs, axis=0), abs=1e-6)
    assert subs["oracle"]["disclosure"]["reference_only"] is True
    assert subs["random"]["run"]["limit"] == 5
    # arrays of scalars take one line each (sample ids, histograms, curves); everything else is indented by 2
    text = (tmp_path / "subs" / "random.json").read_text(encoding="utf-8")
    assert text == dumps_readable(subs["random"]) + "\n"
    assert '\n      "sample_ids": ["shapes-test-0000", "shapes-test-0001", "shapes-test-0002", ' in text
    assert f'\n            "counts": {json.dumps(iou["histogram"]["counts"])}' in text
    assert f'          "values": "{iou["values"]}"' in text.splitlines()  # base64: one string, one line

    # A submitter's notes and a declared tuning survive a re-run that rewrites the file.
    path = tmp_path / "subs" / "random.json"
    edited = json.loads(path.read_text())
    edited["disclosure"].update(notes="seed sweep done elsewhere", tuned_on_benchmark=True)
    path.write_text(json.dumps(edited))
    write_run(run(config, registry), registry, tmp_path / "subs")
    again = json.loads(path.read_text())
    assert again["disclosure"] == {
        "tuned_on_benchmark": True,
        "reference_only": False,
        "notes": "seed sweep done elsewhere",
    }
    assert again["tracks"]["shapes"]["examples"] == track["examples"]  # same overlays from the cache


class _Concepts(Explainer):
    name = "concept-test"
    version = "1.0.0"
    kind = "concept"

    def explain(self, model: Any, inputs: Any, targets: Any, *, seed: int = 0, context: Any = None) -> Any:
        return [{"stripes": 0.5, "<b>fur</b>": 0.9} for _ in range(len(inputs))]


class _FailsOnFirst(Explainer):
    name = "fails-first"
    version = "1.0.0"
    calls = 0

    def explain(self, model: Any, inputs: Any, targets: Any, *, seed: int = 0, context: Any = None) -> Any:
        type(self).calls += 1
        if any(s.id == "shapes-test-0000" for s in context.samples):
            raise RuntimeError("boom")
        return np.ones((len(inputs), *inputs.shape[-2:]), dtype=np.float32) + np.arange(inputs.shape[-1])


def test_examples_concept_sentences_and_failed_samples_are_not_retried(tmp_path: Path) -> None:
    from xaibench.pasta.render import concept_sentence
    from xaibench.plugins.manager import get_registry
    from xaibench.publish.examples import render_examples
    from xaibench.runner.examples import collect_examples
    from xaibench.runner.track import load_track

    track = load_track(TrackSpec(name="shapes", dataset="shapes", model="shapes-cnn"), get_registry(), limit=3)
    block = {"name": "x", "params_digest": "d"}
    chosen = collect_examples(track, _Concepts(), block, {}, cache=None, seed=0, timeout=None, k=2)
    entries = render_examples(chosen, tmp_path)
    names = [track.model.label_names[int(t)] for t in track.targets[:2]]
    assert [e["sentence"] for e in entries] == [
        concept_sentence({"stripes": 0.5, "<b>fur</b>": 0.9}, target=n) for n in names
    ]
    assert all("jpeg" not in e for e in entries) and entries[0]["render"] == "xaibench-concept-sentence/1"

    explainer = _FailsOnFirst()
    have = {"shapes-test-0001": np.eye(track.inputs.shape[-1], dtype=np.float32)}
    failed = {"shapes-test-0000": "explainer raised RuntimeError: boom"}
    chosen = collect_examples(track, explainer, block, have, cache=None, seed=0, timeout=None, k=3, failed=failed)
    assert _FailsOnFirst.calls == 1  # only sample 2 was explained here: 0 failed this run, 1 was given
    assert [e.sample_id for e in chosen.examples] == [s.id for s in track.samples]
    entries = render_examples(chosen, tmp_path)
    assert entries[0] == {**entries[0], "na_reason": failed["shapes-test-0000"]} and "jpeg" not in entries[0]
    assert [e["jpeg"] for e in entries[1:]] == [
        "assets/x@d/shapes/1-shapes-test-0001.jpg",
        "assets/x@d/shapes/2-shapes-test-0002.jpg",
    ]
    from PIL import Image

    from xaibench.pasta.render import render_overlay

    shown = np.asarray(Image.open(tmp_path / entries[1]["jpeg"]), dtype=float)  # JPEG: close, not exact
    assert np.abs(shown - render_overlay(track.samples[1].image, have["shapes-test-0001"])).mean() < 8


def test_submitting_doc_commands_exist_and_screenshot_is_a_small_png() -> None:
    text = (REPO / "docs" / "submitting.md").read_text(encoding="utf-8")
    assert "![The leaderboard site](img/site.png)" in text
    shot = REPO / "docs" / "img" / "site.png"
    assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n") and shot.stat().st_size < 300_000
    runner = CliRunner()
    validate_help = runner.invoke(cli, ["submission", "validate", "--help"]).output
    build_help = runner.invoke(cli, ["leaderboard", "build", "--help"]).output
    assert "FILE:LINE:COLUMN" in validate_help
    for option in ("--submissions", "--out", "--site", "--no-site"):
        assert option in build_help and option in text


# ----------------------------------------------------------------------------- xaibench.submission/2


def _as_v2(data: dict[str, Any]) -> dict[str, Any]:
    """A /1 submission in the /2 layout, as the writer makes it."""
    out = copy.deepcopy(data)
    out["schema"] = "xaibench.submission/2"
    out["tracks"] = {name: compact_track(t) for name, t in out["tracks"].items()}
    return out


def test_golden_v2_files_validate_load_rank_and_build(tmp_path: Path) -> None:
    root = GOLDEN / "v2-compact"
    files = sorted(root.glob("*.json"))
    assert [f.stem for f in files] == ["gradient", "oracle", "random"]
    for f in files:
        assert validate_file(f) == [], f
        data = load_submission(f)
        assert data["schema"] == "xaibench.submission/2"
        track = data["tracks"]["shapes"]
        assert track["sample_ids"] == [f"shapes-test-{k:04d}" for k in range(8)]
        for block in track["metrics"].values():
            samples = per_sample(track, block)
            assert samples is not None and sum(v is not None for v in samples.values()) == block["n"]
    board = build_leaderboard(root)
    overall = {r["explainer"]: r["rank"] for r in board.rows if r["metric"] == "rank:overall"}
    # the methods in the order the run that wrote them ranked them; the oracle, a reference, takes no rank
    assert overall == {"oracle": None, "gradient": 1, "random": 2}
    assert (tmp_path / "site" / "index.html") in build_site(root, tmp_path / "site")


def test_compact_track_layout_arithmetic_and_round_trip(valid: dict[str, Any]) -> None:
    v1_track = valid["tracks"]["synth-a"]
    track = compact_track(v1_track)
    ids = list(v1_track["metrics"]["iou"]["samples"])
    assert len(ids) == 10 and track["sample_ids"] == ids
    assert list(track) == ["provenance", "explained", "explain_seconds", "sample_ids", "metrics", "examples"]
    for name, block in track["metrics"].items():
        assert "samples" not in block and "sample_ids" not in block
        # 10 float64 = 80 bytes -> 4 * ceil(80 / 3) = 108 base64 characters (10.8 a value)
        assert len(block["values"]) == 108
        assert per_sample(track, block) == v1_track["metrics"][name]["samples"]  # bit for bit, None for n/a
        kept = {k: v for k, v in v1_track["metrics"][name].items() if k != "samples"}
        assert {k: v for k, v in block.items() if k != "values"} == kept  # the rest keeps its meaning
    assert compact_track(track) == track  # a /2 block comes back equal
    # 1,000 samples: 8,000 bytes -> 10,668 characters; 20 tracks x 30 metrics of them = 6.4 MB
    assert len(encode_values([0.5] * 1000)) == 10668
    # a metric with other samples than the track's keeps its own ids; n/a is NaN, read back as None
    other = copy.deepcopy(v1_track)
    other["metrics"]["mae"]["samples"] = {"x": 0.25, "y": None}
    mixed = compact_track(other)
    assert mixed["metrics"]["mae"]["sample_ids"] == ["x", "y"] and "sample_ids" not in mixed["metrics"]["iou"]
    assert per_sample(mixed, mixed["metrics"]["mae"]) == {"x": 0.25, "y": None}
    assert np.isnan(decode_values(mixed["metrics"]["mae"]["values"])[1])
    # a hand-written /2 array reads like the base64 form
    assert per_sample({"sample_ids": ["a", "b"]}, {"values": [0.25, None]}) == {"a": 0.25, "b": None}


def test_a_metric_with_every_sample_na_keeps_its_reason_once_and_no_values(
    valid: dict[str, Any], tmp_path: Path
) -> None:
    """An explainer that cannot apply to a track (attention rollout on a CNN): each metric says
    so in ``na_reasons`` and writes ``values: null``, not one NaN per sample."""
    track = copy.deepcopy(valid["tracks"]["synth-a"])
    reason = "explainer raised ValueError: needs a vision transformer"
    for block in track["metrics"].values():
        n = len(block["samples"])
        block["samples"] = dict.fromkeys(block["samples"])
        block.update(mean=None, ci_low=None, ci_high=None, n=0, n_na=n, na_reasons={reason: n})
        for optional in ("histogram", "curve"):
            block.pop(optional, None)
    compact = compact_track(track)
    for name, block in compact["metrics"].items():
        assert block["values"] is None and block["na_reasons"] == {reason: 10}
        assert per_sample(compact, block) == track["metrics"][name]["samples"]  # every sample None
    assert compact_track(compact) == compact
    data = _as_v2(valid)
    data["tracks"]["synth-a"] = compact
    text = _text(data)
    assert validate_text(text, "alpha.json", tmp_path) == []
    # the same file with one NaN per sample is larger by the base64 of 10 float64 per metric
    spelled = copy.deepcopy(data)
    for block in spelled["tracks"]["synth-a"]["metrics"].values():
        block["values"] = encode_values([None] * 10)
    assert validate_text(_text(spelled), "alpha.json", tmp_path) == []
    assert len(_text(spelled)) - len(text) >= len(compact["metrics"]) * (108 - 4)


def test_v2_validates_and_builds_the_same_leaderboard_rows_as_v1(tmp_path: Path) -> None:
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    write_submissions(v1, ("alpha", "beta", "gamma"))
    shutil.copytree(v1, v2)
    for path in sorted(v2.glob("*.json")):
        path.write_text(_text(_as_v2(json.loads(path.read_text(encoding="utf-8")))), encoding="utf-8")
        assert validate_file(path) == [], path
        assert load_submission(path)["schema"] == "xaibench.submission/2"
    rows = build_leaderboard(v1).rows
    assert any(r["rank"] is not None for r in rows)  # ranked: the per-sample values were read
    assert build_leaderboard(v2).rows == rows


@pytest.mark.parametrize("folder", sorted(p.name for p in GOLDEN.iterdir() if p.is_dir() and p.name.startswith("v1")))
def test_golden_v1_files_build_the_same_rows_as_their_v2_layout(folder: str, tmp_path: Path) -> None:
    root = tmp_path / folder
    shutil.copytree(GOLDEN / folder, root)
    before = build_leaderboard(root).rows
    for path in sorted(root.glob("*.json")):
        path.write_text(_text(_as_v2(json.loads(path.read_text(encoding="utf-8")))), encoding="utf-8")
        assert validate_file(path) == [], path
    assert build_leaderboard(root).rows == before


def _values_of(track: dict[str, Any], metric: str) -> list[float | None]:
    return [None if np.isnan(v) else v for v in decode_values(track["metrics"][metric]["values"]).tolist()]


def _break(data: dict[str, Any], case: str) -> None:
    track = data["tracks"]["synth-a"]
    iou = track["metrics"]["iou"]
    values = _values_of(track, "iou")
    if case == "short":
        iou["values"] = encode_values(values[:-1])
    elif case == "duplicate-id":
        track["sample_ids"][1] = track["sample_ids"][0]
    elif case == "infinite":
        iou["values"] = encode_values([float("inf"), *values[1:]])
    elif case == "not-base64":
        iou["values"] = iou["values"][:-2]  # valid characters, broken padding
    elif case == "not-float64":
        iou["values"] = encode_values(values)[:-12] + "AAAA"  # 24 groups of 3 bytes, then 3 bytes: 75
    elif case == "no-ids":
        del track["sample_ids"]
        for name, block in track["metrics"].items():
            if name != "iou":
                del block["values"]
    elif case == "v1-key":
        iou["samples"] = {}
    elif case == "string-item":
        iou["values"] = ["x", *values[1:]]
    elif case == "na-count":
        iou["values"] = encode_values([None, *values[1:]])
    elif case == "tampered":
        first = values[0]
        assert first is not None
        # within IoU's range [0, 1] (a value outside it is refused on its own), so only the mean is wrong
        iou["values"] = encode_values([first + 0.5 if first + 0.5 <= 1.0 else first - 0.5, *values[1:]])
    elif case == "null-with-values":
        iou["values"] = None  # "every sample n/a", but the summary counts 10 values


@pytest.mark.parametrize(
    ("case", "where", "message"),
    [
        ("short", "iou/values", "values has 9 entries but sample_ids has 10"),
        ("duplicate-id", "synth-a/sample_ids", "is listed twice in sample_ids (each sample once)"),
        ("infinite", "iou/values/0", "per-sample value of 's00' is inf, not a finite number"),
        ("not-base64", "iou/values", "values is not valid base64"),
        ("not-float64", "iou/values", "values decodes to 75 bytes, not a whole number of float64"),
        ("no-ids", "iou/values", "values without sample_ids (on the track or the metric)"),
        ("v1-key", "iou/samples", "samples is a key of xaibench.submission/1"),
        ("string-item", "iou/values", "schema: "),
        ("na-count", "iou/values", "values has 9 values and 1 n/a but n = 10, n_na = 0"),
        ("tampered", "iou/mean", "per-sample values average"),
        ("null-with-values", "iou/values", "values has 0 values and 10 n/a but n = 10, n_na = 0"),
    ],
)
def test_each_malformed_v2_case_is_one_line_naming_file_and_path(
    tmp_path: Path, valid: dict[str, Any], case: str, where: str, message: str
) -> None:
    data = _as_v2(valid)
    assert validate_text(_text(data), "alpha.json", tmp_path) == []
    _break(data, case)
    path = tmp_path / "alpha.json"
    path.write_text(_text(data), encoding="utf-8")
    [issue] = validate_file(path)
    assert issue.file == str(path) and issue.pointer.endswith(where), issue
    assert message in issue.message, issue
    assert str(issue).startswith(f"{path}:{issue.line}:{issue.column}: ")


def test_a_run_adding_a_track_to_a_v1_file_rewrites_it_whole_as_v2(valid: dict[str, Any]) -> None:
    from xaibench.publish.submission import build_submission

    old = valid["tracks"]["synth-a"]
    new = copy.deepcopy(valid["tracks"]["synth-b"])
    summary: Any = {
        "schema": "xaibench.summary/1",
        "run": {"seed": valid["seed"], "suite": "synthetic", "plugins": []},
        "tracks": {
            "synth-b": {
                "provenance": new["provenance"],
                "explainers": {
                    "alpha": {
                        "explainer": valid["explainer"],
                        "explained": new["explained"],
                        "explain_seconds": new["explain_seconds"],
                        "metrics": new["metrics"],
                    }
                },
            }
        },
    }
    data = build_submission(summary, "alpha", {"tracks": {"synth-a": old}, "disclosure": valid["disclosure"]})
    assert data["schema"] == "xaibench.submission/2" and list(data["tracks"]) == ["synth-a", "synth-b"]
    for name, before in (("synth-a", old), ("synth-b", new)):
        track = data["tracks"][name]
        assert "sample_ids" in track
        for metric, block in track["metrics"].items():
            assert "samples" not in block
            assert per_sample(track, block) == before["metrics"][metric]["samples"], (name, metric)
    assert validate_text(_text(dict(data)), "alpha.json") == []


def test_two_malformed_v2_problems_are_two_lines(valid: dict[str, Any]) -> None:
    data = _as_v2(valid)
    _break(data, "duplicate-id")
    _break(data, "short")
    issues = validate_text(_text(data), "alpha.json")
    assert [(i.pointer, i.message) for i in issues] == [
        ("/tracks/synth-a/sample_ids", "sample id 's00' is listed twice in sample_ids (each sample once)"),
        ("/tracks/synth-a/metrics/iou/values", "values has 9 entries but sample_ids has 10"),
    ]


def test_a_rewritten_submission_keeps_earlier_tracks_only_of_the_same_explainer_version(
    tmp_path: Path, registry: manager.Registry
) -> None:
    from xaibench.publish.submission import write_run
    from xaibench.runner.run import RunConfig, run

    config = RunConfig(
        explainers=["random"], tracks=["shapes"], metrics=["iou"], limit=2, workdir=tmp_path / "work", progress=False
    )
    result = run(config, registry)
    folder = tmp_path / "subs"
    for version, kept in ((None, True), ("0.0.1", False)):
        (path,) = write_run(result, registry, folder)
        data = json.loads(path.read_text(encoding="utf-8"))
        data["tracks"]["earlier"] = data["tracks"]["shapes"]  # a track this run does not compute
        if version is not None:
            data["explainer"]["version"] = version  # ... computed with another version of the explainer
        path.write_text(json.dumps(data), encoding="utf-8")
        write_run(result, registry, folder)
        tracks = json.loads(path.read_text(encoding="utf-8"))["tracks"]
        assert ("earlier" in tracks) is kept, version
        assert validate_file(path) == []
