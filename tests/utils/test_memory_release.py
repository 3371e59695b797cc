"""Returning the allocator's free pages to the operating system (glibc `malloc_trim`)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentlightning.utils.memory import release_free_memory

# 1,600 blocks of 64 KiB (under glibc's mmap threshold: they come from the heap), written so they are resident; all
# but the last are freed, and the last pins the top of the heap so free() alone cannot shrink it.
_FRAGMENTED_HEAP = """
import ctypes, sys
from agentlightning.utils.memory import release_free_memory

def rss_kb():
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS")).split()[1])

libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
blocks = [libc.malloc(64 * 1024) for _ in range(1600)]
for block in blocks:
    ctypes.memset(block, 1, 64 * 1024)
for block in blocks[:-1]:
    libc.free(block)
before = rss_kb()
released = release_free_memory()
print(released, before - rss_kb())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_free_heap_pages_held_by_the_allocator_are_returned() -> None:
    out = subprocess.run([sys.executable, "-c", _FRAGMENTED_HEAP], capture_output=True, text=True, check=True).stdout
    released, dropped_kb = out.split()
    assert released == "True" and int(dropped_kb) > 50_000  # of the ~100 MB freed


def test_release_answers_a_bool_wherever_it_runs() -> None:
    assert isinstance(release_free_memory(), bool)
