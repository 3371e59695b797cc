"""Locks for code shared by threads that each run their own event loop.

`TransactionLock` guards a storage's data for the duration of a transaction. Transactions never suspend, so the
lock is held only while Python runs; a transaction that did suspend would let another task of the same thread try
to take the lock and freeze its event loop forever. The lock turns that freeze into an immediate RuntimeError.
A thread that finds the lock taken parks until it is released and then takes it only once it runs Python again
(holds the GIL). A plain `threading.Lock` hands itself to a parked thread as soon as the OS wakes it, while that
thread still waits for the GIL; the running thread then blocks on its next transaction and every transaction costs
two thread switches (a lock convoy: with 4 runner threads of one process, throughput halved).

`AsyncCrossLoopLock` is a mutual exclusion whose waiters never block a thread: a waiter on any loop awaits a future
that the releasing thread resolves through `call_soon_threadsafe`. A holder may suspend (an inner store doing I/O)
without freezing the event loops of the threads that wait for it.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import Any, Optional

__all__ = ["AsyncCrossLoopLock", "TransactionLock"]


class TransactionLock:
    """A thread lock that refuses to be taken again by the thread holding it (a suspended transaction), and that
    waiting threads take only while they run (see the module docstring)."""

    __slots__ = ("_lock", "_owner", "_parked", "_waiting", "name")

    _PARK_TIMEOUT = 0.05
    """A parked thread looks again after this many seconds even without a wake-up (a safety net only)."""

    def __init__(self, name: str = "store") -> None:
        self._lock = threading.Lock()
        self._parked = threading.Condition(threading.Lock())
        self._waiting = 0
        self._owner: Optional[int] = None
        self.name = name

    def acquire(self) -> None:
        me = threading.get_ident()
        if self._owner == me:
            raise RuntimeError(
                f"The {self.name} transaction lock is held by a task of this thread that suspended inside its "
                "transaction; waiting would freeze this event loop. Transactions must not await anything that "
                "suspends."
            )
        if not self._lock.acquire(blocking=False):
            with self._parked:
                self._waiting += 1
                try:
                    # Only a thread running Python takes the lock: never one that still waits for the GIL.
                    while not self._lock.acquire(blocking=False):
                        self._parked.wait(self._PARK_TIMEOUT)
                finally:
                    self._waiting -= 1
        self._owner = me

    def release(self) -> None:
        self._owner = None
        self._lock.release()
        if self._waiting:  # read without the condition's lock: a thread that parks later finds the lock free
            with self._parked:
                self._parked.notify()

    def locked(self) -> bool:
        return self._lock.locked()

    def __enter__(self) -> TransactionLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class AsyncCrossLoopLock:
    """Mutual exclusion across threads and event loops; waiting suspends the waiter's task, never its thread."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locked = False
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    def locked(self) -> bool:
        return self._locked

    def try_acquire(self) -> bool:
        """Take the lock if it is free right now."""
        with self._guard:
            if self._locked or self._waiters:
                return False
            self._locked = True
            return True

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        with self._guard:
            if not self._locked and not self._waiters:
                self._locked = True
                return
            future: asyncio.Future[None] = loop.create_future()
            self._waiters.append((loop, future))
        try:
            await future
        except BaseException:
            with self._guard:
                try:
                    self._waiters.remove((loop, future))
                    granted = False
                except ValueError:
                    granted = True  # the lock was handed to us while we were being cancelled
            if granted:
                self.release()
            raise

    def release(self) -> None:
        """Hand the lock to the oldest waiter (on its own loop), or free it."""
        with self._guard:
            while self._waiters:
                loop, future = self._waiters.popleft()
                try:
                    loop.call_soon_threadsafe(_grant, future)
                    return  # ownership passes to that waiter
                except RuntimeError:  # its loop is closed: skip it
                    continue
            self._locked = False

    async def __aenter__(self) -> AsyncCrossLoopLock:
        await self.acquire()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.release()


def _grant(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
    # A cancelled waiter finds itself no longer queued and releases the lock it was handed.
