"""A bounded pool of psycopg async connections that any thread and any event loop may use.

psycopg's AsyncConnection waits on its socket through whichever event loop is running when it is awaited, so one
connection can serve different loops one after the other (never two at once). That lets a single pool serve every
thread and loop of the process, unlike asyncpg or psycopg_pool, whose pools belong to the loop that created them
(a pool per loop would leak connections whenever a short-lived loop, like `asyncio.run` in a thread, ends).

Waiting for a free connection never blocks a loop: waiters park a future on their own loop and are handed a
connection (or a permit to open one) through `call_soon_threadsafe`.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Optional, Union

from psycopg import AsyncConnection

from agentlightning.store.errors import StoreBusyError, StoreClosedError

Connector = Callable[[], Awaitable[AsyncConnection]]

#: Handed to a waiter instead of a connection: a slot is free, open a new connection.
_OPEN_PERMIT = object()

# Connections inherited through fork() belong to the parent's sessions: the child keeps them referenced and never
# closes them (closing would send the server a termination message for the parent's session).
_INHERITED: list[object] = []


class _Waiter:
    __slots__ = ("future", "loop")

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.future: asyncio.Future[Union[AsyncConnection, object]] = self.loop.create_future()


class ConnectionPool:
    """At most `max_size` open connections; idle ones are reused, broken ones replaced."""

    def __init__(self, connect: Connector, *, max_size: int, acquire_timeout: float) -> None:
        self._connect = connect
        self.max_size = max_size
        self.acquire_timeout = acquire_timeout
        self._lock = threading.Lock()
        self._idle: list[AsyncConnection] = []
        self._size = 0
        self._waiters: deque[_Waiter] = deque()
        self._closed = False
        self._pid = os.getpid()

    @property
    def size(self) -> int:
        return self._size

    def _check_process(self) -> None:
        """After fork(), forget (without closing) the parent's connections. Called with the lock held."""
        if self._pid != os.getpid():
            _INHERITED.extend(self._idle)
            self._idle = []
            self._size = 0
            self._waiters.clear()
            self._pid = os.getpid()

    async def acquire(self) -> AsyncConnection:
        deadline = time.monotonic() + self.acquire_timeout
        while True:
            waiter: Optional[_Waiter] = None
            open_new = False
            with self._lock:
                if self._closed:
                    raise StoreClosedError("The PostgreSQL store is closed")
                self._check_process()
                while self._idle:
                    conn = self._idle.pop()
                    if not conn.closed and not conn.broken:
                        return conn
                    self._size -= 1
                if self._size < self.max_size:
                    self._size += 1
                    open_new = True
                else:
                    waiter = _Waiter()
                    self._waiters.append(waiter)
            if open_new:
                return await self._open()
            assert waiter is not None
            handed = await self._wait(waiter, deadline)
            if isinstance(handed, AsyncConnection):
                return handed
            if handed is _OPEN_PERMIT:
                return await self._open()

    async def _open(self) -> AsyncConnection:
        """Open a connection in a slot already counted in `_size`."""
        try:
            return await self._connect()
        except BaseException:
            self._free_slot()
            raise

    async def _wait(self, waiter: _Waiter, deadline: float) -> object:
        remaining = deadline - time.monotonic()
        try:
            return await asyncio.wait_for(asyncio.shield(waiter.future), max(remaining, 0.0))
        except BaseException as exc:
            with self._lock:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
            if waiter.future.done() and not waiter.future.cancelled():
                self._give_back(waiter.future.result())
            else:
                waiter.future.cancel()
            if isinstance(exc, asyncio.TimeoutError):
                raise StoreBusyError(
                    f"No PostgreSQL connection became free within {self.acquire_timeout} s "
                    f"(pool size {self.max_size}); raise pool_size or acquire_timeout"
                ) from None
            raise

    def _give_back(self, handed: object) -> None:
        """Return something a waiter received but will not use."""
        if isinstance(handed, AsyncConnection):
            self.release(handed, reusable=True)
        elif handed is _OPEN_PERMIT:
            self._free_slot()

    def _offer(self, item: object) -> bool:
        """Hand `item` to the oldest live waiter (called with the lock held). False when nobody takes it."""
        while self._waiters:
            waiter = self._waiters.popleft()

            def deliver(waiter: _Waiter = waiter) -> None:
                if waiter.future.done():
                    self._give_back(item)
                else:
                    waiter.future.set_result(item)

            try:
                waiter.loop.call_soon_threadsafe(deliver)
            except RuntimeError:  # that waiter's loop is closed
                continue
            return True
        return False

    def _free_slot(self) -> None:
        with self._lock:
            if not self._offer(_OPEN_PERMIT):
                self._size -= 1

    def release(self, conn: AsyncConnection, *, reusable: bool) -> None:
        """Give a connection back; a connection that is not reusable is closed and its slot freed."""
        with self._lock:
            if self._pid != os.getpid():
                _INHERITED.append(conn)
                return
            keep = reusable and not self._closed and not conn.closed and not conn.broken
            if keep:
                if not self._offer(conn):
                    self._idle.append(conn)
                return
        _close_quietly(conn)
        self._free_slot()

    def discard_idle(self) -> None:
        """Close the idle connections (after the server restarted they are dead and would fail their next use)."""
        with self._lock:
            if self._pid != os.getpid():
                return
            idle, self._idle = self._idle, []
            self._size -= len(idle)  # nobody waits while connections are idle
        for conn in idle:
            _close_quietly(conn)

    async def close(self) -> None:
        """Close idle connections now and busy ones when they are released."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            self._size -= len(idle)
            waiters, self._waiters = list(self._waiters), deque()
        for conn in idle:
            _close_quietly(conn)
        for waiter in waiters:
            try:
                waiter.loop.call_soon_threadsafe(waiter.future.cancel)
            except RuntimeError:
                pass


def _close_quietly(conn: AsyncConnection) -> None:
    try:
        conn.pgconn.finish()
    except Exception:
        pass
