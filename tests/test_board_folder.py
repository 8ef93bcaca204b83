"""The leaderboard folder is replaced whole (issue 25, item 6): leaderboard files and site land
together, a kill leaves the old folder or the new one, stale staging folders are removed."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _site_data import write_submissions

from xaibench import files
from xaibench.errors import XaibenchError
from xaibench.publish.board import build_leaderboard
from xaibench.site.board_folder import publish_board_folder
from xaibench.site.writer import MARKER

REPO = Path(__file__).resolve().parents[1]
DRIVER = """
import sys, time
from pathlib import Path
from xaibench.plugins.manager import get_registry
from xaibench.publish.board import build_leaderboard
from xaibench.site.board_folder import publish_board_folder
from xaibench.publish.validation import require_valid, submission_files
registry = get_registry()
subs, out = Path(sys.argv[1]), Path(sys.argv[2])
print("ready", flush=True)
start = time.perf_counter()
require_valid(submission_files([subs]))
publish_board_folder(build_leaderboard(subs), subs, out, registry=registry)
print("done", time.perf_counter() - start, flush=True)
"""


def _snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (relative path) -> its sha256."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _siblings(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _driver(subs: Path, out: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(subs), str(out)], stdout=subprocess.PIPE, text=True, env=env
    )


def _build(subs: Path, out: Path, **kwargs: object) -> None:
    publish_board_folder(build_leaderboard(subs), subs, out, **kwargs)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def two_sets(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("sets")
    return write_submissions(root / "a", ("alpha", "beta", "gamma")), write_submissions(
        root / "b", ("alpha", "beta", "gamma", "oracle")
    )


def test_leaderboard_files_and_site_are_replaced_together(two_sets: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = two_sets
    out = tmp_path / "lb"
    _build(a, out)
    assert {"leaderboard.csv", "leaderboard.json", "leaderboard.md", f"site/{MARKER}", "site/index.html"} <= set(
        _snapshot(out)
    )
    assert "oracle" not in (out / "leaderboard.csv").read_text()
    _build(b, out)
    assert "oracle" in (out / "leaderboard.csv").read_text()
    assert (out / "site" / "explainers" / "oracle.html").is_file()
    assert _siblings(out) == []


def test_a_folder_holding_other_files_is_refused_and_left_as_it_was(
    two_sets: tuple[Path, Path], tmp_path: Path
) -> None:
    a, _ = two_sets
    out = tmp_path / "lb"
    out.mkdir()
    (out / "leaderboard.csv").write_text("old\n")
    (out / "notes.txt").write_text("mine\n")
    with pytest.raises(XaibenchError) as info:
        _build(a, out)
    message = str(info.value)
    assert message.startswith(f"{out}: holds 'notes.txt', which xaibench did not write") and "\n" not in message
    assert (out / "notes.txt").read_text() == "mine\n" and (out / "leaderboard.csv").read_text() == "old\n"
    assert _siblings(out) == []


def test_a_site_outside_is_replaced_on_its_own_and_a_nested_one_refused(
    two_sets: tuple[Path, Path], tmp_path: Path
) -> None:
    a, _ = two_sets
    out, site = tmp_path / "lb", tmp_path / "web"
    _build(a, out, site_dir=site)
    assert (site / "index.html").is_file() and not (out / "site").exists()
    assert sorted(p.name for p in out.iterdir()) == ["leaderboard.csv", "leaderboard.json", "leaderboard.md"]
    with pytest.raises(XaibenchError, match="must be one of its folders"):
        _build(a, out, site_dir=out / "x" / "site")
    with pytest.raises(XaibenchError, match="cannot hold the leaderboard folder"):
        _build(a, site / "lb", site_dir=site)


def test_a_symlinked_folder_keeps_its_link(two_sets: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = two_sets
    real, link = tmp_path / "real", tmp_path / "link"
    _build(a, real)
    link.symlink_to(real, target_is_directory=True)
    _build(b, link)
    assert link.is_symlink() and "oracle" in (real / "leaderboard.csv").read_text()


def test_dead_writers_leftovers_are_cleaned_and_an_aside_folder_restored(
    two_sets: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = two_sets
    out = tmp_path / "lb"
    _build(a, out)
    old = _snapshot(out)
    pid = _dead_pid()
    staging = tmp_path / f".lb.{pid}.0123abcd.staging"
    staging.mkdir()
    (staging / "leaderboard.csv").write_text("half\n")
    other = tmp_path / f".lb2.{pid}.0123abcd.old"  # another folder's: not ours to touch
    other.mkdir()
    # killed between the two renames of the fallback swap: the old folder aside, none in place
    aside = tmp_path / f".lb.{pid}.89abcdef.old"
    out.rename(aside)
    assert files.remove_stale_siblings(out) == 2
    assert _snapshot(out) == old and not staging.exists() and other.exists()
    # the fallback swap (no renameat2) gives the same folder
    monkeypatch.setattr(files, "_exchange", lambda a, b: False)
    _build(b, out)
    assert "oracle" in (out / "leaderboard.csv").read_text() and _siblings(out) == []


@pytest.mark.slow
def test_killed_builds_leave_the_old_folder_or_the_new_one(two_sets: tuple[Path, Path], tmp_path: Path) -> None:
    """Twelve SIGKILLs at random points of a build (timed from a reference build): after each,
    the folder is exactly one of the two complete outputs; a last build leaves no staging folder."""
    sets = two_sets
    refs = []
    for k, subs in enumerate(sets):
        proc = _driver(subs, tmp_path / f"ref{k}")
        out_text, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out_text
        refs.append(_snapshot(tmp_path / f"ref{k}"))
        duration = float(out_text.split()[-1])
    assert refs[0] != refs[1]
    out = tmp_path / "lb"
    _build(sets[0], out)
    state, mid_build, rng = 0, 0, random.Random(25)
    for _ in range(12):
        proc = _driver(sets[1 - state], out)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 1.2 * duration))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        found = _snapshot(out)
        assert found in refs, "the folder is neither the old output nor the new one"
        mid_build += bool(_siblings(out))  # a staging folder left: killed mid-build
        state = refs.index(found)
    assert mid_build >= 1
    proc = _driver(sets[1 - state], out)
    proc.communicate(timeout=300)
    assert proc.returncode == 0
    assert _snapshot(out) == refs[1 - state] and _siblings(out) == []


def test_leaderboard_build_refuses_a_folder_of_other_files_and_replaces_its_own(tmp_path: Path) -> None:
    """Through the command: a folder holding a user's file is refused in one line and left as it
    was; a folder of an earlier build is replaced whole, leaving no staging folder beside it."""
    from click.testing import CliRunner

    from xaibench.cli import cli

    subs = tmp_path / "subs"
    subs.mkdir()
    write_submissions(subs)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    args = ["leaderboard", "build", "--submissions", str(subs), "--out"]
    refused = CliRunner().invoke(cli, [*args, str(mine)])
    assert isinstance(refused.exception, XaibenchError)  # main() prints it as one `error:` line
    assert "mine: holds 'notes.txt', which xaibench did not write" in str(refused.exception)
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    out = tmp_path / "board"
    for _ in range(2):
        result = CliRunner().invoke(cli, [*args, str(out)])
        assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["board", "mine", "subs"]
    assert (out / "leaderboard.csv").is_file() and (out / "site" / "index.html").is_file()


def test_a_full_disk_while_publishing_names_the_file_and_keeps_the_old_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    subs = write_submissions(tmp_path / "subs")
    out = tmp_path / "board"
    publish_board_folder(build_leaderboard(subs), subs, out, with_site=False)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real_write_text = Path.write_text

    def full(self: Path, *args: object, **kwargs: object) -> int:
        if self.name == "leaderboard.json":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write_text(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(OSError) as info:
        publish_board_folder(build_leaderboard(subs), subs, out, with_site=False)
    assert (info.value.errno, info.value.filename) == (errno.ENOSPC, str(out / "leaderboard.json"))
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["board", "subs"]  # no staging folder left


def test_a_board_without_its_site_imports_neither_the_site_builder_nor_torch(tmp_path: Path) -> None:
    """`leaderboard build --no-site` needs no torch (500 MB and seconds of import at the field's
    scale); the site's page builder, which imports it for the PASTA figures, is left unimported."""
    subs = write_submissions(tmp_path / "subs")
    code = (
        "import sys\nfrom pathlib import Path\nfrom xaibench.python_api import publish_leaderboard\n"
        "published = publish_leaderboard(Path(sys.argv[1]), Path(sys.argv[2]), with_site=False)\n"
        "assert published.site_dir is None and (Path(sys.argv[2]) / 'leaderboard.json').is_file()\n"
        "print(sorted(m for m in ('torch', 'xaibench.site.build') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(subs), str(tmp_path / "board")], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
