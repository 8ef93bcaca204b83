"""The channels a sandboxed process had besides files, TCP and signals (issue: UDP out of a worker
carried the integrity keys to a listener; unix sockets outside the scratch folder, Ray's raylet and
plasma sockets among them, connected; ``/proc/<runner>/environ`` was readable; no limit on address
space, processes or open files; a daemon started at a plugin's import held the probe's pipe until
the plugin timeout).

Each test enters the sandbox in a forked child (as tests/test_sandbox.py does) and reports through
a pipe opened before; the probe test runs the catalogue's probe on a distribution written here.
"""

from __future__ import annotations

import errno
import json
import mmap
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests._distributions import write_distribution
from xaibench import sandbox
from xaibench.sandbox import (
    HIDDEN_VARIABLE,
    LIMITS_VARIABLE,
    WRITABLE_VARIABLE,
    SandboxError,
    default_hidden,
    default_limits,
    enter_sandbox,
    integrity_keys,
    kill_descendants,
    sandbox_status,
    seccomp_status,
    silence_inherited_files,
)

STATUS = sandbox_status()
LANDLOCK = STATUS.startswith("landlock")
SECCOMP = seccomp_status() == "seccomp"
needs_landlock = pytest.mark.skipif(not LANDLOCK, reason=f"Landlock {STATUS}")
needs_seccomp = pytest.mark.skipif(not (LANDLOCK and SECCOMP), reason=f"Landlock {STATUS}, {seccomp_status()}")


