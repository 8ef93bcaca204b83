"""One clear line for every bad input (issue 12, item 5).

Each bad input below exits non-zero; the output's last non-empty line names the option or the
file and the problem; there is no traceback; results already written are left as they were.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import struct
import subprocess
import warnings
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from xaibench.cli import main
from xaibench.datasets.io import image_size, read_mask, read_rgb
from xaibench.errors import XaibenchError
from xaibench.publish import submission as submission_module
from xaibench.publish.submission import load_submission
from xaibench.publish.validation import validate_text

REPO = Path(__file__).resolve().parents[1]
VALID = REPO / "tests" / "golden" / "submissions" / "v1-initial" / "gradient.json"
SMALL_RUN = ("run", "-e", "gradient", "--track", "shapes", "--limit", "2", "-q")


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Exit status and stdout + stderr (stderr last) of ``xaibench ARGS``."""
    with pytest.raises(SystemExit) as info:
        main([str(a) for a in args])
        raise SystemExit(0)
    captured = capsys.readouterr()
    return int(info.value.code or 0), captured.out + captured.err


def _last_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert lines, "no output"
    return lines[-1]


def _assert_one_clear_line(code: int, output: str, *names: str) -> str:
    assert code != 0, output
    assert "Traceback" not in output, output
    last = _last_line(output)
    for name in names:
        assert name in last, f"{name!r} not in the last line {last!r}"
    return last


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # nothing may land in the repository


# ----------------------------------------------------------------------------- options


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("--batch-size", "0"), "--batch-size"),
        (("--timeout", "-1"), "--timeout"),
        (("--param", "gradcam.foo=1"), "--param"),
        (("--param", "gradient.x=" + "9" * 5000), "--param"),
        (("--param", "gradient.x=" + "[" * 100_000), "--param"),
        (("--device", "gpu"), "--device"),
    ],
    ids=["batch-size-0", "timeout-negative", "param-for-explainer-not-run", "param-huge-int", "param-deep", "device"],
)
def test_bad_run_options_fail_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], option: str
) -> None:
    code, output = _cli(capsys, *SMALL_RUN, "--workdir", tmp_path / "w", "--submissions", tmp_path / "s", *args)
    last = _assert_one_clear_line(code, output, option)
    assert code == 2 and last.startswith("Error: Invalid value")  # click's usage error: hint, then one line
    assert re.search(r"^Try '.+ run --help' for help\.$", output, re.M), output
    assert not (tmp_path / "w").exists() and not (tmp_path / "s").exists()


def test_param_for_explainer_not_run_names_it_and_the_explainers_run(capsys: pytest.CaptureFixture[str]) -> None:
    code, output = _cli(capsys, *SMALL_RUN, "--param", "gradcam.foo=1")
    last = _assert_one_clear_line(code, output, "--param", "gradcam.foo")
    assert "'gradcam' is not run" in last and "running: gradient" in last


def test_pasta_batch_size_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    release = tmp_path / "release"
    release.mkdir()
    (release / "human_annotations.json").write_text("[]")
    code, output = _cli(
        capsys, "pasta", "train", "--from-pasta", release, "--out", tmp_path / "x.pt", "--batch-size", "0"
    )
    _assert_one_clear_line(code, output, "--batch-size")


def test_xaibench_error_is_one_line_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, output = _cli(capsys, "run", "-e", "no-such-explainer", "--track", "shapes", "--limit", "2", "-q")
    assert code == 1
    assert output.strip().count("\n") == 0, output  # exactly one line
    _assert_one_clear_line(code, output, "no-such-explainer")
    assert output.startswith("error: ")


def test_usage_error_stays_clicks_hint_plus_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, output = _cli(capsys, "run")
    assert code == 2
    _assert_one_clear_line(code, output, "--explainer")
    assert re.match(r"Usage: .+ run \[OPTIONS\]\nTry '.+ run --help' for help\.\n\nError: ", output), output


# ----------------------------------------------------------------------------- places to write


@pytest.mark.parametrize("option", ["--workdir", "--submissions", "--leaderboard-dir"])
@pytest.mark.parametrize("under", [False, True], ids=["the-file", "a-folder-under-the-file"])
def test_a_folder_option_that_is_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, under: bool
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    target = afile / "sub" if under else afile
    code, output = _cli(capsys, *SMALL_RUN, option, target)
    _assert_one_clear_line(code, output, option, str(target))
    assert afile.read_text() == "keep me"


