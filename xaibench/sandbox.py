"""The worker sandbox (Linux Landlock and seccomp): what a worker process may read, write,
connect to and signal, and how much it may take.

:func:`enter_sandbox` restricts the calling process, and everything it starts afterwards, for
good. It uses the kernel's Landlock LSM and a seccomp filter through raw syscalls (``ctypes``, no
dependency), and handles every access right the kernel's Landlock ABI offers:

- **Files** (ABI 1-3, 5): read and execute everywhere except what is *hidden* (below); write,
  create, remove, rename, truncate and device ioctls only beneath the paths given (a worker's
  scratch folder, ``/dev/null`` ...). Files opened before the call (the worker's pipe to the
  runner) are not affected. Besides, the process may read and write the files of its own threads
  (``/proc/<pid>/task``, see :data:`OWN_THREADS`): CUDA names its helper threads there during
  ``cuInit``, which fails with error 304 (``cudaErrorOperatingSystem``) without it.
- **Hidden** (Landlock grants rights, it cannot take them away beneath a rule, so read rights are
  given to everything *around* what is hidden: the folders above it may be listed, their other
  entries read): every other process's ``/proc/<pid>`` (its ``environ``, ``cmdline``, ``status``
  ...; only this process's own entry and the non-process files of ``/proc`` stay readable: a
  process started later in the sandbox cannot read its own ``/proc/self``), and
  the integrity keys (``.key``, :mod:`xaibench.integrity`) found by :func:`default_hidden`, with
  what ``XAIBENCH_SANDBOX_HIDDEN`` names (:func:`hide`). A file created later directly in such a
  listed folder is not readable in the sandbox; entries below its other subfolders are.
- **TCP** (ABI 4): no ``bind`` or ``connect`` except to the ports given.
- **Scopes** (ABI 6): no signal to a process outside the sandbox (the runner, the zygote, other
  workers) and no connection to an abstract unix socket created outside it.
- **Other channels** (seccomp, :func:`seccomp_status`; Landlock has no rule for them): no socket
  but TCP ones (no UDP, raw, packet or netlink socket, and no unix socket: ``socketpair`` stays,
  and so do the sockets already open), so no ``connect`` to a unix socket anywhere, path-based
  (Ray's raylet and plasma sockets) or abstract, inside the scratch folder too (seccomp cannot
  read the address, Landlock up to ABI 7 has no rule for it: Python's ``multiprocessing``
  managers, ``forkserver`` and fd sharing, torch's ``file_descriptor`` tensor sharing across
  ``DataLoader`` workers, do not work in a worker); without TCP ports no ``connect`` or ``listen``
  at all; no ``sendto`` to an address and no TCP Fast Open (a connect that Landlock does not
  see); no ``io_uring`` (it would run all of these without the syscalls); no ``setrlimit``
  (root could raise the limits below again). Where the kernel or the architecture has no seccomp filter, the rest still
  applies and :attr:`Entered.seccomp` says why.
  The CUDA driver cannot start under this filter (error 304, measured on an H200), so a worker
  starts it after Landlock and before the filter (:func:`start_gpu_runtime` as ``before_filter``);
  the filter is then applied to every thread of the process, the driver's too.
- **Limits** (``setrlimit``, :func:`default_limits`, ``XAIBENCH_SANDBOX_LIMITS``): address space,
  processes (and threads) and open files.

Landlock and seccomp restrict only the calling thread and the threads and processes it starts
later, so :func:`enter_sandbox` refuses to run in a process that already has other threads.
:func:`sandbox_status` says whether the kernel offers Landlock (``"landlock ABI 7"``) or why not.
:func:`kill_descendants` kills what a sandboxed process started (it cannot read their ``/proc``
entries any more); :func:`scope_signals` lets a process that is not sandboxed otherwise do so.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import platform
import resource
import signal
import socket
import stat
import struct
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OFF_VARIABLE = "XAIBENCH_SANDBOX"  # "0": workers run without the sandbox (for debugging)
WRITABLE_VARIABLE = "XAIBENCH_SANDBOX_WRITABLE"  # more folders workers may write, os.pathsep-separated
HIDDEN_VARIABLE = "XAIBENCH_SANDBOX_HIDDEN"  # files and folders workers may not read, os.pathsep-separated
LIMITS_VARIABLE = "XAIBENCH_SANDBOX_LIMITS"  # "address_space=32G,processes=1024,open_files=4096" ("off": none)
GPU_RUNTIME_VARIABLE = "XAIBENCH_SANDBOX_CUDA"  # "0": workers do not start CUDA before the seccomp filter
KEY_NAME = ".key"  # an integrity key's file name (xaibench.integrity.KEY_NAME; this module imports no xaibench)

# Syscall numbers: the same on x86-64 and aarch64 (and every other architecture since 5.13).
SYS_CREATE_RULESET = 444
SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446
CREATE_RULESET_VERSION = 1 << 0
PR_SET_NO_NEW_PRIVS = 38
RULE_PATH_BENEATH = 1
RULE_NET_PORT = 2

# Filesystem rights, by the ABI that introduced them.
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

FS_READ = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
FS_FILE_RIGHTS = (
    FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
)  # the rights a file rule may hold


OWN_THREADS = "/proc/self/task"
"""The folder of the calling process's threads, writable in the sandbox (file rights only: read,
write, truncate). CUDA's ``cuInit`` writes ``/proc/self/task/<tid>/comm`` to name its helper
threads and fails with error 304 where it may not (seen on an H200: every sandboxed worker of a
``--device cuda`` run failed so; NVIDIA/OpenShell PR 710 reports the same cause). Only this
process's own threads are reachable beneath it: ``/proc/self`` is resolved when the sandbox is
entered, so a process the worker starts later gets no such right, and neither ``/proc/sys`` nor
another process's files become writable. The folder stays open for the process's lifetime
(:data:`_PINNED`): Landlock's rule holds the folder's inode, and procfs would give a new inode to
a folder it dropped from its cache and looked up again."""

_PINNED: list[int] = []  # descriptors that keep rule targets in the dentry cache (see OWN_THREADS)


class SandboxError(RuntimeError):
    """The sandbox could not be entered (or only partly: the process must not run plugin code)."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


