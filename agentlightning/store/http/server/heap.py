"""Keep the garbage collector's full passes short in a process that serves the store.

A full (generation 2) collection walks every object the collector tracks, while the thread that triggered it holds
the GIL: every request in flight waits. Once a server has started, most of those objects are the imported
libraries (FastAPI, pydantic's schemas, uvicorn, the store's own modules: about 66,000 objects), which live as long as
the process. Under a snapshot workload (heartbeats plus query_rollouts over 1,000 rollouts) full collections ran
every few seconds and each stalled the server for 50-550 ms, the longest waits of the heartbeats behind them.

`freeze_startup_heap()` collects once and then moves everything alive into the collector's permanent generation
(`gc.freeze()`), so that later full passes walk only what was allocated since: the store's records and the requests
in flight. Objects frozen are never collected; they are the process's start-up state, which it keeps anyway.

Only processes that do nothing but serve freeze: `agl store` (and each of its `--workers` processes).
`LightningStoreServer.start()` does not, since it also runs inside a user's process (the trainer's), whose heap at
that moment may hold objects it means to drop later.
"""

from __future__ import annotations

import gc
import os
import threading

__all__ = ["FREEZE_ENV", "freeze_startup_heap"]

#: Set to "0" to leave the collector as it is (e.g. to measure the difference).
FREEZE_ENV = "AGL_STORE_GC_FREEZE"

_frozen_in: set[int] = set()
_lock = threading.Lock()


def freeze_startup_heap() -> bool:
    """Collect, then freeze what is alive, once per process (unless AGL_STORE_GC_FREEZE=0); True if it froze now."""
    if os.environ.get(FREEZE_ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    with _lock:
        pid = os.getpid()
        if pid in _frozen_in:  # a forked child inherits the set: it freezes its own heap again
            return False
        _frozen_in.add(pid)
    gc.collect()
    gc.freeze()
    return True
