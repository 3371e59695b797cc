"""Where a benchmark server's memory goes: periodic tracemalloc and gc reports written from inside the process.

`start(directory, every_seconds, baseline_after_seconds)` starts tracemalloc and a daemon thread. After
`baseline_after_seconds` (the warm-up) it takes a baseline snapshot and counts the live objects per type; every
`every_seconds` afterwards it appends to `directory/memtrace.txt`: RSS, RSS after `malloc_trim(0)` (what glibc
held but no longer used), the bytes tracemalloc traces, the 25 allocation sites (grouped by traceback) that grew
most since the baseline, and the 15 object types whose live count grew most. Allocations made by C libraries
(SQLite's page cache, libpq) are not traced: growth in RSS that neither tracemalloc nor `malloc_trim` explains
lives there.
"""

from __future__ import annotations

import ctypes
import gc
import os
import threading
import time
import tracemalloc
from collections import Counter
from typing import TextIO


def _rss_kb() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _malloc_trim() -> bool:
    try:
        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):
        return False


def _type_counts() -> Counter[str]:
    return Counter(type(obj).__qualname__ for obj in gc.get_objects())


def _report(
    out: TextIO, started: float, baseline: tracemalloc.Snapshot, base_types: Counter[str], base_rss: int
) -> None:
    rss = _rss_kb()
    trimmed = _malloc_trim()
    rss_trimmed = _rss_kb()
    snapshot = tracemalloc.take_snapshot().filter_traces(
        (tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen importlib._bootstrap>"))
    )
    traced, _ = tracemalloc.get_traced_memory()
    out.write(
        f"\n=== t={time.monotonic() - started:.0f}s rss={rss} KB (+{rss - base_rss} since baseline) "
        f"after malloc_trim({trimmed})={rss_trimmed} KB traced={traced // 1024} KB\n"
    )
    for stat in snapshot.compare_to(baseline, "traceback")[:25]:
        if stat.size_diff <= 0:
            break
        out.write(f"+{stat.size_diff // 1024} KB (+{stat.count_diff} blocks), now {stat.size // 1024} KB\n")
        for line in stat.traceback.format(limit=8):
            out.write(f"    {line}\n")
    types = _type_counts()
    grown = sorted(((types[name] - base_types.get(name, 0), name) for name in types), reverse=True)[:15]
    out.write("object types grown since baseline: " + ", ".join(f"{name} +{n}" for n, name in grown if n > 0) + "\n")
    out.flush()


def start(directory: str, every_seconds: float = 30.0, baseline_after_seconds: float = 60.0) -> threading.Thread:
    """Trace this process's allocations and report them to `directory/memtrace.txt` (see the module docstring)."""
    os.makedirs(directory, exist_ok=True)
    tracemalloc.start(16)
    started = time.monotonic()

    def loop() -> None:
        time.sleep(baseline_after_seconds)
        gc.collect()
        baseline = tracemalloc.take_snapshot()
        base_types = _type_counts()
        base_rss = _rss_kb()
        with open(os.path.join(directory, "memtrace.txt"), "a") as out:
            out.write(f"baseline at t={baseline_after_seconds:.0f}s: rss={base_rss} KB pid={os.getpid()}\n")
            out.flush()
            while True:
                time.sleep(every_seconds)
                _report(out, started, baseline, base_types, base_rss)

    thread = threading.Thread(target=loop, name="memtrace", daemon=True)
    thread.start()
    return thread