class _NetPortAttr(ctypes.Structure):
    _fields_ = (("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64))


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (1, 2, ...); :class:`SandboxError` saying why when none."""
    if not sys.platform.startswith("linux"):
        raise SandboxError(f"Landlock is Linux only (this is {sys.platform})")
    if platform.machine() not in ("x86_64", "aarch64", "arm64", "riscv64", "ppc64le", "s390x"):
        raise SandboxError(f"Landlock syscall numbers unknown on {platform.machine()}")
    libc = _libc()
    abi = libc.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    if abi < 0:
        code = ctypes.get_errno()
        why = {errno.ENOSYS: "kernel without Landlock", errno.EOPNOTSUPP: "Landlock disabled at boot"}
        raise SandboxError(why.get(code, os.strerror(code)))
    return int(abi)


def sandbox_status() -> str:
    """``"landlock ABI N"`` where workers can be sandboxed, else ``"unavailable: <reason>"``."""
    try:
        return f"landlock ABI {landlock_abi()}"
    except SandboxError as exc:
        return f"unavailable: {exc}"


def handled_rights(abi: int) -> tuple[int, int, int]:
    """The filesystem rights, TCP rights and scopes that ABI ``abi`` can restrict (all of them are)."""
    fs = (1 << 13) - 1  # ABI 1: execute .. make_sym
    if abi >= 2:
        fs |= FS_REFER
    if abi >= 3:
        fs |= FS_TRUNCATE
    if abi >= 5:
        fs |= FS_IOCTL_DEV
    net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    return fs, net, scoped


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def _add_path(
    libc: ctypes.CDLL, ruleset: int, path: Path | str, rights: int, *, pin: bool = False, required: bool = True
) -> None:
    """Grant ``rights`` beneath ``path``. Not ``required`` (a read rule of :func:`_read_rules`): a
    path that cannot be opened or given a rule is skipped, which leaves it unreadable."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError as exc:
        if not required:
            return
        raise SandboxError(f"cannot open {path}: {exc.strerror}") from None
    added = False
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= FS_FILE_RIGHTS
        attr = _PathBeneathAttr(allowed_access=rights, parent_fd=fd)
        added = libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(attr), 0) >= 0
        if not added and required:
            raise SandboxError(f"cannot add a rule for {path}: {os.strerror(ctypes.get_errno())}")
    finally:
        if pin and added:  # procfs gives a dropped and looked-up-again entry a new inode (see OWN_THREADS)
            _PINNED.append(fd)
        else:
            os.close(fd)


# --------------------------------------------------------------------------- what is hidden

PROC = "/proc"
KEY_DEPTH = 3  # how deep below a root default_hidden looks for integrity keys
KEY_ENTRIES = 20000  # how many folder entries it reads at most per root
WORKDIR_KEYS = ("results", "cache/explanations")  # the folders of a workdir with a key (xaibench.runner.run)


def hide(*paths: Path | str) -> None:
    """Add ``paths`` (files or folders) to ``XAIBENCH_SANDBOX_HIDDEN`` in this process's
    environment: sandboxes entered afterwards, here or in processes started afterwards, cannot
    read them (:func:`default_hidden`). For the runner's own folders (its workdir: the records'
    and the explanation cache's keys), before it starts workers."""
    have = [p for p in os.environ.get(HIDDEN_VARIABLE, "").split(os.pathsep) if p]
    for path in paths:
        text = os.path.abspath(os.fspath(path))
        if text not in have:
            have.append(text)
    os.environ[HIDDEN_VARIABLE] = os.pathsep.join(have)


def cache_root() -> Path:
    """xaibench's cache folder: ``$XAIBENCH_CACHE``, else ``~/.cache/xaibench``."""
    return Path(os.environ.get("XAIBENCH_CACHE") or Path.home() / ".cache" / "xaibench")


def integrity_keys(roots: Iterable[Path | str], depth: int = KEY_DEPTH) -> list[str]:
    """The integrity keys (files named ``.key``) in ``roots`` and their folders down to ``depth``
    levels (breadth first, at most :data:`KEY_ENTRIES` entries read per root; symbolic links
    not followed)."""
    found: list[str] = []
    for root in roots:
        budget = KEY_ENTRIES
        queue: deque[tuple[str, int]] = deque([(os.path.abspath(os.fspath(root)), 0)])
        while queue and budget > 0:
            folder, level = queue.popleft()
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        budget -= 1
                        if budget < 0:
                            break
                        try:
                            if entry.name == KEY_NAME and entry.is_file(follow_symlinks=False):
                                found.append(entry.path)
                            elif level < depth and entry.is_dir(follow_symlinks=False):
                                queue.append((entry.path, level + 1))
                        except OSError:
                            continue
            except OSError:
                continue
    return sorted(set(found))


def default_hidden() -> list[str]:
    """What a sandbox hides by default (besides other processes' ``/proc`` entries): what
    ``XAIBENCH_SANDBOX_HIDDEN`` names (files or whole folders: :func:`hide`), and the integrity
    keys (:func:`integrity_keys`) below the folders named there, the command line's default
    workdir (``./.xaibench``) and the Python API's (``<cache>/runs``, :func:`cache_root`): the
    keys of the records and the explanation cache, which only the runner reads (also those it
    has not made yet: a run makes them at its first record, while workers run). The key of the
    cache folder itself (``<cache>/.key``: cached plugin descriptions, trained weights) is not
    hidden by default: sandboxed processes check the plugin descriptions they read with it."""
    named = [p for p in os.environ.get(HIDDEN_VARIABLE, "").split(os.pathsep) if p]
    workdirs = [p for p in (Path.cwd() / ".xaibench", cache_root() / "runs") if p.is_dir()]
    expected = [str(w / folder / KEY_NAME) for w in workdirs for folder in WORKDIR_KEYS]  # made at a run's first record
    return sorted({*named, *expected, *integrity_keys([*workdirs, *(p for p in named if os.path.isdir(p))])})


def _read_rules(hidden: Iterable[Path | str], own: int) -> list[tuple[str, int]]:
    """Landlock rules that grant reading everything but ``hidden`` and the ``/proc`` entries of
    processes other than ``own``: the folders above something hidden may be listed (only), each
    of their other entries read (symbolic links need no rule: what they point to is checked). A
    hidden path that does not exist yet hides what will be made in its nearest folder that does."""
    hide: set[str] = set()
    above = {"/"}
    if os.path.isdir(PROC):
        above.add(PROC)
    for given in hidden:
        path, missing = os.path.abspath(os.fspath(given)), False
        while not os.path.lexists(path):  # not there yet: its nearest folder that is gets listed only,
            path, missing = os.path.dirname(path), True  # and whatever is made in it later is unreadable
        path = os.path.realpath(path)
        if path == "/":
            continue
        if missing:
            if not os.path.isdir(path):
                continue
            above.add(path)
        else:
            hide.add(path)
        parent = os.path.dirname(path)
        while parent not in above:
            above.add(parent)
            parent = os.path.dirname(parent)
    rules: list[tuple[str, int]] = []
    mine = str(own)

    def visit(folder: str) -> None:
        rules.append((folder, FS_READ_DIR))
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError:
            return
        for entry in entries:
            path = entry.path
            if path in hide or (folder == PROC and entry.name.isdigit() and entry.name != mine):
                continue
            try:
                if entry.is_symlink():
                    continue
                below = path in above and entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if below:
                visit(path)
            else:
                rules.append((path, FS_READ))

    visit("/")
    return rules


# --------------------------------------------------------------------------- limits

LIMIT_NAMES = {
    "address_space": resource.RLIMIT_AS,
    "processes": resource.RLIMIT_NPROC,
    "open_files": resource.RLIMIT_NOFILE,
}
MIN_ADDRESS_SPACE = 16 << 30  # thread stacks and malloc arenas: 6 GB for 8 threads x 16 torch threads
EXTRA_PROCESSES = 1024  # processes and threads a sandboxed process may add to its user's count now
OPEN_FILES = 4096
GPU_DEVICES = ("/dev/nvidiactl", "/dev/kfd")  # NVIDIA's and AMD's drivers


def _memory() -> int:
    """The machine's memory and swap, in bytes (0 where unknown)."""
    total = 0
    with contextlib.suppress(OSError, ValueError):
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/meminfo", encoding="ascii") as info:
        for line in info:
            if line.startswith("SwapTotal:"):
                total += int(line.split()[1]) * 1024
    return total


def _user_tasks(uid: int) -> int:
    """How many processes and threads user ``uid`` runs now (what ``RLIMIT_NPROC`` counts)."""
    count = 0
    with contextlib.suppress(OSError), os.scandir(PROC) as entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                if entry.stat().st_uid != uid:
                    continue
                with open(f"{PROC}/{entry.name}/stat", "rb") as fh:
                    count += int(fh.read().rsplit(b")", 1)[1].split()[17])
            except (OSError, ValueError, IndexError):
                continue
    return count


def _parse_size(name: str, text: str) -> int | None:
    text = text.strip().lower()
    if text in ("off", "none", "unlimited"):
        return None
    scale = 1
    if name == "address_space" and text and text[-1] in "kmgt":
        scale = 1024 ** ("kmgt".index(text[-1]) + 1)
        text = text[:-1]
    try:
        value = int(float(text) * scale)
    except ValueError:
        raise SandboxError(f"{LIMITS_VARIABLE}: {name}={text!r} is not a number") from None
    if value <= 0:
        raise SandboxError(f"{LIMITS_VARIABLE}: {name} must be positive (or off)")
    return value


def default_limits() -> dict[str, int | None]:
    """The limits of a sandboxed process, ``None`` for none: ``address_space`` the machine's
    memory and swap (at least 16 GiB; none where an NVIDIA or AMD GPU driver is present: its
    runtime reserves more address space than the machine has memory), ``processes`` 1024 more
    processes and threads than its user runs now (``RLIMIT_NPROC`` counts per user; the kernel
    does not apply it to root), ``open_files`` 4096. ``XAIBENCH_SANDBOX_LIMITS`` changes them
    (``address_space=32G,processes=256,open_files=off``; ``off`` alone: none)."""
    gpu = any(os.path.exists(p) for p in GPU_DEVICES)
    limits: dict[str, int | None] = {
        "address_space": None if gpu else max(_memory(), MIN_ADDRESS_SPACE),
        "processes": EXTRA_PROCESSES,
        "open_files": OPEN_FILES,
    }
    given = os.environ.get(LIMITS_VARIABLE, "").strip()
    if given.lower() in ("off", "none", "0"):
        return dict.fromkeys(limits)
    for item in filter(None, (part.strip() for part in given.split(","))):
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or name not in LIMIT_NAMES:
            raise SandboxError(
                f"{LIMITS_VARIABLE}: {item!r}: expected NAME=VALUE, NAME one of {', '.join(LIMIT_NAMES)}"
            )
        limits[name] = _parse_size(name, value)
    return limits


def _apply_limits(limits: Mapping[str, int | None]) -> dict[str, str]:
    """Set ``limits`` (soft and hard: the seccomp filter refuses raising them again, root's
    ``CAP_SYS_RESOURCE`` notwithstanding); what was set, by name, as text."""
    applied: dict[str, str] = {}
    for name, value in limits.items():
        which = LIMIT_NAMES[name]
        _, hard = resource.getrlimit(which)
        if value is None:
            applied[name] = "unlimited" if hard == resource.RLIM_INFINITY else f"{hard} (as inherited)"
            continue
        if name == "processes":
            uid = os.getuid()
            root = uid == 0 and _init_user_namespace()
            value += 0 if root else _user_tasks(uid)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        try:
            resource.setrlimit(which, (value, value))
        except PermissionError:  # in a sandbox already: its seccomp filter keeps the limits it set
            applied[name] = "unlimited" if hard == resource.RLIM_INFINITY else f"{hard} (inherited)"
            continue
        except (OSError, ValueError) as exc:
            raise SandboxError(f"cannot limit {name} to {value}: {exc}") from None
        applied[name] = str(value)
        if name == "processes" and os.getuid() == 0:
            applied[name] += " (not applied to root by the kernel)"
    return applied


def _init_user_namespace() -> bool:
    try:
        with open(f"{PROC}/self/uid_map", encoding="ascii") as fh:
            return fh.read().split() == ["0", "0", "4294967295"]
    except OSError:
        return True


# --------------------------------------------------------------------------- seccomp

PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_SET_MODE_FILTER_OP = 1  # seccomp(2)'s operation
SECCOMP_FILTER_FLAG_TSYNC = 1  # the filter applies to every thread of the process
MSG_FASTOPEN = 0x20000000
X32_SYSCALL_BIT = 0x40000000
# (audit architecture, syscall numbers) of the architectures the filter knows
SECCOMP_ARCHES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (
        0xC000003E,
        {
            "socket": 41,
            "connect": 42,
            "sendto": 44,
            "sendmsg": 46,
            "listen": 50,
            "setrlimit": 160,
            "prlimit64": 302,
            "sendmmsg": 307,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "seccomp": 317,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "socket": 198,
            "listen": 201,
            "connect": 203,
            "sendto": 206,
            "sendmsg": 211,
            "setrlimit": 164,
            "prlimit64": 261,
            "sendmmsg": 269,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "seccomp": 277,
        },
    ),
}


