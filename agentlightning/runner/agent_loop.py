"""One event loop for the async agents of every runner thread of a process.

The "shm" strategy runs each runner in a thread with its own event loop. Async libraries commonly keep one client per
process (LangChain's `ChatOpenAI` shares a cached `httpx.AsyncClient`; a module-level `AsyncOpenAI()` does the same)
and its pooled connections belong to the loop that opened them: a second runner thread that reuses one of them fails
with "... is bound to a different event loop". Inside `on_shared_agent_loop(...)` the runner runs its async agents on
one loop per process instead (a daemon thread, started on first use and kept for the life of the process so that such
cached clients stay usable from one run to the next), which is what an asyncio program with one loop gives them.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Awaitable
from typing import Optional, TypeVar

__all__ = ["agent_loop", "on_shared_agent_loop"]

T = TypeVar("T")

_enabled: contextvars.ContextVar[bool] = contextvars.ContextVar("agl_shared_agent_loop", default=False)
_lock = threading.Lock()
_loop: Optional[asyncio.AbstractEventLoop] = None


async def on_shared_agent_loop(awaitable: Awaitable[T]) -> T:
    """Await `awaitable` (a runner's work) with its async agents running on the process's shared agent loop."""
    token = _enabled.set(True)
    try:
        return await awaitable
    finally:
        _enabled.reset(token)


def agent_loop() -> Optional[asyncio.AbstractEventLoop]:
    """The loop async agents of the calling runner run on: the shared one (started if needed) inside
    `on_shared_agent_loop`, else None (the runner's own loop)."""
    if not _enabled.get():
        return None
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            _loop = _start_loop()
        return _loop


def _start_loop() -> asyncio.AbstractEventLoop:
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    def main() -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        loop.run_forever()

    threading.Thread(target=main, name="agl-agent-loop", daemon=True).start()
    ready.wait()
    return loop
