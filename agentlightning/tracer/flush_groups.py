"""Flush groups of the span writer: how many spans of each group are not settled yet, and who waits for them.

A group is any hashable the submitter chose (the tracer uses its trace context); `...` stands for every span.
Threads wait on the writer's condition; event loops register a future here, resolved (thread-safely) when the group
empties. Not locked on its own: the writer calls it with its lock held.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable

__all__ = ["ALL", "FlushGroups", "Waiter"]

ALL = ...
"""The group of every span."""

Waiter = tuple[asyncio.AbstractEventLoop, "asyncio.Future[bool]"]


class FlushGroups:
    """Counts of unsettled spans per group, and the event-loop waiters of each group."""

    def __init__(self) -> None:
        self._pending: dict[Hashable, int] = {}
        self._waiters: dict[Hashable, list[Waiter]] = {}

    def add(self, group: Hashable) -> None:
        self._pending[group] = self._pending.get(group, 0) + 1

    def outstanding(self, group: Hashable = ALL) -> int:
        if group is ALL:
            return sum(self._pending.values())
        return self._pending.get(group, 0)

    def snapshot(self) -> dict[str, int]:
        return {repr(key): value for key, value in self._pending.items() if value}

    def settle(self, group: Hashable) -> None:
        """One span of `group` is done; resolves the waiters of the group (and of ALL) once nothing is left."""
        left = self._pending.get(group, 0) - 1
        if left > 0:
            self._pending[group] = left
            return
        self._pending.pop(group, None)
        self._resolve(group)
        if not self._pending:
            self._resolve(ALL)

    def wait(self, group: Hashable, waiter: Waiter) -> None:
        self._waiters.setdefault(group, []).append(waiter)

    def forget(self, group: Hashable, waiter: Waiter) -> None:
        waiters = self._waiters.get(group)
        if waiters is not None and waiter in waiters:
            waiters.remove(waiter)
            if not waiters:
                del self._waiters[group]

    def _resolve(self, group: Hashable) -> None:
        for loop, future in self._waiters.pop(group, []):
            try:
                loop.call_soon_threadsafe(_set_done, future)
            except RuntimeError:  # the waiting loop was closed meanwhile
                pass


def _set_done(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(True)