def _in_sandbox(writable: list[Path], attack: Callable[[], dict[str, Any]], **options: Any) -> dict[str, Any]:
    """Run ``attack`` in a forked child after it entered the sandbox; its report, or why it failed."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(read)
        try:
            entered = enter_sandbox(writable, **options)
            report = {"entered": entered.summary(), "seccomp": entered.seccomp, **attack()}
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


# ------------------------------------------------------------------------------------- sockets


@needs_seccomp
def test_udp_out_of_a_sandboxed_process_is_refused(tmp_path: Path) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind(("127.0.0.1", 0))
    listener.setblocking(False)
    address = listener.getsockname()
    inherited = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # made before the sandbox

    def attack() -> dict[str, Any]:
        def new_socket() -> None:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                udp.sendto(b"key", address)

        def connected() -> None:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                udp.connect(address)
                udp.send(b"key")

        return {
            "sendto": _outcome(new_socket),
            "connect": _outcome(connected),
            "udp6": _outcome(lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)),
            "raw": _outcome(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)),
            "packet": _outcome(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM)),
            "netlink": _outcome(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)),
            "inherited": _outcome(lambda: inherited.sendto(b"key", address)),
            "inherited-connect": _outcome(lambda: inherited.connect(address)),
        }

    try:
        report = _in_sandbox([tmp_path], attack)
        time.sleep(0.2)
        with pytest.raises(BlockingIOError):
            listener.recvfrom(100)  # nothing arrived
    finally:
        listener.close()
        inherited.close()
    assert report.get("seccomp") == "on", report
    for name in ("sendto", "connect", "udp6", "raw", "packet", "netlink", "inherited", "inherited-connect"):
        assert report[name] == "PermissionError", (name, report)


@needs_seccomp
def test_unix_sockets_outside_the_scratch_folder_do_not_connect(tmp_path: Path) -> None:
    scratch, outside = tmp_path / "scratch", tmp_path / "outside"
    scratch.mkdir()
    outside.mkdir()
    path = str(outside / "raylet.sock")  # as Ray's raylet and plasma sockets
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen()
    server.setblocking(False)
    dgram_path = str(outside / "log.sock")
    dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    dgram.bind(dgram_path)
    dgram.setblocking(False)
    unconnected = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # inherited, not connected
    here, there = socket.socketpair()  # inherited and connected: a worker's pipe to the runner

    def attack() -> dict[str, Any]:
        def connect() -> None:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
                client.connect(path)

        def pair() -> None:
            a, b = socket.socketpair()
            a.sendall(b"ping")
            assert b.recv(4) == b"ping"

        return {
            "connect": _outcome(connect),
            "inherited": _outcome(lambda: unconnected.connect(path)),
            "datagram": _outcome(lambda: unconnected.sendto(b"key", dgram_path)),
            "abstract": _outcome(lambda: socket.socket(socket.AF_UNIX).connect("\0xaibench-test")),
            "socketpair": _outcome(pair),
            "runner": _outcome(lambda: there.sendall(b"still here")),
        }

    try:
        report = _in_sandbox([scratch], attack)
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody connected
        with pytest.raises(BlockingIOError):
            dgram.recv(100)
        assert here.recv(100) == b"still here"
    finally:
        for s in (server, dgram, unconnected, here, there):
            s.close()
    for name in ("connect", "inherited", "datagram", "abstract"):
        assert report[name] == "PermissionError", (name, report)
    assert report["socketpair"] == "done" and report["runner"] == "done", report


@needs_seccomp
def test_tcp_stays_as_landlock_has_it_and_io_uring_is_refused(tmp_path: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]

    def attack() -> dict[str, Any]:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        params = ctypes.create_string_buffer(120)
        ring = libc.syscall(425, 4, params)  # io_uring_setup: it would run socket and connect itself
        return {
            "allowed port": _outcome(lambda: socket.create_connection(("127.0.0.1", port), timeout=5).close()),
            "other port": _outcome(lambda: socket.create_connection(("127.0.0.1", port - 1), timeout=5)),
            "udp": _outcome(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM)),
            "io_uring": "refused" if ring < 0 and ctypes.get_errno() == errno.EACCES else f"{ring}",
        }

    try:
        report = _in_sandbox([tmp_path], attack, tcp_ports=[port])
    finally:
        server.close()
    assert report["allowed port"] == "done", report
    assert report["other port"] == "PermissionError" and report["udp"] == "PermissionError", report
    assert report["io_uring"] == "refused", report


# ------------------------------------------------------------------------------------- /proc and keys


@needs_landlock
def test_other_processes_proc_entries_are_not_readable(tmp_path: Path) -> None:
    parent = os.getpid()

    def attack() -> dict[str, Any]:
        me = os.getpid()
        return {
            "environ": _outcome(lambda: Path(f"/proc/{parent}/environ").read_bytes()),
            "cmdline": _outcome(lambda: Path(f"/proc/{parent}/cmdline").read_bytes()),
            "status": _outcome(lambda: Path(f"/proc/{parent}/status").read_bytes()),
            "init": _outcome(lambda: Path("/proc/1/environ").read_bytes()),
            "own": _outcome(lambda: Path("/proc/self/status").read_bytes()),
            "own by pid": _outcome(lambda: Path(f"/proc/{me}/environ").read_bytes()),
            "cpuinfo": _outcome(lambda: Path("/proc/cpuinfo").read_bytes()),
            "sysctl": _outcome(lambda: Path("/proc/sys/kernel/pid_max").read_bytes()),
            "list": _outcome(lambda: os.listdir("/proc")),
        }

    report = _in_sandbox([tmp_path], attack)
    for name in ("environ", "cmdline", "status", "init"):
        assert report[name] == "PermissionError", (name, report)
    for name in ("own", "own by pid", "cpuinfo", "sysctl", "list"):
        assert report[name] == "done", (name, report)


@needs_landlock
def test_integrity_keys_are_not_readable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The keys of a folder named in XAIBENCH_SANDBOX_HIDDEN, of the command line's default workdir
    (./.xaibench) and of the Python API's (<cache>/runs): hidden; what lies beside them is not."""
    work, cwd, cache = tmp_path / "work", tmp_path / "cwd", tmp_path / "cache"
    keys = [work / "results" / ".key", cwd / ".xaibench" / "results" / ".key"]
    keys.append(cache / "runs" / "cache" / "explanations" / ".key")
    for key in keys:
        key.parent.mkdir(parents=True)
        key.write_text("0" * 64 + "\n")
        (key.parent / "beside.json").write_text("{}")
    secret = tmp_path / "elsewhere" / "token"
    secret.parent.mkdir()
    secret.write_text("s3cret")
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("XAIBENCH_CACHE", str(cache))
    monkeypatch.setenv(HIDDEN_VARIABLE, os.pathsep.join([str(work), str(secret)]))
    assert {str(k) for k in keys} <= set(default_hidden())
    assert integrity_keys([tmp_path], depth=1) == []  # deeper than asked
    assert integrity_keys([work]) == [str(keys[0])]

    def attack() -> dict[str, Any]:
        out: dict[str, Any] = {f"key {i}": _outcome(key.read_bytes) for i, key in enumerate(keys[1:], 1)}
        out["beside"] = [_outcome((k.parent / "beside.json").read_bytes) for k in keys[1:]]
        out["work"] = _outcome(lambda: (work / "results" / "beside.json").read_bytes())
        out["named file"] = _outcome(secret.read_bytes)
        out["listed"] = _outcome(lambda: os.listdir(keys[1].parent))
        return out

    report = _in_sandbox([tmp_path / "elsewhere"], attack)
    for name in ("key 1", "key 2", "work"):  # the folder named is hidden whole
        assert report[name] == "PermissionError", (name, report)
    assert report["beside"] == ["done", "done"] and report["listed"] == "done", report
    assert report["named file"] == "done", report  # a writable folder's files stay readable

    report = _in_sandbox([tmp_path / "scratch"], attack)
    assert report["named file"] == "PermissionError", report