def _machine() -> str:
    machine = platform.machine()
    return "aarch64" if machine == "arm64" else machine


def seccomp_status() -> str:
    """``"seccomp"`` where :func:`enter_sandbox` can close the channels Landlock leaves open,
    else ``"unavailable: <reason>"``."""
    if not sys.platform.startswith("linux"):
        return f"unavailable: seccomp is Linux only (this is {sys.platform})"
    if (machine := _machine()) not in SECCOMP_ARCHES:
        return f"unavailable: no syscall table for {machine}"
    try:
        with open(f"{PROC}/self/status", encoding="ascii") as fh:
            if not any(line.startswith("Seccomp:") for line in fh):
                return "unavailable: kernel without seccomp"
    except OSError:
        pass
    return "seccomp"


def _seccomp_program(machine: str, tcp: bool, deny: int = errno.EACCES) -> bytes:
    """The classic BPF filter (see the module doc); ``tcp``: TCP ports are allowed (TCP sockets,
    ``connect`` and ``listen``, which Landlock checks)."""
    arch, nr = SECCOMP_ARCHES[machine]
    ld, jeq, jge, jset, and_, ret = 0x20, 0x15, 0x35, 0x45, 0x54, 0x06  # BPF_LD|W|ABS, BPF_JMP|..|K, ...
    code: list[tuple[int, Any, Any, int]] = []  # (op, jump if true, jump if false, k); jumps: labels or 0
    labels: dict[str, int] = {}

    def op(o: int, k: int, jt: Any = 0, jf: Any = 0) -> None:
        code.append((o, jt, jf, k))

    def label(name: str) -> None:
        labels[name] = len(code)

    def arg(i: int, high: bool = False) -> int:
        return 16 + 8 * i + (4 if high else 0)  # little-endian halves of seccomp_data.args[i]

    op(ld, 4)  # arch
    op(jeq, arch, 0, "kill")
    op(ld, 0)  # syscall number
    if machine == "x86_64":
        op(jge, X32_SYSCALL_BIT, "kill", 0)
    op(jeq, nr["socket"], "socket", 0)
    op(jeq, nr["sendto"], "sendto", 0)
    op(jeq, nr["sendmsg"], "sendmsg", 0)
    op(jeq, nr["sendmmsg"], "sendmmsg", 0)
    op(jeq, nr["prlimit64"], "prlimit", 0)
    denied = ["setrlimit", "io_uring_setup", "io_uring_enter", "io_uring_register"]
    if not tcp:
        denied += ["connect", "listen"]
    for name in denied:
        op(jeq, nr[name], "deny", 0)
    op(ret, SECCOMP_RET_ALLOW)
    label("socket")  # TCP sockets only (Landlock checks their bind and connect); without TCP
    op(ld, arg(0))  # ports, listen (which would bind an ephemeral port) is refused above
    op(jeq, socket.AF_INET, "inet", 0)
    op(jeq, socket.AF_INET6, "inet", "deny")
    label("inet")
    op(ld, arg(1))
    op(and_, 0xF)  # SOCK_TYPE_MASK: without SOCK_NONBLOCK and SOCK_CLOEXEC
    op(jeq, socket.SOCK_STREAM, 0, "deny")
    op(ld, arg(2))
    op(jeq, 0, "allow", 0)
    op(jeq, socket.IPPROTO_TCP, "allow", "deny")
    label("sendto")  # sendto(fd, buf, len, flags, dest_addr, addrlen)
    op(ld, arg(3))
    op(jset, MSG_FASTOPEN, "deny", 0)
    op(ld, arg(4))
    op(jeq, 0, 0, "deny")
    op(ld, arg(4, high=True))
    op(jeq, 0, "allow", "deny")
    label("sendmsg")  # sendmsg(fd, msg, flags)
    op(ld, arg(2))
    op(jset, MSG_FASTOPEN, "deny", "allow")
    label("sendmmsg")  # sendmmsg(fd, msgvec, vlen, flags)
    op(ld, arg(3))
    op(jset, MSG_FASTOPEN, "deny", "allow")
    label("prlimit")  # prlimit64(pid, resource, new_limit, old_limit): reading stays
    op(ld, arg(2))
    op(jeq, 0, 0, "deny")
    op(ld, arg(2, high=True))
    op(jeq, 0, "allow", "deny")
    label("allow")
    op(ret, SECCOMP_RET_ALLOW)
    label("deny")
    op(ret, SECCOMP_RET_ERRNO | deny)
    label("kill")
    op(ret, SECCOMP_RET_KILL_PROCESS)

    out = bytearray()
    for index, (o, jt, jf, k) in enumerate(code):
        offsets = []
        for target in (jt, jf):
            offset = 0 if target == 0 else labels[target] - index - 1
            if not 0 <= offset <= 255:
                raise SandboxError(f"seccomp filter: jump of {offset}")
            offsets.append(offset)
        out += struct.pack("=HBBI", o, offsets[0], offsets[1], k & 0xFFFFFFFF)
    return bytes(out)


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


