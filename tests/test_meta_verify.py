"""``xaibench submission verify --meta`` (DESIGN 9, issue 26): a meta.json is re-run from its
submissions. Its digests must match (else exit 2 with the digest line); every figure computed from
the submissions alone is recomputed with the recorded seed and compared within 1e-9 (a tampered
figure: exit 1 naming track, metric and figure); ``--rerun-tests`` re-runs the validity tests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import xaibench
from xaibench.cli import cli
from xaibench.metaeval.verify import TOLERANCE, compare, recompute, rerun_differences


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small meta of the shapes track: ``<root>/meta/meta.json`` beside ``<root>/submissions``."""
    root = tmp_path_factory.mktemp("meta-verify")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XAIBENCH_CACHE", str(root / "cache"))
        xaibench.meta(
            "gradient,random,center",
            suite="default",
            tracks="shapes",
            metrics="iou,deletion",
            limit=8,
            output_path=root / "run",
            progress=False,
        )
    return root / "run"


@pytest.fixture
def copy(built: Path, tmp_path: Path) -> Path:
    """A copy of the built run (meta and submissions), free to tamper with."""
    shutil.copytree(built / "meta", tmp_path / "run" / "meta")
    shutil.copytree(built / "submissions", tmp_path / "run" / "submissions")
    return tmp_path / "run"


def _verify(*args: object) -> Result:
    return CliRunner().invoke(cli, ["submission", "verify", *[str(a) for a in args]])


def _lines(result: Result) -> list[str]:
    return [line for line in result.output.splitlines() if line.strip()]


def _edit(path: Path, change: object) -> None:
    data = json.loads(path.read_text())
    change(data)  # type: ignore[operator]
    path.write_text(json.dumps(data, indent=2))


def test_an_untouched_meta_json_verifies(copy: Path) -> None:
    result = _verify("--meta", copy / "meta" / "meta.json")
    assert result.exit_code == 0, result.output
    assert _lines(result) == [_lines(result)[-1]]  # no difference line, the verdict only
    assert _lines(result)[-1].startswith("PASSED: all ") and "validity tests as stored" in result.output


