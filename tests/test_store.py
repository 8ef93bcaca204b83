"""The workdir cannot be corrupted: lock, record store, validated cache, crash leftovers,
permissions, concurrent runs and kill-and-resume (issue 12, DESIGN 6)."""

from __future__ import annotations

import io
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from xaibench.errors import XaibenchError
from xaibench.files import make_staging_dir, remove_leftovers, write_bytes_atomic, write_json_atomic
from xaibench.plugins import manager
from xaibench.runner.run import RunConfig, run
from xaibench.runner.storage import columnar
from xaibench.runner.storage.cache import ExplanationCache
from xaibench.runner.storage.store import RecordStore, WorkdirLock

METRICS = ("iou", "pointing_game")


def _config(workdir: Path, explainers: list[str], **kw: Any) -> RunConfig:
    defaults: dict[str, Any] = {
        "explainers": explainers,
        "tracks": ["shapes"],
        "metrics": list(METRICS),
        "limit": 6,
        "workdir": workdir,
        "progress": False,
        "timeout": 30.0,
        "examples": 0,
    }
    defaults.update(kw)
    return RunConfig(**defaults)


def _records(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a torn line left by a kill: skipped by readers
    return out


def _values(workdir: Path) -> dict[str, tuple[Any, Any]]:
    """Every record of the shapes track by key (its part files and journal): (value, n/a reason);
    asserts keys are unique across them."""
    store = RecordStore(workdir / "results" / "shapes.jsonl", full=True)
    table, blocks = store.table()
    records = columnar.decode(table, blocks)
    keys = [r["key"] for r in records]
    assert len(keys) == len(set(keys)), "a record key is stored twice"
    return {r["key"]: (r["value"], r["na_reason"]) for r in records}


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# ----------------------------------------------------------------------------- record store


def _rec(key: str, value: float = 0.5) -> dict[str, Any]:
    return {"key": key, "value": value}


def test_store_skips_torn_line_and_never_stores_a_key_twice(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    RecordStore(path).append([_rec("a"), _rec("b")])
    with path.open("a") as fh:
        fh.write('{"key": "c", "val')  # a write torn by a kill
    store = RecordStore(path)
    assert set(store.records) == {"a", "b"} and store.torn_lines == 1
    store.append([_rec("b"), _rec("c"), _rec("d")])
    again = RecordStore(path)
    assert set(again.records) == {"a", "b", "c", "d"}
    assert again.torn_lines == 1
    assert [r["key"] for r in _records(path)] == ["a", "b", "c", "d"]


def test_two_stores_on_one_file_catch_up_before_appending(tmp_path: Path) -> None:
    """Writers that bypass the workdir lock still never duplicate or lose a key."""
    path = tmp_path / "r.jsonl"
    first, second = RecordStore(path), RecordStore(path)
    first.append([_rec("a"), _rec("b")])
    second.append([_rec("b", 0.9), _rec("c")])  # "b" is on disk already: not written again
    first.append([_rec("c"), _rec("d")])
    keys = [r["key"] for r in _records(path)]
    assert keys == ["a", "b", "c", "d"]
    assert RecordStore(path).records["b"]["value"] == 0.5


# ----------------------------------------------------------------------------- workdir lock


def test_second_lock_fails_at_once_naming_workdir_and_pid(tmp_path: Path) -> None:
    work = tmp_path / "work"
    with WorkdirLock(work):
        started = time.monotonic()
        with pytest.raises(XaibenchError) as err:
            WorkdirLock(work).acquire()
        assert time.monotonic() - started < 2.0
        message = str(err.value)
        assert str(work) in message and f"pid {os.getpid()}" in message and "\n" not in message
    with WorkdirLock(work):  # released: the next run gets it
        assert (work / ".lock").read_text().strip() == str(os.getpid())


def test_lock_of_a_killed_process_is_released(tmp_path: Path) -> None:
    work = tmp_path / "work"
    code = (
        "import time; from xaibench.runner.storage.store import WorkdirLock; "
        f"WorkdirLock({str(work)!r}).acquire(); print('locked', flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        with pytest.raises(XaibenchError, match=f"pid {proc.pid}"):
            WorkdirLock(work).acquire()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with WorkdirLock(work):
        pass


def test_workdir_that_is_a_file_is_one_clear_line(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.write_text("not a folder")
    with pytest.raises(XaibenchError, match="is a file, not a folder"):
        WorkdirLock(work).acquire()
    with pytest.raises(XaibenchError, match="is a file"):
        WorkdirLock(work / "sub").acquire()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_workdir_is_one_clear_line(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    work.chmod(0o555)
    try:
        with pytest.raises(XaibenchError, match="cannot write there"):
            WorkdirLock(work).acquire()
    finally:
        work.chmod(0o755)


# ----------------------------------------------------------------------------- cache


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


GOOD = np.linspace(0, 1, 64 * 64, dtype=np.float32).reshape(64, 64)
BAD_ENTRIES = {
    "empty": b"",
    "truncated": _npy(GOOD)[:100],
    "garbage": b"\x00\x01 not an npy file",
    "wrong shape": _npy(np.ones((5, 7), dtype=np.float32)),
    "three dims": _npy(np.ones((1, 64, 64), dtype=np.float32)),
    "float64": _npy(GOOD.astype(np.float64)),
    "nan": _npy(np.full((64, 64), np.nan, dtype=np.float32)),
    "object": _npy(np.array(["a", "b"])),
}


@pytest.mark.parametrize("name", list(BAD_ENTRIES))
def test_bad_saliency_entry_is_a_counted_miss_and_deleted(tmp_path: Path, name: str) -> None:
    cache = ExplanationCache(tmp_path)
    cache.put("k", GOOD)
    path = next(tmp_path.rglob("*.npy"))
    path.write_bytes(BAD_ENTRIES[name])
    assert cache.get("k", shape=(64, 64), kind="saliency") is None
    assert cache.n_rejected == 1 and not path.exists()
    cache.put("k", GOOD)  # recomputed
    got = cache.get("k", shape=(64, 64), kind="saliency")
    assert got is not None and np.array_equal(got, GOOD) and got.dtype == np.float32
    assert cache.n_rejected == 1  # hits are checked every time; a good one is not counted


@pytest.mark.parametrize(
    "text", ["", "{", "[1, 2]", "{}", '{"a": NaN}', '{"a": "x"}', '{"a": true}', '{"a": Infinity}']
)
def test_bad_concept_entry_is_a_counted_miss(tmp_path: Path, text: str) -> None:
    cache = ExplanationCache(tmp_path)
    cache.put("k", {"striped": 0.25, "round": -1.0})
    assert cache.get("k", kind="concept") == {"striped": 0.25, "round": -1.0}
    path = next(tmp_path.rglob("*.json"))
    path.write_text(text)
    assert cache.get("k", kind="concept") is None
    assert cache.n_rejected == 1 and not path.exists()


def test_cache_entry_of_the_wrong_kind_or_other_scope_is_never_served(tmp_path: Path) -> None:
    cache = ExplanationCache(tmp_path, scope={"device": "cpu", "threads": 1})
    cache.put("k", GOOD)
    assert cache.get("k", kind="concept") is None and cache.n_rejected == 1
    cache.put("k", GOOD)
    assert ExplanationCache(tmp_path, scope={"device": "cpu", "threads": 2}).get("k") is None
    assert ExplanationCache(tmp_path).get("k") is None
    assert cache.get("k", shape=(64, 64)) is not None


def test_corrupt_cache_entries_are_recomputed_in_a_run(tmp_path: Path, registry: manager.Registry) -> None:
    config = _config(tmp_path / "work", ["gradient"])
    first = run(config, registry).summary
    assert first["run"]["repairs"]["cache_rejected"] == 0
    reference = _values(config.workdir)
    entries = sorted((config.workdir / "cache" / "explanations").rglob("*.npy"))
    assert len(entries) == 6
    entries[0].write_bytes(b"")
    entries[1].write_bytes(entries[1].read_bytes()[:90])
    entries[2].write_bytes(_npy(np.full((64, 64), np.inf, dtype=np.float32)))
    entries[3].write_bytes(_npy(np.ones((5, 7), dtype=np.float32)))
    (config.workdir / "results" / "shapes.jsonl").unlink()  # score again from the cache
    second = run(config, registry).summary
    repairs = second["run"]["repairs"]
    assert repairs["cache_rejected"] == 4, repairs
    assert second["tracks"]["shapes"]["explainers"]["gradient"]["explained"] == {
        "computed": 4,
        "cached": 2,
        "failed": 0,
    }
    assert _values(config.workdir) == reference
    for entry in entries:  # written again, valid
        assert np.load(entry).shape == (64, 64)


# ----------------------------------------------------------------------------- leftovers, permissions


def test_leftovers_of_dead_writers_are_removed_at_the_next_run(tmp_path: Path, registry: manager.Registry) -> None:
    work = tmp_path / "work"
    dead = _dead_pid()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        shard = work / "cache" / "explanations" / "ab"
        shard.mkdir(parents=True)
        leftovers = [
            shard / f".abcd.npy.{dead}.0123abcd.tmp",
            work / f".summary.json.{dead}.deadbeef.tmp",
            work / ".summary.json.k2j4_x9q.tmp",  # the older mkstemp form
        ]
        for path in leftovers:
            path.write_bytes(b"partial")
        staging = work / f".site.{dead}.00ff00ff.staging"
        (staging / "sub").mkdir(parents=True)
        live = work / f".summary.json.{sleeper.pid}.cafef00d.tmp"  # another live process is writing it
        live.write_bytes(b"in progress")
        unrelated = work / "notes.tmp"
        unrelated.write_text("mine")
        summary = run(_config(work, ["random"]), registry).summary
    finally:
        sleeper.kill()
        sleeper.wait()
    assert summary["run"]["repairs"]["leftovers_removed"] == 4
    assert not any(p.exists() for p in leftovers) and not staging.exists()
    assert live.exists() and unrelated.exists()
    assert remove_leftovers(work) == 1  # now its writer is gone too


def test_atomic_writes_have_normal_permissions(tmp_path: Path, registry: manager.Registry) -> None:
    old = os.umask(0o022)
    try:
        write_bytes_atomic(tmp_path / "a.bin", b"x")
        assert (tmp_path / "a.bin").stat().st_mode & 0o777 == 0o644
        assert make_staging_dir(tmp_path / "site").stat().st_mode & 0o777 == 0o755
        os.umask(0o002)
        write_json_atomic(tmp_path / "b.json", {"a": 1})
        assert (tmp_path / "b.json").stat().st_mode & 0o777 == 0o664
        work = tmp_path / "work"
        run(_config(work, ["random"], limit=2), registry)
    finally:
        os.umask(old)
    files = [p for p in work.rglob("*") if p.is_file() and p.name != ".key"]
    assert any(p.suffix == ".npy" for p in files) and (work / "summary.json") in files
    assert {p.stat().st_mode & 0o777 for p in files} == {0o664}
    keys = list(work.rglob(".key"))  # the integrity keys (xaibench/integrity.py): the owner's alone
    assert len(keys) == 2 and {p.stat().st_mode & 0o777 for p in keys} == {0o600}
    assert {p.stat().st_mode & 0o777 for p in work.rglob("*") if p.is_dir()} == {0o775}


# ----------------------------------------------------------------------------- processes

CLI = [sys.executable, "-m", "xaibench.cli"]
SMALL_RUN = ["run", "-e", "random,gradient", "--track", "shapes", "--limit", "8", "--quiet", "--device", "cpu"]
SMALL_RUN += ["--metric", "iou", "--metric", "pointing_game", "--metric", "deletion", "--metric", "insertion"]
N_RECORDS = 2 * 4 * 8


def _start(work: Path, out: Path, *extra: str) -> subprocess.Popen[str]:
    args = [*CLI, *SMALL_RUN, "--workdir", str(work), "--submissions", str(out / "s"), "--leaderboard-dir"]
    args += [str(out / "lb"), *extra]
    # a part file every 5 records: kills land during compactions too (the store's default is 10,000)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "XAIBENCH_COMPACT_ROWS": "5"}
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)


def _finish(proc: subprocess.Popen[str], timeout: float = 180) -> tuple[int, str]:
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err


def test_cli_run_on_a_workdir_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.write_text("x")
    code, err = _finish(_start(work, tmp_path))
    assert code == 1
    assert err.strip().splitlines() == [f"error: --workdir {work}: is a file, not a folder; pass a folder"]


def test_cli_run_on_a_locked_workdir_fails_at_once_with_the_holders_pid(tmp_path: Path) -> None:
    work = tmp_path / "work"
    with WorkdirLock(work):
        code, err = _finish(_start(work, tmp_path))
    assert code == 1
    [line] = err.strip().splitlines()
    assert line.startswith(f"error: --workdir {work}: another xaibench run (pid {os.getpid()})"), line
    assert not (work / "results").exists() and not (work / "summary.json").exists()


def test_two_runs_at_once_on_one_workdir_never_duplicate_or_lose_a_record(tmp_path: Path) -> None:
    """Both start together: one holds the lock, the other fails at once with its pid; the
    records are complete, each key once. (If scheduling let one run end before the other
    reached the lock, both succeed: the records are checked too, and the pair is tried again.)"""
    for attempt in range(3):
        work, out = tmp_path / f"work{attempt}", tmp_path / f"out{attempt}"
        procs = [_start(work, out / "a"), _start(work, out / "b")]
        results = [_finish(p) for p in procs]
        codes = sorted(code for code, _ in results)
        values = _values(work)
        assert len(values) == N_RECORDS and all(v is not None or r for v, r in values.values())
        if codes == [0, 1]:
            loser = next(err for code, err in results if code == 1)
            winner = next(p for p, (code, _) in zip(procs, results, strict=True) if code == 0)
            [line] = loser.strip().splitlines()
            assert f"--workdir {work}: another xaibench run (pid {winner.pid})" in line, line
            return
        assert codes == [0, 0], results
    pytest.fail("the two runs never overlapped in three tries")


@pytest.mark.slow
def test_sigkill_at_random_points_then_resume_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    """Ten SIGKILLs at seeded random times while the run holds the workdir, then a full run:
    the records equal, by key and value, those of an uninterrupted run on a fresh workdir."""
    fresh = tmp_path / "fresh"
    code, err = _finish(_start(fresh, tmp_path / "fresh-out"))
    assert code == 0, err
    reference = _values(fresh)
    assert len(reference) == N_RECORDS
    # Kill within the first quarter of the run's own span (from taking the lock to the summary): a
    # killed run resumes where the last one stopped, so the ten kills walk through the work (with
    # 0.6 of the span, the first kill or two could leave so little that the rest landed after it).
    window = 0.25 * json.loads((fresh / "summary.json").read_text())["run"]["wall_time_s"]

    rng = random.Random(12)
    work = tmp_path / "work"
    killed_mid_work = 0
    for _ in range(10):
        proc = _start(work, tmp_path / "out")
        if _wait_for_lock(proc, work):
            time.sleep(rng.uniform(0.0, window))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=180)
        stored = work / "results" / "shapes.jsonl"
        killed_mid_work += not stored.exists() or len(_values(work)) < N_RECORDS
    assert killed_mid_work >= 3, "most kills should land before the records are complete"
    code, err = _finish(_start(work, tmp_path / "out"))
    assert code == 0, err
    assert _values(work) == reference
    assert not [p for p in work.rglob("*") if p.name.endswith((".tmp", ".staging"))]


def _wait_for_lock(proc: subprocess.Popen[str], work: Path, timeout: float = 120) -> bool:
    """Wait until ``proc`` holds the workdir lock (it writes its pid into ``.lock``); False if it ended first."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if (work / ".lock").read_text().strip() == str(proc.pid):
                return True
        except OSError:
            pass
        time.sleep(0.005)
    return False