@needs_landlock
def test_a_key_made_after_the_sandbox_was_entered_is_not_readable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run makes its records' key at its first record, while its workers already run."""
    cwd = tmp_path / "cwd"
    (cwd / ".xaibench").mkdir(parents=True)  # a workdir without results yet
    named = tmp_path / "named" / "work"  # a folder named before it exists
    named.parent.mkdir()
    (tmp_path / "data").mkdir()  # beside what is hidden: what is made in it later stays readable
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("XAIBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(HIDDEN_VARIABLE, str(named))
    later = [cwd / ".xaibench" / "results" / ".key", named / "results" / ".key"]
    entered_r, entered_w = os.pipe()
    made_r, made_w = os.pipe()
    report_r, report_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            enter_sandbox([tmp_path / "scratch"])
            os.write(entered_w, b"in")
            os.read(made_r, 1)
            report = {str(p): _outcome(p.read_bytes) for p in later}
            report["beside"] = _outcome((tmp_path / "data" / "made later").read_bytes)
            report["directly above"] = _outcome((tmp_path / "made later").read_bytes)
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            report = {"error": repr(exc)}
        os.write(report_w, json.dumps(report).encode())
        os._exit(0)
    try:
        assert os.read(entered_r, 2) == b"in"
        for key in later:
            key.parent.mkdir(parents=True)
            key.write_text("0" * 64 + "\n")
        (tmp_path / "data" / "made later").write_text("x")
        (tmp_path / "made later").write_text("x")
        os.write(made_w, b"!")
        report = json.loads(os.read(report_r, 10000))
    finally:
        os.waitpid(pid, 0)
        for fd in (entered_r, entered_w, made_r, made_w, report_r, report_w):
            os.close(fd)
    for key in later:
        assert report[str(key)] == "PermissionError", report
    assert report["beside"] == "done", report
    assert report["directly above"] == "PermissionError", report  # a folder above something hidden is listed only


# ------------------------------------------------------------------------------------- limits


@needs_seccomp
def test_limits_are_set_and_cannot_be_raised_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 2 GiB above what this process already maps (a long test process with torch maps several):
    # the forked child starts there, so a fixed 4 GiB could leave it no room at all
    with open("/proc/self/status", encoding="ascii") as status:
        mapped_kb = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
    gib = -(-mapped_kb // (1 << 20)) + 2
    monkeypatch.setenv(LIMITS_VARIABLE, f"address_space={gib}G,processes=300,open_files=256")
    base = 0 if os.getuid() == 0 else None

    def attack() -> dict[str, Any]:
        limits = {n: resource.getrlimit(getattr(resource, n)) for n in ("RLIMIT_AS", "RLIMIT_NPROC", "RLIMIT_NOFILE")}
        return {
            "limits": limits,
            "raise": _outcome(lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))),
            "big map": _outcome(lambda: mmap.mmap(-1, 8 << 30)),
            "small map": _outcome(lambda: mmap.mmap(-1, 1 << 20).close()),
        }

    report = _in_sandbox([tmp_path], attack)
    limits = report["limits"]
    assert limits["RLIMIT_AS"] == [gib << 30, gib << 30], report
    assert limits["RLIMIT_NOFILE"] == [256, 256], report
    nproc = limits["RLIMIT_NPROC"][0]
    assert limits["RLIMIT_NPROC"][1] == nproc and (nproc == 300 if base == 0 else nproc > 300), report
    assert report["raise"] == "PermissionError", report  # root's CAP_SYS_RESOURCE notwithstanding
    assert report["big map"] == "OSError" and report["small map"] == "done", report
    assert f"address_space {gib << 30}" in report["entered"] and "open_files 256" in report["entered"], report


