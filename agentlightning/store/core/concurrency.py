"""Locks and wake-ups for code shared by threads that each run their own event loop.

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

`CompletionNotifier` wakes `wait_for_rollouts` across tasks, event loops and threads of one process (and, through the
storage's announcements, of other processes). A waiter is woken once every rollout it still waits for was reported
finished (or when all waiters are told to re-read), not at every completion: waking a waiter on another thread costs
a write to its loop's self-pipe and a GIL hand-off, per rollout when one waiter waits for many. A waiter that also
has other reasons to look (its timeout, the next health deadline) sleeps with that timeout and reads whatever was
reported meanwhile.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Iterable
from typing import Any, Optional

__all__ = ["AsyncCrossLoopLock", "CompletionNotifier", "TransactionLock"]


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


class _Waiter:
    __slots__ = ("_wake_scheduled", "event", "expected", "loop", "notified", "reread_all")

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.event = asyncio.Event()
        self.notified: set[str] = set()
        """Ids reported finished since the waiter last took them (guarded by the notifier's lock)."""
        self.reread_all = False
        """Some rollouts may have finished unannounced: re-read every pending one (guarded by the lock)."""
        self.expected = 1
        """Wake up once this many distinct ids were notified (the rollouts still pending; guarded by the lock)."""
        self._wake_scheduled = False

    def _set(self) -> None:
        self._wake_scheduled = False
        self.event.set()

    def wake(self) -> None:
        if self._wake_scheduled:  # one scheduled wake-up serves every notification until it runs
            return
        self._wake_scheduled = True
        try:
            self.loop.call_soon_threadsafe(self._set)
        except RuntimeError:  # the waiter's loop is closed; nobody is waiting any more
            self._wake_scheduled = False


class CompletionNotifier:
    """Lets coroutines wait until one of a set of rollouts is reported finished (by any thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str, set[_Waiter]] = {}

    def register(self, rollout_ids: Iterable[str]) -> _Waiter:
        """Start listening before reading the rollouts, so that no completion is missed in between."""
        waiter = _Waiter()
        with self._lock:
            for rollout_id in rollout_ids:
                self._waiters.setdefault(rollout_id, set()).add(waiter)
        return waiter

    def unregister(self, waiter: _Waiter, rollout_ids: Iterable[str]) -> None:
        with self._lock:
            for rollout_id in rollout_ids:
                waiters = self._waiters.get(rollout_id)
                if waiters is None:
                    continue
                waiters.discard(waiter)
                if not waiters:
                    del self._waiters[rollout_id]

    def notify(self, rollout_ids: Iterable[str]) -> None:
        if not self._waiters:
            return
        woken: set[_Waiter] = set()
        with self._lock:
            for rollout_id in rollout_ids:
                for waiter in self._waiters.get(rollout_id, ()):
                    waiter.notified.add(rollout_id)
                    if len(waiter.notified) >= waiter.expected:
                        woken.add(waiter)
        for waiter in woken:
            waiter.wake()

    def notify_all(self, *, reread: bool) -> None:
        """Wake every waiter; with `reread`, each re-reads all its pending rollouts (any may have finished)."""
        with self._lock:
            woken = {waiter for waiters in self._waiters.values() for waiter in waiters}
            if reread:
                for waiter in woken:
                    waiter.reread_all = True
        for waiter in woken:
            waiter.wake()

    def should_wait(self, waiter: _Waiter, pending: int) -> bool:
        """Before sleeping: whether `waiter`, still waiting for `pending` rollouts, has nothing to read yet. From now
        on it is woken only once `pending` distinct ids were notified (each pending rollout notifies as it
        finishes), or by `notify_all`."""
        with self._lock:
            waiter.expected = max(pending, 1)
            return not waiter.reread_all and len(waiter.notified) < waiter.expected

    def take_notified(self, waiter: _Waiter) -> Optional[set[str]]:
        """The ids reported finished to `waiter` since the last call (and forget them); None when any of its
        rollouts may have finished."""
        with self._lock:
            notified, waiter.notified = waiter.notified, set()
            reread, waiter.reread_all = waiter.reread_all, False
        return None if reread else notified

    @staticmethod
    async def wait(waiter: _Waiter, timeout: Optional[float]) -> None:
        """Wait until woken or `timeout` seconds pass (None: no limit)."""
        if timeout is None:
            await waiter.event.wait()
            return
        try:
            await asyncio.wait_for(waiter.event.wait(), timeout)
        except asyncio.TimeoutError:
            pass