def _install_seccomp(libc: ctypes.CDLL, tcp: bool) -> str:
    """Load the seccomp filter (no_new_privs is set) on every thread of the process (``TSYNC``:
    threads started since Landlock confined the process, e.g. the CUDA runtime's, are filtered
    too); ``"on"``, else ``"unavailable: <why>"``. :class:`SandboxError` when a thread could not
    be given the filter (the process must not run plugin code then)."""
    status = seccomp_status()
    if status != "seccomp":
        return status
    machine = _machine()
    program = _seccomp_program(machine, tcp)
    buffer = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len=len(program) // 8, filter=ctypes.cast(buffer, ctypes.c_void_p).value)
    number = SECCOMP_ARCHES[machine][1]["seccomp"]
    result = libc.syscall(number, SECCOMP_SET_MODE_FILTER_OP, SECCOMP_FILTER_FLAG_TSYNC, ctypes.byref(prog))
    if result > 0:
        raise SandboxError(f"the seccomp filter could not be applied to thread {result}")
    if result == 0:
        return "on"
    code = ctypes.get_errno()
    if code == errno.ENOSYS and _threads() == 1:  # a kernel before 3.17: no seccomp(2), one thread
        if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) == 0:
            return "on"
        code = ctypes.get_errno()
    why = {errno.EINVAL: "kernel without seccomp filters"}.get(code, os.strerror(code))
    if _threads() > 1:  # threads started after Landlock would stay unfiltered
        raise SandboxError(f"the seccomp filter could not be applied to every thread: {why}")
    return f"unavailable: {why}"


