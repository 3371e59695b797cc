"""What the span writer knows about its stores, and what it does when a write to one of them fails.

`StoreState` holds a store's spans that wait for a retry (held during an outage's backoff, or split off after a
server error); `StoreStates` keeps them by store and turns due retries and new batches into one request per store.
`handle_failure` applies the error policy of docs/capture.md to a failed request: it updates the state and the
counters and returns the spans that are finished (given up or dropped); the writer settles those. Every wait comes
from the writer's `RetryPolicy` (`agentlightning.utils.retry`). Called with the writer's lock held.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Optional

from agentlightning.utils.retry import RetryPolicy

from .batch import ErrorKind, PendingSpan, SpanWriterStats, classify_error, span_name

__all__ = [
    "Finished",
    "Job",
    "RetryGroup",
    "StoreState",
    "StoreStates",
    "WriteFailure",
    "drop_for_auth",
    "handle_failure",
]

logger = logging.getLogger("agentlightning.tracer.writer")

_GIVE_UP_AT_SHUTDOWN = 3
"""Outage failures after which a closing writer drops a store's spans."""
_MAX_DELAY_AT_SHUTDOWN = 0.5


@dataclass
class RetryGroup:
    """Spans that met a server error together, retried in their own request once `not_before` passes."""

    items: list[PendingSpan]
    not_before: float


@dataclass
class StoreState:
    """What the writer knows about one store; dropped as soon as no span for it is pending."""

    store: Any
    pending: int = 0
    held: deque[PendingSpan] = field(default_factory=deque)  # waiting for the end of an outage's backoff
    retry: list[RetryGroup] = field(default_factory=list)
    failures: int = 0  # consecutive outage failures
    next_try: float = 0.0
    outage_since: Optional[float] = None
    auth_error: Optional[BaseException] = None
    auth_drops: int = 0

    @property
    def waiting(self) -> bool:
        """Some spans wait for a retry."""
        return bool(self.held or self.retry)

    def due(self, now: float, max_batch: int) -> list[list[PendingSpan]]:
        """The requests to send now: retry groups that are due and held spans, unless the store is in backoff."""
        if self.next_try > now:
            return []
        requests = [group.items for group in self.retry if group.not_before <= now]
        if requests:
            self.retry = [group for group in self.retry if group.not_before > now]
        while self.held:
            requests.append([self.held.popleft() for _ in range(min(max_batch, len(self.held)))])
        return requests

    def next_due(self) -> Optional[float]:
        """When the earliest waiting span becomes due (None when none waits)."""
        times = [self.next_try] if self.held else []
        times.extend(max(group.not_before, self.next_try) for group in self.retry)
        return min(times, default=None)

    def take_waiting(self) -> list[PendingSpan]:
        """Remove and return every span waiting for a retry."""
        items = list(self.held) + [item for group in self.retry for item in group.items]
        self.held.clear()
        self.retry.clear()
        return items


Job = tuple[StoreState, list[PendingSpan]]
"""One request to send: a store and the spans for it."""


class StoreStates:
    """The writer's `StoreState`s by store identity: a store is known while spans for it are pending (or while it
    refused the credentials, so its later spans are dropped at once)."""

    def __init__(self) -> None:
        self._by_key: dict[int, StoreState] = {}

    def __len__(self) -> int:
        return len(self._by_key)

    def for_store(self, store: Any) -> StoreState:
        """The state of `store`, created on its first span."""
        state = self._by_key.get(id(store))
        if state is None:
            state = self._by_key[id(store)] = StoreState(store)
        return state

    def release(self, store_key: int) -> None:
        """One span for the store is done; forget the store once nothing is pending or waiting for it."""
        state = self._by_key.get(store_key)
        if state is not None:
            state.pending -= 1
            if state.pending <= 0 and state.auth_error is None and not state.waiting:
                del self._by_key[store_key]

    def due(self, now: float, max_batch: int) -> list[Job]:
        """Held spans of stores whose backoff has passed, and retry groups that are due."""
        jobs: list[Job] = []
        for state in list(self._by_key.values()):
            jobs.extend((state, items) for items in state.due(now, max_batch))
        return jobs

    def route(self, batch: list[PendingSpan], now: float) -> list[Job]:
        """One request per store; spans of a store in backoff wait with its held spans."""
        by_store: dict[int, list[PendingSpan]] = {}
        for item in batch:
            by_store.setdefault(item.store_key, []).append(item)
        jobs: list[Job] = []
        for key, items in by_store.items():
            state = self._by_key[key]
            if state.next_try > now:
                state.held.extend(items)
            else:
                jobs.append((state, items))
        return jobs

    def waiting(self) -> bool:
        """Spans of some store wait for a retry."""
        return any(state.waiting for state in self._by_key.values())

    def next_due(self) -> Optional[float]:
        """When the earliest waiting span of any store becomes due (None when none waits)."""
        return min((due for state in self._by_key.values() if (due := state.next_due()) is not None), default=None)


