"""Scratch folders of the processes that run plugin code (xaibench.runner.isolation.processes): named after
the process that owns them, and removed by the next one made when that owner ended without
removing its own (a runner or zygote killed with SIGKILL)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from xaibench.runner.isolation.processes import new_scratch, sweep_scratch

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="owners are looked up in /proc")


def _ended_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_scratch_folder_is_named_after_its_kind_and_owner(tmp_path: Path) -> None:
    made = Path(new_scratch("metric-worker", root=str(tmp_path)))
    assert made.parent == tmp_path and made.is_dir()
    kind_and_owner, random = made.name.rsplit("-", 1)
    assert kind_and_owner == f"xaibench-metric-worker-{os.getpid()}" and random and "-" not in random


@linux_only
def test_only_the_folders_of_ended_owners_are_removed(tmp_path: Path) -> None:
    dead, alive = _ended_pid(), os.getpid()
    gone = [tmp_path / f"xaibench-worker-{dead}-a1b2c3d4", tmp_path / f"xaibench-ray-{dead}-zz_9"]
    kept = [
        tmp_path / f"xaibench-worker-{alive}-a1b2c3d4",  # a live owner's (this process)
        tmp_path / "xaibench-worker-a1b2c3d4",  # no owner in its name (an older xaibench's)
        tmp_path / f"xaibench-{dead}-a1b2c3d4",  # no kind
        tmp_path / f"other-worker-{dead}-a1b2c3d4",  # not ours
    ]
    for folder in gone + kept:
        folder.mkdir()
    locked = gone[0] / "made-by-a-plugin"  # what a sandboxed worker left, read-only
    locked.mkdir()
    (locked / "x.bin").write_bytes(b"x")
    locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
    named_like_one = tmp_path / f"xaibench-worker-{dead}-file"  # a file, not a folder
    named_like_one.write_text("kept")

    sweep_scratch(str(tmp_path))

    assert not any(folder.exists() for folder in gone)
    assert all(folder.is_dir() for folder in kept) and named_like_one.read_text() == "kept"


@linux_only
def test_a_new_scratch_folder_removes_those_of_ended_owners_first(tmp_path: Path) -> None:
    left = tmp_path / f"xaibench-worker-{_ended_pid()}-q9w8e7r6"
    left.mkdir()
    made = Path(new_scratch("worker", root=str(tmp_path)))
    assert not left.exists() and made.is_dir()
    assert [p.name for p in tmp_path.iterdir()] == [made.name]
