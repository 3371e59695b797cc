"""The wall clock the stores read for timestamps and health rules, in one place so that it can be driven.

Every store built on the shared core (memory, SQLite, PostgreSQL, and those served over HTTP from this process)
stamps start, end and heartbeat times and applies `timeout_seconds` / `unresponsive_seconds` with `now()`. Tests
replace the source with `use_clock(fake)` to move time forward explicitly instead of sleeping and hoping the machine
kept up.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["now", "use_clock"]


def _system_time() -> float:
    return time.time()  # looked up on each call, so code that patches `time.time` still drives the stores


_source: Callable[[], float] = _system_time


def now() -> float:
    """Seconds since the epoch, from the current source (`time.time` unless replaced)."""
    return _source()


@contextmanager
def use_clock(source: Callable[[], float]) -> Iterator[None]:
    """Make `now()` read `source` inside the block (process-wide)."""
    global _source
    previous, _source = _source, source
    try:
        yield
    finally:
        _source = previous