def test_default_limits_and_their_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LIMITS_VARIABLE, raising=False)
    limits = default_limits()
    assert limits["processes"] == sandbox.EXTRA_PROCESSES and limits["open_files"] == sandbox.OPEN_FILES
    if not any(os.path.exists(p) for p in sandbox.GPU_DEVICES):
        assert limits["address_space"] is not None and limits["address_space"] >= sandbox.MIN_ADDRESS_SPACE
    monkeypatch.setenv(LIMITS_VARIABLE, "off")
    assert set(default_limits().values()) == {None}
    monkeypatch.setenv(LIMITS_VARIABLE, "address_space=1.5g, open_files=off")
    assert default_limits()["address_space"] == 3 << 29 and default_limits()["open_files"] is None
    for bad in ("memory=1G", "address_space=lots", "processes=-1"):
        monkeypatch.setenv(LIMITS_VARIABLE, bad)
        with pytest.raises(SandboxError):
            default_limits()


# ------------------------------------------------------------------------------------- seccomp itself


@pytest.mark.parametrize("machine", sorted(sandbox.SECCOMP_ARCHES))
@pytest.mark.parametrize("tcp", [False, True])
def test_the_filter_is_a_valid_program_on_every_architecture_it_knows(machine: str, tcp: bool) -> None:
    program = sandbox._seccomp_program(machine, tcp)
    assert len(program) % 8 == 0 and 0 < len(program) // 8 < 4096
    last = int.from_bytes(program[-4:], "little")
    assert last == sandbox.SECCOMP_RET_KILL_PROCESS  # a foreign architecture's syscalls end the process


def test_without_a_syscall_table_seccomp_is_unavailable_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox.platform, "machine", lambda: "vax")
    assert seccomp_status() == "unavailable: no syscall table for vax"


