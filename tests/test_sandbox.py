"""The worker sandbox (issue 25 item 2): a worker cannot write outside its scratch folder, signal
the runner or open TCP connections, and what it leaves running dies with it.

The unit tests enter the sandbox in a forked child and report through a pipe opened before (an
open descriptor is not restricted). The run tests register hostile explainers at run time (the
pattern of tests/test_hostile_explainers.py) and check from outside that nothing was touched,
while ``gradient``'s records in the same run stay bit-identical to a run without the sandbox.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from xaibench import hookimpl
from xaibench.api import Explainer
from xaibench.plugins import manager
from xaibench.runner.isolation import workers
from xaibench.runner.run import RunConfig, run
from xaibench.sandbox import (
    OFF_VARIABLE,
    WRITABLE_VARIABLE,
    SandboxError,
    enter_sandbox,
    handled_rights,
    sandbox_status,
    silence_inherited_files,
)

STATUS = sandbox_status()
LANDLOCK = STATUS.startswith("landlock")
needs_landlock = pytest.mark.skipif(not LANDLOCK, reason=f"Landlock {STATUS}")
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="subreaper and /proc are Linux only")
TARGETS = "XAIBENCH_TEST_TARGETS"  # JSON: what the forger attacks (paths, the runner's pid)
NOTES = "XAIBENCH_TEST_NOTES"  # a folder the daemon test may write (given to the sandbox too)


def _in_sandbox(writable: list[Path], attack: Callable[[], dict[str, str]]) -> dict[str, str]:
    """Run ``attack`` in a forked child after it entered the sandbox; its report, or why it failed."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(read)
        try:
            enter_sandbox(writable)
            report = attack()
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            report = {"error": f"{type(exc).__name__}: {exc}"}
        os.write(write, json.dumps(report).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        data = fh.read()
    os.waitpid(pid, 0)
    return json.loads(data)


def _outcome(action: Callable[[], object]) -> str:
    try:
        action()
    except OSError as exc:
        return type(exc).__name__
    return "done"


def test_sandbox_status_names_the_abi_or_the_reason() -> None:
    assert re.fullmatch(r"landlock ABI [1-9]\d*|unavailable: .+", STATUS), STATUS


def test_every_abi_handles_more_rights_than_the_one_before() -> None:
    rights = [handled_rights(abi) for abi in range(1, 8)]
    assert rights[0] == ((1 << 13) - 1, 0, 0)  # ABI 1: files only
    assert rights[3][1] == 0b11 and rights[5][2] == 0b11  # TCP from ABI 4, scopes from ABI 6
    for before, after in itertools.pairwise(rights):
        assert all(b & ~a == 0 for b, a in zip(before, after, strict=True))


@needs_landlock
def test_a_sandboxed_process_writes_only_its_scratch_folder(tmp_path: Path) -> None:
    scratch, outside = tmp_path / "scratch", tmp_path / "outside"
    scratch.mkdir()
    outside.mkdir()
    (outside / "results.jsonl").write_text("kept\n")
    parent = os.getpid()

    def attack() -> dict[str, str]:
        listener = socket.socket()
        return {
            "scratch": _outcome(
                lambda: (scratch / "made" / "x").parent.mkdir() or (scratch / "made" / "x").write_text("x")
            ),
            "append": _outcome(lambda: (outside / "results.jsonl").open("a").write("forged\n")),
            "truncate": _outcome(lambda: os.truncate(outside / "results.jsonl", 0)),
            "create": _outcome(lambda: (outside / "new").write_text("x")),
            "remove": _outcome(lambda: (outside / "results.jsonl").unlink()),
            "hardlink": _outcome(lambda: os.link(outside / "results.jsonl", scratch / "link")),
            "symlink": _outcome(
                lambda: (
                    (scratch / "sym").symlink_to(outside / "results.jsonl") or (scratch / "sym").open("a").write("x")
                )
            ),
            "read": _outcome(lambda: (outside / "results.jsonl").read_text()),
            "signal": _outcome(lambda: os.kill(parent, 0)),
            "connect": _outcome(lambda: socket.create_connection(("127.0.0.1", 9), timeout=1)),
            "bind": _outcome(lambda: listener.bind(("127.0.0.1", 0))),
        }

    report = _in_sandbox([scratch], attack)
    assert report["scratch"] == "done" and (scratch / "made" / "x").read_text() == "x", report
    for name in ("append", "truncate", "create", "remove", "signal", "connect", "bind", "symlink"):
        assert report[name] == "PermissionError", (name, report)
    assert report["hardlink"] in ("PermissionError", "OSError"), report  # EXDEV: the link would gain rights
    assert report["read"] == "done", report
    assert (outside / "results.jsonl").read_text() == "kept\n" and sorted(p.name for p in outside.iterdir()) == [
        "results.jsonl"
    ]


@needs_landlock
@linux_only
def test_a_sandboxed_process_names_its_own_threads_and_nothing_else(tmp_path: Path) -> None:
    """CUDA's cuInit names its helper threads through /proc/self/task/<tid>/comm and fails with
    error 304 where it may not (every sandboxed worker of a --device cuda run, on an H200): the
    process's own threads are writable, another process's and the kernel's settings are not."""
    parent = os.getpid()

    def attack() -> dict[str, str]:
        stop = threading.Event()
        helper = threading.Thread(target=stop.wait)
        helper.start()
        own = Path(f"/proc/self/task/{helper.native_id}/comm")
        try:
            named = _outcome(lambda: own.write_text("cuda-helper"))
            name = own.read_text().strip()
        finally:
            stop.set()
            helper.join()
        return {
            "own thread": named,
            "name": name,
            "parent's thread": _outcome(lambda: Path(f"/proc/{parent}/task/{parent}/comm").open("w")),
            "kernel setting": _outcome(lambda: Path("/proc/sys/kernel/hostname").open("w")),
        }

    report = _in_sandbox([tmp_path], attack)
    assert report["own thread"] == "done" and report["name"] == "cuda-helper", report
    assert report["parent's thread"] == "PermissionError", report
    assert report["kernel setting"] == "PermissionError", report


@needs_landlock
def test_tcp_ports_given_stay_open(tmp_path: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            try:
                enter_sandbox([tmp_path], tcp_ports=[port])
                ok = _outcome(lambda: socket.create_connection(("127.0.0.1", port), timeout=5).close())
                other = _outcome(lambda: socket.create_connection(("127.0.0.1", port - 1), timeout=5))
            except BaseException as exc:  # noqa: BLE001 - reported to the parent
                ok = other = repr(exc)
            os.write(write, f"{ok} {other}".encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as fh:
            assert fh.read().decode() == "done PermissionError"
        os.waitpid(pid, 0)
    finally:
        server.close()


@needs_landlock
def test_a_process_with_threads_is_refused() -> None:
    def attack() -> dict[str, str]:
        return {}

    import threading

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        stop = threading.Event()
        threading.Thread(target=stop.wait, daemon=True).start()
        try:
            enter_sandbox([])
            message = "entered"
        except SandboxError as exc:
            message = str(exc)
        stop.set()
        os.write(write, message.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        assert fh.read().decode() == "2 threads already run (Landlock restricts only the calling thread)"
    os.waitpid(pid, 0)


@linux_only
def test_inherited_writable_files_are_pointed_at_dev_null(tmp_path: Path) -> None:
    """In a forked child, as a worker would (in pytest's own process it would also silence
    pytest's capture and log files)."""
    log = (tmp_path / "log").open("a")
    readonly = (tmp_path / "log").open("r")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only when every check holds
        ok = False
        try:
            changed = silence_inherited_files(keep=[])
            ok = log.fileno() in changed and readonly.fileno() not in changed and w not in changed
            log.write("forged\n")
            log.flush()
            os.write(w, b"pipes still work")
        finally:
            os._exit(0 if ok else 1)
    try:
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert os.read(r, 100) == b"pipes still work"
        assert (tmp_path / "log").read_text() == ""
    finally:
        for f in (log, readonly):
            f.close()
        os.close(r)
        os.close(w)


# ------------------------------------------------------------------------------------- whole runs


class Forger(Explainer):
    """Tries what a worker did in issue 25, then fails saying how each try went."""

    name = "forger"
    version = "1.0.0"
    licence = "test"

    def explain(self, model: Any, inputs: Any, targets: Any, *, seed: int = 0, context: Any = None) -> Any:
        t = json.loads(os.environ[TARGETS])
        home = Path(t["home"])
        scratch = Path(tempfile.gettempdir())

        def stop_zygote() -> None:
            os.kill(os.getppid(), signal.SIGSTOP)
            os.kill(os.getppid(), signal.SIGCONT)

        tries = {
            "results": lambda: os.write(
                os.open(t["results"], os.O_WRONLY | os.O_APPEND | os.O_CREAT), b'{"key": "forged"}\n'
            ),
            "cache": lambda: Path(t["cache"], "forged.npz").write_bytes(b"x"),
            "home": lambda: (home.mkdir(parents=True, exist_ok=True), (home / "forged.pt").write_bytes(b"x")),
            "sigterm-runner": lambda: os.kill(int(t["runner"]), signal.SIGTERM),
            "sigstop-zygote": stop_zygote,
            "tmp": lambda: (scratch / "mine").write_text("x"),
        }
        outcomes = ",".join(f"{k}={_outcome(f)}" for k, f in tries.items())
        raise RuntimeError(f"{outcomes},scratch={scratch}")


class Daemonises(Explainer):
    """Leaves a daemon (double fork, ``setsid``) that notes the time in a file every 0.1 s for a
    minute; returns valid maps."""

    name = "daemonises"
    version = "1.0.0"
    licence = "test"

    def explain(self, model: Any, inputs: Any, targets: Any, *, seed: int = 0, context: Any = None) -> Any:
        notes = Path(os.environ[NOTES])
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                (notes / f"daemon-{os.getpid()}").write_text("")
                for _ in range(600):
                    (notes / "heartbeat").write_text(repr(time.time()))
                    time.sleep(0.1)
            os._exit(0)
        time.sleep(0.5)  # the first child has exited: the daemon is an orphan now
        return np.zeros((inputs.shape[0], *inputs.shape[-2:]), dtype=np.float32)


class UsesMatplotlib(Explainer):
    """Imports matplotlib for the first time (as pytorch-grad-cam does; in a fresh interpreter, as
    this test process may have imported it already), then fails saying where matplotlib keeps its
    configuration and cache, what it printed, and where the worker's temporary folder is."""

    name = "uses-matplotlib"
    version = "1.0.0"
    licence = "test"

    def explain(self, model: Any, inputs: Any, targets: Any, *, seed: int = 0, context: Any = None) -> Any:
        code = "import matplotlib; print(matplotlib.get_configdir(), matplotlib.get_cachedir(), sep=',', end='')"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        config, cache = done.stdout.split(",")
        said = "yes" if done.stderr.strip() else "no"
        raise RuntimeError(f"config={config},cache={cache},said={said},scratch={tempfile.gettempdir()}")


class Plugin:
    @hookimpl
    def register_explainers(self, register: Any) -> None:
        register(Forger)
        register(Daemonises)
        register(UsesMatplotlib)


@pytest.fixture()
def reg(registry: manager.Registry) -> manager.Registry:
    registry.add_plugin(Plugin(), name="sandbox-tests")
    return registry


def _config(workdir: Path, explainers: list[str], limit: int = 4) -> RunConfig:
    return RunConfig(
        explainers=explainers,
        tracks=["shapes"],
        metrics=["iou", "pointing_game"],
        limit=limit,
        workdir=workdir,
        progress=False,
        timeout=30.0,
        examples=0,
        explain_batch=limit,
    )


def _records(workdir: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for line in (workdir / "results" / "shapes.jsonl").read_text().splitlines():
        record = json.loads(line)
        # the integrity tag is keyed per workdir, so it differs between the two runs by design
        out[record["key"]] = {k: v for k, v in record.items() if k not in ("wall_time_s", "integrity")}
    return out


@needs_landlock
def test_a_sandboxed_worker_cannot_forge_records_caches_or_signal_the_runner(
    tmp_path: Path, reg: manager.Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(OFF_VARIABLE, "0")
    run(_config(tmp_path / "clean", ["gradient"]), reg)
    monkeypatch.delenv(OFF_VARIABLE)

    work = tmp_path / "run"
    home = Path.home() / ".cache" / "xaibench" / f"sandbox-test-{os.getpid()}"
    (work / "cache" / "explanations").mkdir(parents=True)
    (work / "results").mkdir()
    targets = {
        "results": str(work / "results" / "shapes.jsonl"),
        "cache": str(work / "cache" / "explanations"),
        "home": str(home),
        "runner": os.getpid(),
    }
    monkeypatch.setenv(TARGETS, json.dumps(targets))
    signals: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda number, frame: signals.append(number))
    try:
        summary = run(_config(work, ["forger", "gradient"]), reg).summary
    finally:
        signal.signal(signal.SIGTERM, previous)
        forged = home.exists()
        shutil.rmtree(home, ignore_errors=True)

    assert summary["run"]["sandbox"] == STATUS
    records = _records(work)
    assert "forged" not in records and not forged and not (work / "cache" / "explanations" / "forged.npz").exists()
    assert signals == []
    reasons = {r["na_reason"] for r in records.values() if r["explainer"]["name"] == "forger"}
    assert len(reasons) == 1, reasons
    outcomes = dict(item.split("=", 1) for item in reasons.pop().split(": ", 1)[1].split(","))
    for name in ("results", "cache", "home", "sigterm-runner", "sigstop-zygote"):
        assert outcomes[name] == "PermissionError", (name, outcomes)
    assert outcomes["tmp"] == "done"  # its own scratch folder, TMPDIR ...
    assert not Path(outcomes["scratch"]).exists()  # ... removed when the worker ended
    gradient = {k: v for k, v in records.items() if v["explainer"]["name"] == "gradient"}
    assert len(gradient) == 8 and gradient == _records(tmp_path / "clean")


@linux_only
@pytest.mark.parametrize("sandbox", ["on", "off"])
def test_a_daemon_left_by_a_worker_dies_with_the_run(
    tmp_path: Path, reg: manager.Registry, monkeypatch: pytest.MonkeyPatch, sandbox: str
) -> None:
    if sandbox == "on" and not LANDLOCK:
        pytest.skip(f"Landlock {STATUS}")
    notes = tmp_path / "notes"
    notes.mkdir()
    monkeypatch.setenv(NOTES, str(notes))
    monkeypatch.setenv(WRITABLE_VARIABLE, str(notes))
    monkeypatch.setenv(OFF_VARIABLE, "1" if sandbox == "on" else "0")
    summary = run(_config(tmp_path / "w", ["daemonises"], limit=2), reg).summary
    assert summary["run"]["sandbox"] == workers.worker_sandbox()
    daemons = [int(p.name.split("-")[1]) for p in notes.glob("daemon-*")]
    assert len(daemons) == 1
    assert not Path(f"/proc/{daemons[0]}").exists()  # killed and reaped by the zygote (its subreaper)
    beat = (notes / "heartbeat").read_text()
    time.sleep(0.5)
    assert (notes / "heartbeat").read_text() == beat  # and it wrote nothing since


@needs_landlock
def test_matplotlib_in_a_sandboxed_worker_keeps_its_folders_in_the_scratch_folder_and_says_nothing(
    tmp_path: Path, reg: manager.Registry
) -> None:
    pytest.importorskip("matplotlib")
    work = tmp_path / "run"
    run(_config(work, ["uses-matplotlib"], limit=2), reg)
    reasons = {r["na_reason"] for r in _records(work).values()}
    assert len(reasons) == 1, reasons
    folders = dict(item.split("=", 1) for item in reasons.pop().split(": ", 1)[1].split(","))
    scratch = Path(folders["scratch"])
    assert Path(folders["config"]).parent == scratch and Path(folders["cache"]).parent == scratch
    # before, every start printed "mkdir -p failed for path ~/.config/matplotlib: Permission denied"
    assert folders["said"] == "no"
