"""Pieces of the span writer: the queued-span record, its counters, how store errors are classified, and the batch
storer that talks to a store (sequence ids, batched adds, isolation of rejected data)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from agentlightning.types import Span

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from agentlightning.store.base import LightningStore

__all__ = ["BatchStorer", "ErrorKind", "PendingSpan", "SpanWriterStats", "classify_error", "is_rejection", "span_name"]

logger = logging.getLogger("agentlightning.tracer.writer")

SpanConverter = Callable[["ReadableSpan", str, str, int], Span]
"""Turns a finished OpenTelemetry span into a stored Span (rollout id, attempt id, sequence id)."""


@dataclass
class PendingSpan:
    store_key: int
    rollout_id: str
    attempt_id: str
    group: Hashable
    urgent: bool
    readable: Optional[ReadableSpan] = None
    span: Optional[Span] = None
    needs_sequence: bool = True
    on_written: Optional[Callable[[Span], None]] = None
    done: bool = False
    failures: int = 0
    """Server errors this span met (bounded by the writer's `max_retries`)."""


@dataclass
class SpanWriterStats:
    """Counters of a SpanWriter since it started (`SpanWriter.stats()` returns a snapshot).

    Every submitted span ends as exactly one of written, duplicates, rejected, failed or dropped, or is still
    pending: `submitted == written + duplicates + rejected + failed + dropped + pending`.
    """

    submitted: int = 0
    written: int = 0
    """Stored by this writer."""
    duplicates: int = 0
    """The store already had the span (a retry of a write that had committed)."""
    rejected: int = 0
    """The store refused the data (unknown rollout or attempt, invalid span)."""
    failed: int = 0
    """Given up after `max_retries` server errors (HTTP 500 and other unexpected store errors)."""
    dropped: int = 0
    """Not stored for other reasons: authentication refused, the spill file full, shut down during an outage."""
    spilled: int = 0
    """Went through the spill file because the memory queue was full."""
    retries: int = 0
    pending: int = 0
    batches: int = 0
    outages: int = 0
    """Times the store became unreachable."""
    auth_failures: int = 0
    """Stores that refused the writer's credentials (401/403); their spans are dropped at once."""
    queued: int = 0
    """Spans in memory now (converted or not, including those waiting for a retry)."""
    spill_bytes: int = 0
    """Bytes on disk in the spill file now."""
    stores: int = 0
    """Stores the writer holds a reference to now (those with spans pending)."""
    last_error: Optional[str] = None
    pending_by_group: dict[str, int] = field(default_factory=dict)


class ErrorKind:
    """How the writer treats a failed store call."""

    REJECTED = "rejected"
    """The data itself is refused: isolate and drop the offending spans, never retry."""
    AUTH = "auth"
    """401/403: retrying cannot help; fail loudly, drop this store's spans."""
    OUTAGE = "outage"
    """The store cannot be reached (connection refused, timeout, closed): retry with backoff, keep the spans."""
    SERVER = "server"
    """The store answered with a server error (500) or raised something unexpected: retried a bounded number of
    times, splitting the batch so that one bad span cannot hold back the others."""


def classify_error(exc: BaseException) -> str:
    """The `ErrorKind` of an exception raised by a store call."""
    from agentlightning.store.errors import StoreBusyError, StoreClosedError
    from agentlightning.store.http.errors import StoreConnectionError, StoreHTTPError

    if isinstance(exc, StoreHTTPError):
        if exc.status in (401, 403):
            return ErrorKind.AUTH
        if exc.status in (502, 503, 504):
            return ErrorKind.OUTAGE
        return ErrorKind.SERVER
    if isinstance(exc, PermissionError):
        return ErrorKind.AUTH
    if isinstance(
        exc, (StoreConnectionError, StoreClosedError, StoreBusyError, ConnectionError, TimeoutError, OSError)
    ):
        return ErrorKind.OUTAGE
    if is_rejection(exc):
        return ErrorKind.REJECTED
    return ErrorKind.SERVER


def is_rejection(exc: BaseException) -> bool:
    """True when the store refused the data itself (retrying cannot help); False for outages."""
    from pydantic import ValidationError

    from agentlightning.store.errors import StoreClosedError

    if isinstance(exc, StoreClosedError):
        return False
    return isinstance(exc, (ValueError, TypeError, ValidationError))


def span_name(item: PendingSpan) -> str:
    if item.span is not None:
        return item.span.name
    if item.readable is not None:
        return item.readable.name
    return "?"


class BatchStorer:
    """Stores lists of pending spans in one store; reports each span's outcome through `finish`."""

    def __init__(self, converter: Optional[SpanConverter], *, finish: Callable[..., None]) -> None:
        self._converter = converter
        self._finish = finish

    async def write(
        self, store: LightningStore, items: list[PendingSpan], *, on_answer: Optional[Callable[[], None]] = None
    ) -> None:
        """Write the unfinished `items` to `store` (one sequence-id call and one add call).

        Raises on anything but a rejection of the data (the writer decides about retries); data the store rejects is
        isolated per attempt and per span and reported through `finish`. `on_answer` runs once the store has
        answered, before any span is reported (so a recovery is logged before a flush waiting on them returns).
        """
        items = [item for item in items if not item.done]
        if not items:
            return
        try:
            await self._store_items(store, items, on_answer)
        except Exception as exc:
            if not is_rejection(exc):
                raise
            if on_answer is not None:
                on_answer()
            await self._isolate(store, items, exc)

    async def _store_items(
        self, store: LightningStore, items: Sequence[PendingSpan], on_answer: Optional[Callable[[], None]] = None
    ) -> None:
        missing = [item for item in items if item.needs_sequence]
        if missing:
            ids = await store.get_many_span_sequence_ids([(item.rollout_id, item.attempt_id) for item in missing])
            for item, sequence_id in zip(missing, ids, strict=True):
                if item.span is None:
                    assert item.readable is not None and self._converter is not None
                    item.span = self._converter(item.readable, item.rollout_id, item.attempt_id, int(sequence_id))
                    item.readable = None
                else:
                    item.span = item.span.model_copy(update={"sequence_id": int(sequence_id)})
                item.needs_sequence = False
        spans = [item.span for item in items if item.span is not None]
        added = await store.add_many_spans(spans)
        if on_answer is not None:
            on_answer()
        added_ids = Counter((span.rollout_id, span.attempt_id, span.span_id) for span in added)
        for item in items:
            assert item.span is not None
            key = (item.span.rollout_id, item.span.attempt_id, item.span.span_id)
            duplicate = added_ids[key] <= 0
            added_ids[key] -= 1
            self._finish(item, item.span, duplicate=duplicate)

    async def _isolate(self, store: LightningStore, items: list[PendingSpan], first_error: BaseException) -> None:
        """The store rejected a batch: retry per attempt, then per span, and reject only what fails alone."""
        groups: dict[tuple[str, str], list[PendingSpan]] = {}
        for item in items:
            if item.done:
                continue
            groups.setdefault((item.rollout_id, item.attempt_id), []).append(item)
        for (rollout_id, attempt_id), group_items in groups.items():
            try:
                await self._store_items(store, group_items)
                continue
            except Exception as exc:
                if not is_rejection(exc):
                    raise
                group_error: BaseException = exc
            from agentlightning.store.errors import AttemptNotFoundError, RolloutNotFoundError

            if isinstance(group_error, (RolloutNotFoundError, AttemptNotFoundError)):
                logger.error(
                    "Store rejected %d spans of rollout %s attempt %s: %s. They cannot be stored and were dropped.",
                    len(group_items),
                    rollout_id,
                    attempt_id,
                    group_error,
                )
                for item in group_items:
                    self._finish(item, None, rejected=True)
                continue
            for item in group_items:
                if item.done:
                    continue
                try:
                    await self._store_items(store, [item])
                except Exception as exc:
                    if not is_rejection(exc):
                        raise
                    logger.error("Store rejected span %r of rollout %s: %s", span_name(item), rollout_id, exc)
                    self._finish(item, None, rejected=True)
        del first_error