@needs_landlock
def test_where_seccomp_is_unavailable_the_rest_applies_and_the_reason_is_recorded(tmp_path: Path) -> None:
    def attack() -> dict[str, Any]:
        return {"write": _outcome(lambda: (tmp_path.parent / "x").write_text("x"))}

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        sandbox._machine = lambda: "vax"  # type: ignore[assignment] # in the child only
        os.write(write, json.dumps(_in_sandbox_here([tmp_path], attack)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        report = json.loads(fh.read())
    os.waitpid(pid, 0)
    assert report["seccomp"] == "unavailable: no syscall table for vax", report
    assert report["write"] == "PermissionError", report


def _in_sandbox_here(writable: list[Path], attack: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        entered = enter_sandbox(writable)
        return {"seccomp": entered.seccomp, **attack()}
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        return {"error": f"{type(exc).__name__}: {exc}"}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux only")
def test_inherited_network_and_listening_sockets_are_pointed_at_dev_null() -> None:
    tcp = socket.socket()
    listening = socket.socket(socket.AF_UNIX)
    listening.bind("\0xaibench-test-listening")
    listening.listen()
    here, there = socket.socketpair()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only when every check holds
        ok = False
        try:
            changed = silence_inherited_files(keep=[])
            ok = tcp.fileno() in changed and listening.fileno() in changed
            ok = ok and here.fileno() not in changed and there.fileno() not in changed and w not in changed
            there.sendall(b"pair")
        finally:
            os._exit(0 if ok else 1)
    try:
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert here.recv(10) == b"pair"
    finally:
        for s in (tcp, listening, here, there):
            s.close()
        os.close(r)
        os.close(w)


# ------------------------------------------------------------------------------------- descendants


@needs_landlock
def test_kill_descendants_kills_a_daemon_and_nothing_outside(tmp_path: Path) -> None:
    assert kill_descendants() is False  # outside a sandbox: kill(-1) would reach everything
    outside = subprocess.Popen(["sleep", "60"], start_new_session=True)
    notes = tmp_path / "notes"
    notes.mkdir()

    def attack() -> dict[str, Any]:
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                (notes / "daemon.tmp").write_text(str(os.getpid()))
                os.replace(notes / "daemon.tmp", notes / "daemon")
                time.sleep(60)
            os._exit(0)
        deadline = time.monotonic() + 60
        while not (notes / "daemon").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        daemon = _pid(notes / "daemon")
        killed = kill_descendants()
        return {"killed": killed, "daemon": daemon}

    try:
        report = _in_sandbox([notes], attack)
        assert report["killed"] is True, report
        deadline = time.monotonic() + 5
        while Path(f"/proc/{report['daemon']}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)  # reaped by init: it was not the sandboxed process's child
        assert not Path(f"/proc/{report['daemon']}").exists() or _zombie(report["daemon"])
        assert outside.poll() is None  # outside the sandbox: untouched
    finally:
        outside.kill()
        outside.wait()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


# ------------------------------------------------------------------------------------- the probe

DAEMON_AT_IMPORT = """
    import os, time
    from xaibench import hookimpl
    from xaibench.api import Explainer

    if os.fork() == 0:  # a daemon: double fork, setsid; it holds every descriptor the import had
        os.setsid()
        if os.fork() == 0:
            open({notes!r} + "/daemon.tmp", "w").write(str(os.getpid()))
            os.replace({notes!r} + "/daemon.tmp", {notes!r} + "/daemon")
            time.sleep(120)
        os._exit(0)
    deadline = time.monotonic() + 60
    while not os.path.exists({notes!r} + "/daemon") and time.monotonic() < deadline:
        time.sleep(0.01)  # the daemon runs now

    class Fine(Explainer):
        name = "after-the-daemon"

    @hookimpl
    def register_explainers(register):
        register(Fine)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="subreaper and /proc are Linux only")
@pytest.mark.parametrize("sandboxed", ["on", "off"])
def test_a_probe_whose_plugin_starts_a_daemon_returns_promptly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sandboxed: str
) -> None:
    from xaibench.plugins import catalogue

    if sandboxed == "on" and not LANDLOCK:
        pytest.skip(f"Landlock {STATUS}")
    site, notes = tmp_path / "site", tmp_path / "notes"
    site.mkdir()
    notes.mkdir()
    write_distribution(site, "xb-daemon", "xb_daemon", DAEMON_AT_IMPORT.replace("{notes!r}", repr(str(notes))))
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv(WRITABLE_VARIABLE, str(notes))
    monkeypatch.setenv(catalogue.TIMEOUT_VARIABLE, "60")
    monkeypatch.setenv(sandbox.OFF_VARIABLE, "1" if sandboxed == "on" else "0")
    points = catalogue.entry_points(None, set())["xb-daemon"]
    started = time.monotonic()
    described = catalogue._probe_all({"xb-daemon": points})["xb-daemon"]
    took = time.monotonic() - started
    assert "failure" not in described, described
    assert [c["name"] for c in described["components"]] == ["after-the-daemon"], described
    assert took < 20, f"{took:.1f} s: the probe waited for its plugin's daemon (timeout 60 s)"
    daemon = _pid(notes / "daemon")
    assert not Path(f"/proc/{daemon}").exists()  # killed and reaped by the probe, its subreaper


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="subreaper and /proc are Linux only")
def test_a_probe_told_to_end_kills_what_its_plugin_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner's timeout or interrupt ends a probe (catalogue._kill: SIGTERM): the importing
    process and the daemon it started end with it, not only the probe's own process group."""
    from xaibench.plugins import catalogue

    site, notes, scratch = tmp_path / "site", tmp_path / "notes", tmp_path / "scratch"
    for folder in (site, notes, scratch):
        folder.mkdir()
    code = DAEMON_AT_IMPORT.replace("{notes!r}", repr(str(notes))).replace(
        "time.sleep(0.01)  # the daemon runs now",
        f"time.sleep(0.01)\n    open({str(notes)!r} + '/importer', 'w').write(str(os.getpid()))\n    time.sleep(120)",
    )
    write_distribution(site, "xb-hangs", "xb_hangs", code)
    monkeypatch.setenv(WRITABLE_VARIABLE, str(notes))
    env = {
        **os.environ,
        catalogue.PATH_VARIABLE: json.dumps([str(site), *sys.path]),
        catalogue.SCRATCH_VARIABLE: str(scratch),
    }
    reader, writer = os.pipe()
    command = [sys.executable, "-m", "xaibench.plugins.probe", str(writer), "xb-hangs", "hangs"]
    process = catalogue._start(command, writer, env)
    os.close(writer)
    try:
        deadline = time.monotonic() + 120
        while not (notes / "importer").exists() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        pids = {name: _pid(notes / name) for name in ("importer", "daemon")}
        assert all(Path(f"/proc/{pid}").exists() for pid in pids.values())
        started = time.monotonic()
        catalogue._kill(process)
        assert time.monotonic() - started < catalogue.TERM_SECONDS  # it ended on SIGTERM, not SIGKILL
        assert process.returncode == 128 + signal.SIGTERM
        for name, pid in pids.items():
            assert not Path(f"/proc/{pid}").exists(), name  # killed and reaped by the probe
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(reader)


def _pid(path: Path, seconds: float = 10) -> int:
    """The pid written in ``path`` (waiting for it to be written whole)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return int(path.read_text())
        except (OSError, ValueError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


@needs_landlock
def test_a_probe_started_in_a_sandbox_still_kills_its_plugins_daemon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sandboxed worker that probes a distribution it finds no description of: its probe cannot
    read its own children's /proc entries, and kills what the plugin left all the same."""
    from xaibench.plugins import catalogue

    site, notes, scratch = tmp_path / "site", tmp_path / "notes", tmp_path / "scratch"
    for folder in (site, notes, scratch):
        folder.mkdir()
    write_distribution(site, "xb-daemon", "xb_daemon", DAEMON_AT_IMPORT.replace("{notes!r}", repr(str(notes))))
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv(WRITABLE_VARIABLE, str(notes))
    monkeypatch.setenv(catalogue.TIMEOUT_VARIABLE, "60")
    points = catalogue.entry_points(None, set())["xb-daemon"]

    def attack() -> dict[str, Any]:
        os.environ["TMPDIR"] = str(scratch)
        import tempfile

        tempfile.tempdir = str(scratch)
        started = time.monotonic()
        described = catalogue._probe_all({"xb-daemon": points})["xb-daemon"]
        return {"took": time.monotonic() - started, "failure": described.get("failure")}

    report = _in_sandbox([scratch, notes, Path("/dev/null")], attack)
    assert report.get("failure") is None and report["took"] < 20, report
    daemon = _pid(notes / "daemon")
    assert not Path(f"/proc/{daemon}").exists()  # killed and reaped by the probe, its subreaper


@needs_seccomp
def test_threads_started_before_the_filter_are_confined_by_landlock_and_the_filter(tmp_path: Path) -> None:
    """The CUDA driver fails with error 304 when it starts under the seccomp filter (every sandboxed
    worker of a --device cuda run on an H200; Landlock alone let it start), so workers start it
    in ``before_filter``: between Landlock and the filter. A thread started there is confined by
    both: Landlock (it was started after) and the filter (applied to every thread, TSYNC)."""
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    seen: dict[str, Any] = {}
    stop = threading.Event()
    go = threading.Event()

    def helper() -> None:
        seen["unix socket, before the filter"] = _outcome(lambda: socket.socket(socket.AF_UNIX).close())
        go.wait()  # the filter is in place now: the same thread tries again
        seen["unix socket"] = _outcome(lambda: socket.socket(socket.AF_UNIX).close())
        seen["udp socket"] = _outcome(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close())
        seen["write outside"] = _outcome(lambda: outside.write_text("x"))
        stop.set()

    threads: list[threading.Thread] = []

    def start() -> None:
        threads.append(threading.Thread(target=helper, daemon=True))
        threads[0].start()
        while "unix socket, before the filter" not in seen:
            time.sleep(0.01)

    def attack() -> dict[str, Any]:
        go.set()
        stop.wait(10)
        threads[0].join(10)
        own = _outcome(lambda: socket.socket(socket.AF_UNIX).close())
        return {**seen, "main thread unix socket": own}

    report = _in_sandbox([tmp_path], attack, before_filter=start)
    assert report.get("seccomp") == "on", report
    assert report["unix socket, before the filter"] == "done", report
    assert report["unix socket"] == "PermissionError", report
    assert report["udp socket"] == "PermissionError", report
    assert report["main thread unix socket"] == "PermissionError", report
    assert report["write outside"] == "PermissionError", report
    assert not outside.exists()


@needs_seccomp
def test_a_failing_before_filter_is_a_sandbox_error(tmp_path: Path) -> None:
    def boom() -> None:
        raise RuntimeError("no driver")

    report = _in_sandbox([tmp_path], lambda: {}, before_filter=boom)
    assert report == {"error": "SandboxError: before the seccomp filter: RuntimeError: no driver"}


def test_the_gpu_runtime_is_started_only_where_a_driver_is_and_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sandbox.GPU_RUNTIME_VARIABLE, "0")
    assert sandbox.start_gpu_runtime() == "skipped: XAIBENCH_SANDBOX_CUDA=0"
    monkeypatch.delenv(sandbox.GPU_RUNTIME_VARIABLE)
    exists = os.path.exists
    monkeypatch.setattr(sandbox.os.path, "exists", lambda p: False if p == "/dev/nvidiactl" else exists(p))
    assert sandbox.start_gpu_runtime() == "skipped: no NVIDIA driver"
    monkeypatch.setattr(sandbox.os.path, "exists", lambda p: True if p == "/dev/nvidiactl" else exists(p))
    import torch

    if torch.cuda.is_available():
        assert sandbox.start_gpu_runtime() == "started"
    else:
        assert sandbox.start_gpu_runtime() == "skipped: torch sees no CUDA device"
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        assert sandbox.start_gpu_runtime().startswith("failed: "), "a driver that cannot start is said, not raised"