@pytest.fixture()
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A folder holding a valid submission that no process can write in.

    ``chmod 0555`` as a normal user; as root, where chmod does not stop writes, ``chattr +i``
    (immutable), which stops root too; skipped where neither works.
    """
    folder = tmp_path / "ro"
    folder.mkdir()
    shutil.copy(VALID, folder / "gradient.json")
    if os.geteuid() != 0:
        folder.chmod(0o555)
        undo = ["chmod", "755", str(folder)]
    else:
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(folder)], check=False).returncode:
            pytest.skip("running as root, where chmod 0555 does not stop writes, and chattr +i is not available")
        undo = ["chattr", "-i", str(folder)]
    try:
        probe = folder / "probe"
        try:
            probe.write_text("x")
        except OSError:
            pass
        else:
            pytest.skip("this file system lets the test write into a read-only folder")
        yield folder
    finally:
        subprocess.run(undo, check=True)


@pytest.mark.parametrize("option", ["--workdir", "--submissions"])
def test_a_read_only_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str], read_only: Path, option: str) -> None:
    before = _snapshot(read_only)
    others = {"--workdir": tmp_path / "w", "--submissions": tmp_path / "s", "--leaderboard-dir": tmp_path / "lb"}
    others[option] = read_only
    code, output = _cli(capsys, *SMALL_RUN, *[x for kv in others.items() for x in kv])
    last = _assert_one_clear_line(code, output, option, str(read_only))
    assert "cannot write" in last
    assert _snapshot(read_only) == before


def test_a_write_that_fails_mid_run_names_the_file_and_keeps_the_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder check passed, then writing a submission failed (disk full, permissions changed)."""
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(VALID, subs / "gradient.json")  # this run would replace it
    before = _snapshot(subs)

    def refuse(path: Path, data: object, **options: object) -> None:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))

    monkeypatch.setattr(submission_module, "write_json_atomic", refuse)
    workdir = tmp_path / "w"
    code, output = _cli(
        capsys, *SMALL_RUN, "--workdir", workdir, "--submissions", subs, "--leaderboard-dir", tmp_path / "lb"
    )
    last = _assert_one_clear_line(code, output, str(subs / "gradient.json"), "Permission denied")
    assert last.startswith("error: ")
    assert code == 1
    assert _snapshot(subs)["gradient.json"] == before["gradient.json"]
    records = [p for p in (workdir / "results").rglob("*") if p.is_file() and p.stat().st_size]
    assert records, "the run's records must be kept for the next run to reuse"


# ----------------------------------------------------------------------------- decompression bombs