def test_the_submissions_folder_can_be_given(copy: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    shutil.move(copy / "submissions", elsewhere)
    missing = _verify("--meta", copy / "meta" / "meta.json")
    assert missing.exit_code == 2 and "no submissions folder" in missing.output
    assert _verify("--meta", copy / "meta" / "meta.json", elsewhere).exit_code == 0


def test_a_tampered_figure_is_named_and_fails(copy: Path) -> None:
    path = copy / "meta" / "meta.json"
    data = json.loads(path.read_text())["tracks"]["shapes"]
    stored, across = data["metrics"]["deletion"]["stability"]["mean_tau"], data["agreement_means"]["across"]

    def tamper(data: dict) -> None:
        data["tracks"]["shapes"]["metrics"]["deletion"]["stability"]["mean_tau"] = stored - 0.01
        data["tracks"]["shapes"]["agreement_means"]["across"] += 1e-6

    _edit(path, tamper)
    result = _verify("--meta", path)
    assert result.exit_code == 1, result.output
    *differences, verdict = _lines(result)
    assert sorted(differences) == [
        f"shapes/deletion: stability.mean_tau: stored {stored - 0.01!r}, recomputed {stored!r}",
        f"shapes: agreement_means.across: stored {across + 1e-6!r}, recomputed {across!r}",
    ]
    assert verdict.startswith("FAILED: 2 of ")


def test_a_tampered_verdict_fails(copy: Path) -> None:
    path = copy / "meta" / "meta.json"
    _edit(path, lambda d: d["tracks"]["shapes"]["metrics"]["iou"].update(verdict="valid, unstable"))
    result = _verify("--meta", path)
    assert result.exit_code == 1
    assert 'shapes/iou: verdict: stored "valid, unstable", recomputed "valid"' in result.output


def test_a_changed_submission_cannot_be_verified(copy: Path) -> None:
    sub = copy / "submissions" / "gradient.json"
    _edit(sub, lambda d: d.update(created="2000-01-01T00:00:00+00:00"))
    result = _verify("--meta", copy / "meta" / "meta.json")
    assert result.exit_code == 2, result.output
    *lines, verdict = _lines(result)
    assert len(lines) == 1 and lines[0].startswith("digest: submission gradient.json has sha256 ")
    assert verdict.startswith("FAILED:") and "cannot be verified as recorded" in verdict


def test_the_records_are_checked_where_found(built: Path, copy: Path) -> None:
    assert _verify("--meta", built / "meta" / "meta.json").exit_code == 0  # beside the run, found and matching
    records = built / ".xaibench" / "results"
    assert _verify("--meta", copy / "meta" / "meta.json", "--records", records).exit_code == 0
    changed = copy / "records"
    shutil.copytree(records, changed)
    with open(changed / "shapes.jsonl", "a") as f:
        f.write("\n")
    result = _verify("--meta", copy / "meta" / "meta.json", "--records", changed)
    assert result.exit_code == 2
    assert _lines(result)[0].startswith("digest: records file shapes.jsonl has sha256 ")


def test_a_human_ceiling_s_fractions_are_recomputed(copy: Path) -> None:
    path = copy / "meta" / "meta.json"
    ceiling = {"value": 0.5, "n": 8, "pairs": {"a>b": 0.5}, "fractions": {"gradient": 9.0}}
    _edit(path, lambda d: d["tracks"]["shapes"]["metrics"]["iou"].update(human_ceiling=ceiling))
    result = _verify("--meta", path)
    assert result.exit_code == 1
    lines = [x for x in _lines(result) if not x.startswith("FAILED")]
    assert "shapes/iou: human_ceiling.fractions.center: recomputed (" in lines[0]  # and not stored
    assert lines[1].startswith("shapes/iou: human_ceiling.fractions.gradient: stored 9.0, recomputed ")
    fractions = recompute(json.loads(path.read_text()), copy / "submissions")["tracks"]["shapes"]["metrics"]["iou"]
    _edit(path, lambda d: d["tracks"]["shapes"]["metrics"]["iou"].update(human_ceiling=fractions["human_ceiling"]))
    assert _verify("--meta", path).exit_code == 0


def test_a_file_that_is_not_a_meta_json_cannot_be_verified(copy: Path) -> None:
    path = copy / "meta" / "meta.json"
    _edit(path, lambda d: d.update(schema="xaibench.other/1"))
    result = _verify("--meta", path)
    assert result.exit_code == 2 and "not a meta.json of xaibench meta" in result.output


def test_a_validity_test_the_rerun_lacks_differs(built: Path) -> None:
    stored = json.loads((built / "meta" / "meta.json").read_text())
    same, checked = rerun_differences(stored, stored)
    assert same == [] and checked > 10
    without = json.loads(json.dumps(stored))
    del without["tracks"]["shapes"]["metrics"]["iou"]
    without["tracks"]["shapes"]["metrics"]["deletion"]["verdict"] = "invalid"
    lines, _ = rerun_differences(stored, without)
    assert lines == [
        "shapes/deletion: validity verdict: stored 'untested', re-run 'invalid'",
        "shapes/iou: validity: stored but not re-run",
    ]


def test_the_file_form_still_needs_a_file() -> None:
    result = _verify()
    assert result.exit_code == 2 and "give FILE, or --meta META_JSON" in result.output


def test_numbers_compare_within_the_tolerance() -> None:
    def differs(a: object, b: object) -> bool:
        return any(line is not None for line, _ in compare(a, b, "x", TOLERANCE))

    assert not differs({"t": 0.5}, {"t": 0.5 + TOLERANCE / 2})
    assert differs({"t": 0.5}, {"t": 0.5 + TOLERANCE * 10})
    assert differs({"t": None}, {"t": 0.5}) and not differs({"t": None}, {"t": None})
    assert differs({"flags": ["unstable"]}, {"flags": []}) and differs({"a": 1}, {"a": 1, "b": 2})


@pytest.mark.slow
def test_rerun_tests_re_runs_the_ladder(copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XAIBENCH_CACHE", str(tmp_path / "cache"))
    path = copy / "meta" / "meta.json"
    result = _verify("--meta", path, "--rerun-tests")
    assert result.exit_code == 0, result.output
    assert _lines(result)[-1].startswith("PASSED:") and "(validity tests re-run)" in result.output
    value = json.loads(path.read_text())["tracks"]["shapes"]["metrics"]["iou"]["validity"]["value"]
    _edit(path, lambda d: d["tracks"]["shapes"]["metrics"]["iou"]["validity"].update(value=value + 1e-3))
    assert _verify("--meta", path).exit_code == 0  # the validity figures are taken as stored
    result = _verify("--meta", path, "--rerun-tests")
    assert result.exit_code == 1
    assert f"shapes/iou: validity.value: stored {value + 1e-3!r}, recomputed {value!r}" in result.output