# --------------------------------------------------------------------------- entering


@dataclass(frozen=True)
class Entered:
    """What :func:`enter_sandbox` applied: the Landlock ABI, the seccomp filter (``"on"`` or
    ``"unavailable: <why>"``), the limits (by name, as text) and the paths hidden."""

    abi: int
    seccomp: str
    limits: dict[str, str] = field(default_factory=dict)
    hidden: tuple[str, ...] = ()

    def summary(self) -> str:
        """One line: ``landlock ABI 7, seccomp on, address_space 25G ...``."""
        limits = ", ".join(f"{k} {v}" for k, v in self.limits.items())
        return f"landlock ABI {self.abi}, seccomp {self.seccomp}, {limits}, {len(self.hidden)} paths hidden"


ENTERED: Entered | None = None  # what this process's enter_sandbox applied (inherited by forks)
_SCOPED: dict[str, int] = {}  # {"pid": the process that entered a domain with signal scoping}


def enter_sandbox(
    writable: Sequence[Path | str],
    *,
    tcp_ports: Iterable[int] = (),
    hidden: Iterable[Path | str] | None = None,
    limits: Mapping[str, int | None] | None = None,
    before_filter: Callable[[], object] | None = None,
) -> Entered:
    """Restrict this process for good (see the module doc): read everywhere but ``hidden``
    (:func:`default_hidden` when ``None``) and other processes' ``/proc`` entries, write only
    beneath ``writable`` (paths that do not exist are skipped; a hidden path beneath one is
    readable), TCP only to or on ``tcp_ports``, no signal or abstract unix socket outside the
    sandbox, no other socket, under ``limits`` (:func:`default_limits` when ``None``).
    ``before_filter`` runs once Landlock confines the process and before the seccomp filter (which
    then applies to every thread it started): for trusted start-up code that needs a syscall the
    filter refuses (:func:`start_gpu_runtime`); an exception from it is a :class:`SandboxError`.
    :class:`SandboxError` when Landlock is missing or a step fails (the process is then partly
    restricted at most: it should exit rather than run plugin code). Returns what was applied
    (also in :data:`ENTERED`)."""
    global ENTERED
    abi = landlock_abi()
    if (count := _threads()) > 1:
        raise SandboxError(f"{count} threads already run (Landlock restricts only the calling thread)")
    tcp_ports = sorted(set(tcp_ports))
    hide = sorted({os.path.abspath(os.fspath(p)) for p in (default_hidden() if hidden is None else hidden)})
    if limits is not None and (unknown := set(limits) - set(LIMIT_NAMES)):
        raise SandboxError(f"unknown limits {sorted(unknown)}: expected {', '.join(LIMIT_NAMES)}")
    applied = _apply_limits(default_limits() if limits is None else {**dict.fromkeys(LIMIT_NAMES), **limits})
    libc = _libc()
    fs, net, scoped = handled_rights(abi)
    attr = _RulesetAttr(handled_access_fs=fs, handled_access_net=net, scoped=scoped)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    ruleset = libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise SandboxError(f"cannot create a Landlock ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        for path, rights in _read_rules(hide, os.getpid()):
            _add_path(libc, ruleset, path, rights, pin=path.startswith(PROC + "/"), required=False)
        if os.path.isdir(OWN_THREADS):
            _add_path(libc, ruleset, OWN_THREADS, FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE, pin=True)
        for path in writable:
            if os.path.exists(path):
                _add_path(libc, ruleset, Path(path), fs)
        for port in tcp_ports if net else ():
            rule = _NetPortAttr(allowed_access=net, port=int(port))
            if libc.syscall(SYS_ADD_RULE, ruleset, RULE_NET_PORT, ctypes.byref(rule), 0) < 0:
                raise SandboxError(f"cannot allow TCP port {port}: {os.strerror(ctypes.get_errno())}")
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise SandboxError(f"cannot set no_new_privs: {os.strerror(ctypes.get_errno())}")
        if libc.syscall(SYS_RESTRICT_SELF, ruleset, 0) < 0:
            raise SandboxError(f"cannot enter the Landlock domain: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)
    _SCOPED.clear()
    if scoped & SCOPE_SIGNAL and _signals_scoped():
        _SCOPED["pid"] = os.getpid()
    if before_filter is not None:
        try:
            before_filter()
        except Exception as exc:  # noqa: BLE001 - said as the sandbox's failure: the process exits
            raise SandboxError(f"before the seccomp filter: {type(exc).__name__}: {exc}") from None
    seccomp = _install_seccomp(libc, tcp=bool(tcp_ports))
    ENTERED = Entered(abi=abi, seccomp=seccomp, limits=applied, hidden=tuple(hide))
    return ENTERED


def _signals_scoped() -> bool:
    """Whether signals to the process that started this one are refused now (Landlock's signal
    scope is in force: :func:`kill_descendants` may rely on it)."""
    parent = os.getppid()
    if parent <= 1:
        return False
    try:
        os.kill(parent, 0)
    except PermissionError:
        return True
    except OSError:
        return False
    return False


def scope_signals() -> bool:
    """Confine the signals of this process, and of what it starts, to itself and what it starts
    (a Landlock domain with the signal scope alone: nothing else is restricted), so that
    :func:`kill_descendants` can be used in a process that must not be sandboxed otherwise (the
    plugin probe, which kills what its plugin left behind). ``False`` where Landlock has no scopes
    (ABI < 6) or the process has other threads."""
    try:
        abi = landlock_abi()
    except SandboxError:
        return False
    if abi < 6 or _threads() > 1:
        return False
    libc = _libc()
    attr = _RulesetAttr(handled_access_fs=0, handled_access_net=0, scoped=SCOPE_SIGNAL)
    ruleset = libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(24), ctypes.c_uint32(0))
    if ruleset < 0:
        return False
    try:
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or libc.syscall(SYS_RESTRICT_SELF, ruleset, 0) < 0:
            return False
    finally:
        os.close(ruleset)
    _SCOPED.clear()
    if _signals_scoped():
        _SCOPED["pid"] = os.getpid()
    return bool(_SCOPED)


def kill_descendants(timeout: float = 5.0) -> bool:
    """SIGKILL every process that this sandboxed process started, directly or not (daemons that
    called ``setsid`` included), and reap those that are, or became (a subreaper), its children.
    It uses ``kill(-1, SIGKILL)``, which Landlock's signal scope confines to this process's own
    domain, so only in the process that entered the sandbox (or :func:`scope_signals`) with that
    scope in force; elsewhere it does nothing and returns ``False`` (find them in ``/proc`` then).
    ``True`` when done."""
    if _SCOPED.get("pid") != os.getpid() or not _signals_scoped():
        return False
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError):
            os.kill(-1, signal.SIGKILL)
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            return True  # no child left (orphans of a subreaper included)
        if time.monotonic() > deadline:
            return True
        time.sleep(0.001)