def _png_header(path: Path, width: int, height: int) -> Path:
    """A tiny PNG whose header claims ``width x height`` one-bit pixels (a decompression bomb)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")
    )
    return path


def _bomb_side(level: str) -> int:
    limit = Image.MAX_IMAGE_PIXELS
    assert limit, "PIL's decompression-bomb limit is off"
    # "warning": between the limit and twice it (PIL only warns); "error": beyond twice it.
    return int((1.5 * limit) ** 0.5) if level == "warning" else int((2.5 * limit) ** 0.5)


@pytest.mark.parametrize("level", ["warning", "error"])
@pytest.mark.parametrize("read", [read_rgb, read_mask, image_size], ids=lambda f: f.__name__)
def test_decompression_bomb_is_a_value_error_naming_the_file(
    tmp_path: Path, level: str, read: Callable[[Path], object]
) -> None:
    side = _bomb_side(level)
    bomb = _png_header(tmp_path / "bomb.png", side, side)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="decompression bomb") as info:
            read(bomb)
    assert str(info.value).startswith(f"{bomb}: ")
    assert not [w for w in caught if issubclass(w.category, Image.DecompressionBombWarning)]


@pytest.mark.parametrize("level", ["warning", "error"])
@pytest.mark.parametrize("where", ["images", "masks"])
def test_decompression_bomb_in_a_folder_dataset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], level: str, where: str
) -> None:
    root = tmp_path / "data"
    (root / "images").mkdir(parents=True)
    (root / "masks").mkdir()
    rng = np.random.default_rng(0)
    for sid in ("a", "b"):
        Image.fromarray((rng.random((16, 16, 3)) * 255).astype(np.uint8)).save(root / "images" / f"{sid}.png")
        Image.fromarray(np.zeros((16, 16), dtype=np.uint8)).save(root / "masks" / f"{sid}.png")
    side = _bomb_side(level)
    bomb = _png_header(root / where / "b.png", side, side)
    maps = tmp_path / "maps"
    maps.mkdir()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, output = _cli(capsys, "score", "--dataset", root, "--explanations", maps, "--metric", "iou")
    last = _assert_one_clear_line(code, output, str(bomb), "decompression bomb")
    assert output.strip() == last  # and nothing else, not even a warning
    assert not [w for w in caught if issubclass(w.category, Image.DecompressionBombWarning)]


# ----------------------------------------------------------------------------- submissions


def _bad_submission(kind: str) -> str:
    if kind == "deep-array":
        return "[" * 100_000 + "]" * 100_000
    if kind == "deep-object":
        return '{"a": ' * 3000 + "1" + "}" * 3000
    text = VALID.read_text()
    if kind == "deep-in-a-field":  # parses, then would exhaust the validators' stack
        return text.replace('"notes": ""', '"notes": ' + "[" * 900 + "]" * 900, 1)
    if kind == "huge-int":
        return text.replace('"seed": 0', '"seed": ' + "9" * 5000, 1)
    if kind == "out-of-float-range":
        return text.replace('"seed": 0', '"seed": 1' + "0" * 400, 1)
    raise AssertionError(kind)


BAD_SUBMISSIONS = ["deep-array", "deep-object", "deep-in-a-field", "huge-int", "out-of-float-range"]


def test_bad_submission_texts_are_really_replaced() -> None:
    assert '"notes": ""' in VALID.read_text() and '"seed": 0' in VALID.read_text()
    for kind in BAD_SUBMISSIONS:
        assert _bad_submission(kind) != VALID.read_text()


@pytest.mark.parametrize("kind", BAD_SUBMISSIONS)
@pytest.mark.parametrize("command", ["validate", "leaderboard", "run"])
def test_hostile_submission_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, command: str) -> None:
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(VALID, subs / "gradient.json")
    bad = subs / "zz-bad.json"
    bad.write_text(_bad_submission(kind))
    before = _snapshot(subs)
    workdir, out = tmp_path / "w", tmp_path / "lb"
    args = {
        "validate": ("submission", "validate", subs),
        "leaderboard": ("leaderboard", "build", "--submissions", subs, "--out", out, "--no-site"),
        "run": (*SMALL_RUN, "--submissions", subs, "--workdir", workdir, "--leaderboard-dir", out),
    }[command]
    code, output = _cli(capsys, *args)
    last = _assert_one_clear_line(code, output, str(bad))
    assert code == 1
    assert {"deep-array": "nested", "deep-object": "nested", "deep-in-a-field": "nested"}.get(kind, "number") in last
    assert _snapshot(subs) == before
    assert not (out / "leaderboard.json").exists()
    if command == "run":  # checked before the run: nothing was computed
        assert not (workdir / "results").exists()


@pytest.mark.parametrize("kind", BAD_SUBMISSIONS)
def test_hostile_submission_text_gives_one_issue_and_load_names_the_file(tmp_path: Path, kind: str) -> None:
    text = _bad_submission(kind)
    issues = validate_text(text, "s.json", tmp_path)
    assert len(issues) == 1 and issues[0].file == "s.json", issues
    path = tmp_path / "s.json"
    path.write_text(text)
    if kind in ("deep-array", "deep-object", "huge-int"):  # load_submission parses only; the rest load
        with pytest.raises(XaibenchError, match=re.escape(str(path))):
            load_submission(path)


def test_deep_json_is_caught_even_past_the_depth_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The decoder's RecursionError is a finding too, should the depth check ever let text through."""
    from xaibench.publish import validation

    monkeypatch.setattr(validation, "MAX_DEPTH", 10**9)
    [issue] = validate_text(_bad_submission("deep-array"), "s.json")
    assert "nested too deeply" in issue.message


# ----------------------------------------------------------------------------- PASTA annotations


def _entry(n: int) -> dict[str, object]:
    return {
        "img": f"images/{n}.png",
        "explication": f"exp/toy_{n:02d}_gradcam.png",
        "GTclass": "cat",
        "predictedclass": "cat",
        "Annotation": [{f"Q{q}": 3 for q in range(1, 7)}],
    }


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("img-5", "entry 1: img must be a file path"),
        ("explication-list", "entry 1: explication must be a file path"),
        ("deep-file", "nested too deeply"),
        ("deep-in-a-field", "entry 1: GTclass must be a class name or index"),
        ("huge-vote", "4300"),
        ("bool-vote", "entry 1: Q1 votes must be in 1..5"),
    ],
)
def test_bad_pasta_annotations(tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, expected: str) -> None:
    release = tmp_path / "release"
    release.mkdir()
    good, bad = _entry(0), _entry(1)
    text = None
    if kind == "img-5":
        bad["img"] = 5
    elif kind == "explication-list":
        bad["explication"] = ["a", "b"]
    elif kind == "deep-file":
        text = "[" * 100_000 + "]" * 100_000
    elif kind == "deep-in-a-field":
        bad["GTclass"] = "@DEEP@"
        text = json.dumps([good, bad]).replace('"@DEEP@"', "[" * 500 + "]" * 500)
    elif kind == "huge-vote":
        bad["Annotation"] = [{"Q1": "@HUGE@"}]
        text = json.dumps([good, bad]).replace('"@HUGE@"', "9" * 5000)
    elif kind == "bool-vote":
        bad["Annotation"] = [{"Q1": True}]
    annotations = release / "human_annotations.json"
    annotations.write_text(text if text is not None else json.dumps([good, bad]))
    out = tmp_path / "x.pt"
    code, output = _cli(capsys, "pasta", "train", "--from-pasta", release, "--out", out, "-q")
    last = _assert_one_clear_line(code, output, str(annotations), expected)
    assert last.startswith("error: ")
    assert not out.exists()
