"""One pooled HTTP session per event loop (`lite.LiteSession`, or aiohttp's for https), safe across threads and forks.

Sessions belong to the loop that created them, and one client object may be used by many threads (each
with its own loop, e.g. `asyncio.run` per thread). The pool keeps a keep-alive session per running loop. A session
is closed when its loop shuts down (asyncio.run and loop runners finalise async generators, and the pool parks one
per session for that purpose) or when the client is closed. After a fork the child never touches the parent's
sessions: their sockets belong to the parent.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["SessionPool"]


class Session(Protocol):
    """What the pool needs of a session."""

    @property
    def closed(self) -> bool: ...

    async def close(self) -> Any: ...


_POOLS: weakref.WeakSet[SessionPool] = weakref.WeakSet()
_ABANDONED: list[Any] = []  # sessions inherited through fork: never used nor closed by the child


def _after_fork_in_child() -> None:
    for pool in list(_POOLS):
        pool.forget_all()


os.register_at_fork(after_in_child=_after_fork_in_child)


async def _close_with_loop(session: Session) -> AsyncGenerator[None, None]:
    """Suspended for the life of the loop; the loop's async-generator shutdown resumes it to close the session."""
    try:
        yield
    finally:
        if not session.closed:
            await session.close()


@dataclass
class _Entry:
    loop: asyncio.AbstractEventLoop
    session: Session
    closer: AsyncGenerator[None, None]


class SessionPool:
    """Sessions keyed by event loop. `factory()` creates a session on the running loop."""

    def __init__(self, factory: Callable[[], Session]) -> None:
        self._factory = factory
        self._entries: dict[int, _Entry] = {}
        self._lock = threading.Lock()
        self._pid = os.getpid()
        _POOLS.add(self)

    def forget_all(self) -> None:
        """Drop every session without closing it (used in a forked child)."""
        with self._lock:
            _ABANDONED.extend(entry.session for entry in self._entries.values())
            self._entries.clear()
            self._pid = os.getpid()

    async def get(self) -> Session:
        """The session of the running loop, created on first use."""
        loop = asyncio.get_running_loop()
        if self._pid != os.getpid():
            self.forget_all()
        key = id(loop)
        entry = self._entries.get(key)
        if entry is not None and entry.loop is loop and not entry.session.closed:
            return entry.session
        session = self._factory()
        closer = _close_with_loop(session)
        await closer.asend(None)  # registers the generator with the loop's shutdown_asyncgens
        with self._lock:
            for stale_key in [k for k, e in self._entries.items() if e.loop.is_closed()]:
                del self._entries[stale_key]
            self._entries[key] = _Entry(loop, session, closer)
        return session

    async def close(self) -> None:
        """Close the session of the running loop now, and ask other live loops to close theirs."""
        current = asyncio.get_running_loop()
        with self._lock:
            entries = list(self._entries.values())
            self._entries.clear()
        for entry in entries:
            if entry.loop is current:
                await entry.session.close()
            elif not entry.loop.is_closed() and entry.loop.is_running():
                try:
                    asyncio.run_coroutine_threadsafe(entry.session.close(), entry.loop)
                except RuntimeError:
                    pass  # the loop stopped meanwhile; its shutdown closes the session
