"""What the span writer knows about one store, and what it does when a write to that store fails.

`StoreState` holds a store's spans that wait for a retry (held during an outage's backoff, or split off after a
server error). `handle_failure` applies the error policy of docs/capture.md to a failed request: it updates the
state and the counters and returns the spans that are finished (given up or dropped); the writer settles those.
Every wait comes from the writer's `RetryPolicy` (`agentlightning.utils.retry`). Called with the writer's lock held.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Optional

from agentlightning.utils.retry import RetryPolicy

from .batch import ErrorKind, PendingSpan, SpanWriterStats, classify_error, span_name

__all__ = ["Finished", "RetryGroup", "StoreState", "WriteFailure", "drop_for_auth", "handle_failure"]

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
