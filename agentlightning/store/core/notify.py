"""Wake-ups for `wait_for_rollouts` across tasks, event loops and threads of one process (and, through the storage's
announcements, of other processes).

A waiter is woken once every rollout it still waits for was reported finished (or when all waiters are told to
re-read), not at every completion: waking a waiter on another thread costs a write to its loop's self-pipe and a
GIL hand-off, per rollout when one waiter waits for many. A waiter that also has other reasons to look (its timeout,
the next health deadline) sleeps with that timeout and reads whatever was reported meanwhile.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from typing import Optional


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
