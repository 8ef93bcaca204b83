"""Keep freed memory for reuse instead of returning it to the OS after every tensor (glibc only).

A forward pass of EfficientNet-Lite0 on a batch of 224 px images allocates activations of tens
of megabytes per layer. glibc serves blocks above its mmap threshold with fresh ``mmap`` calls
and returns them on ``free``, so every layer of every batch page-faults its memory in again:
measured on the 2-core machine, half the wall time of a deletion curve on 9 photos was kernel
time (19.8 s wall, 11.0 s of it system time, at 64 images per forward). Raising the mmap
threshold to glibc's maximum and the trim threshold far above it keeps the heap: the same run took
10.1 s (1.9 s system) at 16 images per forward. Numbers are unchanged: only where memory comes
from changes.

:func:`without_numpy_huge_pages` keeps NumPy from advising the kernel to back its large arrays
with transparent huge pages (``madvise(MADV_HUGEPAGE)``, NumPy's default for arrays of 4 MB and
more). Where the kernel compacts memory on such a fault (``defrag`` set to ``madvise``, common) and
memory is fragmented, as after another large process, each fault waits for that: loading 4M
records as a DataFrame took 18.5 s right after a process had used 12 GB, 6.5 s without the advice.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import sys
from collections.abc import Iterator

M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_MAX = 32 * 1024 * 1024
"""glibc's largest mmap threshold on 64-bit systems (``DEFAULT_MMAP_THRESHOLD_MAX``)."""
TRIM_THRESHOLD = 4 * 1024**3
TOP_PAD = 256 * 1024**2

_tuned: bool | None = None


def tune_allocator() -> bool:
    """Set glibc's malloc to keep freed memory (idempotent); ``False`` where that is not glibc.
    Call it early in a process: forked workers inherit the setting."""
    global _tuned
    if _tuned is not None:
        return _tuned
    _tuned = False
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and others have no mallopt
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    ok = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX) == 1
    ok &= mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    ok &= mallopt(M_TOP_PAD, TOP_PAD) == 1
    _tuned = bool(ok)
    return _tuned


@contextlib.contextmanager
def without_numpy_huge_pages() -> Iterator[None]:
    """NumPy arrays allocated inside the block get no huge-page advice (module docstring); the
    setting before it is restored after. Nothing changes with a NumPy that has no such switch."""
    try:
        from numpy._core import multiarray
    except ImportError:  # pragma: no cover - NumPy < 2 names it numpy.core
        from numpy.core import multiarray  # type: ignore[no-redef]
    switch = getattr(multiarray, "_set_madvise_hugepage", None)
    before = switch(False) if switch is not None else None
    try:
        yield
    finally:
        if switch is not None:
            switch(before)