@dataclass
class Finished:
    """Spans a failure finished: `dropped` (authentication refused, shutdown during an outage) or `failed`."""

    dropped: list[PendingSpan] = field(default_factory=list)
    failed: list[PendingSpan] = field(default_factory=list)


@dataclass(frozen=True)
class WriteFailure:
    """A failed request: its error, and the writer's situation when it failed (`buffered`: spans pending)."""

    error: BaseException
    now: float
    closing: bool
    buffered: int


def handle_failure(
    state: StoreState, items: list[PendingSpan], failure: WriteFailure, stats: SpanWriterStats, backoff: RetryPolicy
) -> Finished:
    """Apply the error policy to the failed request of `items`; the counters in `stats` follow."""
    exc = failure.error
    stats.retries += 1
    stats.last_error = f"{type(exc).__name__}: {exc}"
    kind = classify_error(exc)
    if kind == ErrorKind.AUTH:
        state.auth_error = exc
        stats.auth_failures += 1
        logger.error(
            "The store refused the span writer's credentials (%s: %s). Spans for this store are dropped from now "
            "on: set the store's API key (AGL_STORE_API_KEY or api_key=) and restart.",
            type(exc).__name__,
            exc,
        )
        return Finished(dropped=drop_for_auth(state, items))
    if kind == ErrorKind.OUTAGE:
        return _outage(state, items, failure, stats, backoff)
    return _server_error(state, items, failure, backoff)


def drop_for_auth(state: StoreState, items: list[PendingSpan]) -> list[PendingSpan]:
    """The spans to drop for a store that refused the credentials: `items` and every span waiting for it."""
    lost = list(items) + state.take_waiting()
    state.auth_drops += len(lost)
    return lost


def _outage(
    state: StoreState, items: list[PendingSpan], failure: WriteFailure, stats: SpanWriterStats, backoff: RetryPolicy
) -> Finished:
    """The store is unreachable: hold its spans until the backoff passes (retried as long as the writer runs)."""
    exc, now = failure.error, failure.now
    state.failures += 1
    delay = backoff.delay(state.failures - 1)
    if failure.closing:
        delay = min(delay, _MAX_DELAY_AT_SHUTDOWN)
    state.next_try = now + delay
    if state.outage_since is None:
        state.outage_since = now
        stats.outages += 1
        logger.error(
            "Store unavailable while writing %d spans (%s: %s); %d spans buffered, retrying with backoff. The agent "
            "keeps running.",
            len(items),
            type(exc).__name__,
            exc,
            failure.buffered,
        )
    elif state.failures % 10 == 0:
        logger.error(
            "Store still unavailable after %d attempts (%s); %d spans buffered", state.failures, exc, failure.buffered
        )
    if failure.closing and state.failures >= _GIVE_UP_AT_SHUTDOWN:
        lost = items + state.take_waiting()
        logger.error("Giving up on %d spans at shutdown: the store is unavailable (%s)", len(lost), exc)
        return Finished(dropped=lost)
    state.held.extendleft(reversed(items))
    return Finished()


def _server_error(state: StoreState, items: list[PendingSpan], failure: WriteFailure, backoff: RetryPolicy) -> Finished:
    """Split a failed request; retry a single span at most `backoff.max_retries` times."""
    exc, now = failure.error, failure.now
    if len(items) > 1:
        if not any(item.failures for item in items):
            logger.error(
                "Store failed on %d spans (%s: %s); retrying them in smaller requests, apart from new spans",
                len(items),
                type(exc).__name__,
                exc,
            )
        middle = len(items) // 2
        for half in (items[:middle], items[middle:]):
            state.retry.append(RetryGroup(half, now + backoff.delay(0)))
        return Finished()
    item = items[0]
    item.failures += 1
    if item.failures > backoff.max_retries:
        logger.error(
            "Giving up on span %r of rollout %s after %d server errors (last: %s: %s)",
            span_name(item),
            item.rollout_id,
            item.failures,
            type(exc).__name__,
            exc,
        )
        return Finished(failed=[item])
    state.retry.append(RetryGroup([item], now + backoff.delay(item.failures - 1)))
    return Finished()