def sandbox_enabled() -> bool:
    """Whether workers should be sandboxed: on, unless ``XAIBENCH_SANDBOX=0`` (or ``off``)."""
    return os.environ.get(OFF_VARIABLE, "1").strip().lower() not in ("0", "off", "no", "false")


def worker_writable(scratch: Path) -> list[Path]:
    """What a worker may write: its ``scratch`` folder, ``/dev/null``, ``/dev/shm`` (POSIX shared
    memory: Python's multiprocessing locks, torch's shared tensors), on a machine with an NVIDIA
    driver its devices and CUDA's kernel cache ``~/.nv/ComputeCache``, and the folders named in
    ``XAIBENCH_SANDBOX_WRITABLE``."""
    paths = [scratch, Path("/dev/null"), Path("/dev/shm")]
    if os.path.exists("/dev/nvidiactl"):
        paths += sorted(Path("/dev").glob("nvidia*"))
        cache = Path.home() / ".nv" / "ComputeCache"
        with contextlib.suppress(OSError):
            cache.mkdir(parents=True, exist_ok=True)
        paths.append(cache)
    extra = os.environ.get(WRITABLE_VARIABLE, "")
    paths += [Path(p) for p in extra.split(os.pathsep) if p]
    return paths


#: Per-user folders libraries write on import, pointed into the scratch folder (the only one a
#: worker may write): matplotlib (imported by pytorch-grad-cam) otherwise warns on every worker
#: start that it cannot create ``~/.config/matplotlib``.
SCRATCH_FOLDERS: Mapping[str, str] = {"MPLCONFIGDIR": "matplotlib"}


