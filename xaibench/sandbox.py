"""The worker sandbox (Linux Landlock): what a worker process may write, connect to and signal.

:func:`enter_sandbox` restricts the calling process, and everything it starts afterwards, for
good. It uses the kernel's Landlock LSM through raw syscalls (``ctypes``, no dependency), and
handles every access right the kernel's Landlock ABI offers:

- **Files** (ABI 1-3, 5): read and execute everywhere; write, create, remove, rename, truncate
  and device ioctls only beneath the paths given (a worker's scratch folder, ``/dev/null`` ...).
  Files opened before the call (the worker's pipe to the runner) are not affected. Besides, the
  process may read and write the files of its own threads (``/proc/<pid>/task``, see
  :data:`OWN_THREADS`): CUDA names its helper threads there during ``cuInit``, which fails with
  error 304 (``cudaErrorOperatingSystem``) without it.
- **TCP** (ABI 4): no ``bind`` or ``connect`` except to the ports given.
- **Scopes** (ABI 6): no signal to a process outside the sandbox (the runner, the zygote, other
  workers) and no connection to an abstract unix socket created outside it.

Landlock restricts only the calling thread and the threads and processes it starts later, so
:func:`enter_sandbox` refuses to run in a process that already has other threads.
:func:`sandbox_status` says whether the kernel offers Landlock (``"landlock ABI 7"``) or why not.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import platform
import stat
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

OFF_VARIABLE = "XAIBENCH_SANDBOX"  # "0": workers run without the sandbox (for debugging)
WRITABLE_VARIABLE = "XAIBENCH_SANDBOX_WRITABLE"  # more folders workers may write, os.pathsep-separated

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


def _add_path(libc: ctypes.CDLL, ruleset: int, path: Path, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError as exc:
        raise SandboxError(f"cannot open {path}: {exc.strerror}") from None
    try:
        if not os.path.isdir(path):
            rights &= FS_FILE_RIGHTS
        attr = _PathBeneathAttr(allowed_access=rights, parent_fd=fd)
        if libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(attr), 0) < 0:
            raise SandboxError(f"cannot add a rule for {path}: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


def enter_sandbox(writable: Sequence[Path | str], *, tcp_ports: Iterable[int] = ()) -> None:
    """Restrict this process for good (see the module doc): read everywhere, write only beneath
    ``writable`` (paths that do not exist are skipped), TCP only to or on ``tcp_ports``, no signal
    or abstract unix socket outside the sandbox. :class:`SandboxError` when
    Landlock is missing or a step fails (the process is then partly restricted at most: it should
    exit rather than run plugin code)."""
    abi = landlock_abi()
    if (count := _threads()) > 1:
        raise SandboxError(f"{count} threads already run (Landlock restricts only the calling thread)")
    libc = _libc()
    fs, net, scoped = handled_rights(abi)
    attr = _RulesetAttr(handled_access_fs=fs, handled_access_net=net, scoped=scoped)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    ruleset = libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise SandboxError(f"cannot create a Landlock ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        _add_path(libc, ruleset, Path("/"), FS_READ)
        if os.path.isdir(OWN_THREADS):
            _PINNED.append(os.open(OWN_THREADS, os.O_PATH | os.O_CLOEXEC))
            _add_path(libc, ruleset, Path(OWN_THREADS), FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE)
        for path in writable:
            if os.path.exists(path):
                _add_path(libc, ruleset, Path(path), fs)
        for port in sorted(set(tcp_ports)) if net else ():
            rule = _NetPortAttr(allowed_access=net, port=int(port))
            if libc.syscall(SYS_ADD_RULE, ruleset, RULE_NET_PORT, ctypes.byref(rule), 0) < 0:
                raise SandboxError(f"cannot allow TCP port {port}: {os.strerror(ctypes.get_errno())}")
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise SandboxError(f"cannot set no_new_privs: {os.strerror(ctypes.get_errno())}")
        if libc.syscall(SYS_RESTRICT_SELF, ruleset, 0) < 0:
            raise SandboxError(f"cannot enter the Landlock domain: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)


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


def silence_inherited_files(keep: Iterable[int] = ()) -> list[int]:
    """Point every inherited descriptor above 2 that is a regular file or folder open for writing
    at ``/dev/null`` (Landlock does not restrict descriptors opened before the sandbox: a file the
    runner had open could be written through). Pipes, sockets and devices stay; ``keep`` too.
    Returns the descriptors changed."""
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
            if (stat.S_ISREG(mode) or stat.S_ISDIR(mode)) and flags & os.O_ACCMODE != os.O_RDONLY:
                os.dup2(null, fd, inheritable=not flags & os.O_CLOEXEC)
                changed.append(fd)
    finally:
        os.close(null)
    return changed
