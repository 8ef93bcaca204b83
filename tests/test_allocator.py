"""``tune_allocator``: glibc serves large blocks from the heap instead of fresh mmaps (checked with
``mallinfo2``: bytes in mmapped blocks while a 16 MB array is alive), in a fresh process each."""

from __future__ import annotations

import ctypes
import ctypes.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

CHILD = """
import ctypes, ctypes.util, sys
import numpy as np
class MallInfo2(ctypes.Structure):
    names = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
    _fields_ = [(n, ctypes.c_size_t) for n in names.split()]
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.mallinfo2.restype = MallInfo2
if sys.argv[1] == "tuned":
    from xaibench.allocator import tune_allocator
    assert tune_allocator() and tune_allocator()
before = libc.mallinfo2().hblkhd
block = np.ones(16 * 1024 * 1024 // 8)
print(libc.mallinfo2().hblkhd - before)
"""


def _glibc_with_mallinfo2() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        return hasattr(ctypes.CDLL(ctypes.util.find_library("c")), "mallinfo2")
    except OSError:
        return False


@pytest.mark.skipif(not _glibc_with_mallinfo2(), reason="needs glibc 2.33+ (mallinfo2) on Linux")
def test_a_16_mb_block_comes_from_the_heap_once_tuned() -> None:
    def mmapped(mode: str) -> int:
        out = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, check=True)
        return int(out.stdout.strip())

    assert mmapped("default") >= 16 * 1024 * 1024  # glibc's default: a fresh mmap, unmapped on free
    assert mmapped("tuned") == 0


def _huge_page_advice(array: np.ndarray) -> bool | None:
    """Whether the mapping holding the middle of ``array`` is advised MADV_HUGEPAGE (``hg`` in its
    VmFlags; NumPy advises the huge-page-aligned part, which the kernel splits off as a mapping of
    its own); ``None`` where /proc/self/smaps cannot tell."""
    address = array.ctypes.data + array.nbytes // 2
    try:
        text = Path("/proc/self/smaps").read_text()
    except OSError:
        return None
    inside = False
    for line in text.splitlines():
        head = line.split(" ", 1)[0]
        if "-" in head and ":" not in head:
            start, end = (int(x, 16) for x in head.split("-"))
            inside = start <= address < end
        elif inside and line.startswith("VmFlags:"):
            return "hg" in line.split()[1:]
    return None


def test_numpy_arrays_made_without_huge_pages_get_no_advice_and_the_setting_comes_back() -> None:
    from xaibench.allocator import without_numpy_huge_pages

    before = np.ones(64 * 1024 * 1024 // 8)
    if not _huge_page_advice(before):
        pytest.skip("NumPy does not advise huge pages here (not Linux, NUMPY_MADVISE_HUGEPAGE=0, or no smaps)")
    with without_numpy_huge_pages():
        inside = np.ones(64 * 1024 * 1024 // 8)
        assert _huge_page_advice(inside) is False
    after = np.ones(64 * 1024 * 1024 // 8)
    assert _huge_page_advice(after) is True
    del before, inside, after