def use_scratch(scratch: str) -> None:
    """Make ``scratch`` this process's temporary folder (``TMPDIR``, :mod:`tempfile`) and the
    folder of each library in :data:`SCRATCH_FOLDERS` (a subfolder, made here). A worker calls it
    before it enters the sandbox and before any plugin runs."""
    os.environ["TMPDIR"] = tempfile.tempdir = scratch
    for variable, name in SCRATCH_FOLDERS.items():
        folder = os.path.join(scratch, name)
        with contextlib.suppress(OSError):
            os.makedirs(folder, exist_ok=True)
        os.environ[variable] = folder


def start_gpu_runtime() -> str:
    """Start the CUDA runtime in this process (a worker's :func:`enter_sandbox` ``before_filter``),
    where an NVIDIA driver is present (``/dev/nvidiactl``) and torch has CUDA: ``cuInit`` and the
    current device's primary context. The CUDA driver fails with error 304
    (``cudaErrorOperatingSystem``) when it starts under the seccomp filter (measured on an H200:
    every sandboxed worker of a ``--device cuda`` run, and Landlock alone let it start; see
    docs/gpu.md); started before the filter, its threads are confined by Landlock and then by the
    filter like the rest of the worker. Costs one CUDA context per worker on a GPU machine;
    ``XAIBENCH_SANDBOX_CUDA=0`` skips it (a CUDA run's workers then fail). Returns what it did
    (``"started"``, ``"skipped: <why>"``, ``"failed: <error>"``); never raises: a worker that
    cannot start CUDA says so in the records of the tasks that need it."""
    if os.environ.get(GPU_RUNTIME_VARIABLE, "1").strip().lower() in ("0", "off", "no", "false"):
        return f"skipped: {GPU_RUNTIME_VARIABLE}=0"
    if not os.path.exists("/dev/nvidiactl"):
        return "skipped: no NVIDIA driver"
    try:
        import torch

        if not torch.cuda.is_available():
            return "skipped: torch sees no CUDA device"
        torch.empty(1, device=torch.device("cuda", torch.cuda.current_device()))
    except Exception as exc:  # noqa: BLE001 - the tasks that need CUDA report it
        return f"failed: {type(exc).__name__}: {str(exc)[:200]}"
    return "started"


