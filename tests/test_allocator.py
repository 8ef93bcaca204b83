"""``tune_allocator``: glibc serves large blocks from the heap instead of fresh mmaps (checked with
``mallinfo2``: bytes in mmapped blocks while a 16 MB array is alive), in a fresh process each."""

from __future__ import annotations

import ctypes
import ctypes.util
import subprocess
import sys

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