def silence_inherited_files(keep: Iterable[int] = ()) -> list[int]:
    """Point every inherited descriptor above 2 that is a regular file or folder open for
    writing, or a socket that is not a connected unix socket (a network socket of the runner, a
    listening or unconnected one), at ``/dev/null`` (Landlock does not restrict descriptors opened
    before the sandbox: a file the runner had open could be written through, a socket used). Pipes,
    connected unix sockets (socketpairs) and devices stay; ``keep`` too. Returns the descriptors
    changed."""
    changed: list[int] = []
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return changed
    keep = set(keep)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in fds:
            if fd <= 2 or fd == null or fd in keep:
                continue
            try:
                mode = os.fstat(fd).st_mode
                flags = fcntl.fcntl(fd, fcntl.F_GETFL)
            except OSError:
                continue
            writable = (stat.S_ISREG(mode) or stat.S_ISDIR(mode)) and flags & os.O_ACCMODE != os.O_RDONLY
            if writable or (stat.S_ISSOCK(mode) and not _connected_unix(fd)):
                os.dup2(null, fd, inheritable=not fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC)
                changed.append(fd)
    finally:
        os.close(null)
    return changed


def _connected_unix(fd: int) -> bool:
    try:
        sock = socket.socket(fileno=fd)
    except OSError:
        return False
    try:
        if sock.family != socket.AF_UNIX:
            return False
        sock.getpeername()  # OSError (ENOTCONN) when not connected
        return True
    except OSError:
        return False
    finally:
        sock.detach()


def child_pids() -> list[int]:
    """The processes whose parent is this one (zombies included), from ``/proc`` (empty where it
    cannot be read: inside a sandbox, other processes' entries are hidden)."""
    me, found = os.getpid(), []
    with contextlib.suppress(OSError), os.scandir(PROC) as entries:
        for entry in entries:
            if entry.name.isdigit():
                try:
                    with open(f"{PROC}/{entry.name}/stat", "rb") as fh:
                        if int(fh.read().rsplit(b")", 1)[1].split()[1]) == me:
                            found.append(int(entry.name))
                except (OSError, ValueError, IndexError):
                    continue
    return found
