"""`SpanWriter`: moves finished spans to LightningStores in batches, off the agent's thread.

Policy (documented in docs/capture.md):
- `submit` never waits for the store. Spans go to a bounded in-memory queue; a background thread (`agl-span-writer`,
  with its own event loop) takes up to `max_batch_size` spans at a time, allocates their sequence ids with one
  `get_many_span_sequence_ids` call and stores them with one `add_many_spans` call per store.
- Sequence ids come from the store, so several processes or tracers writing one rollout never collide; within one
  writer they follow the order in which spans ended.
- Store outages (any error other than a rejection of the data) are retried with exponential backoff. The batch
  keeps its sequence ids, so a retry after a partially applied write cannot duplicate spans (the store skips span
  ids it already has). Errors are logged once per outage, with the number of spans waiting, and again on recovery.
- When the in-memory queue is full, further spans spill to a file on disk (in arrival order) and are read back
  when the queue drains: nothing is dropped and the agent is never blocked. Only if the spill file cannot be
  written does the writer fall back to backpressure for reward spans (they wait for room) and drop other spans
  with an error log (counted in `stats()`).
- Data the store rejects for good (unknown rollout/attempt, invalid span) is isolated per attempt and per span, so
  one bad span cannot block the others; rejected spans are logged with the reason and counted as `rejected`.
- `flush(group)` waits until every span submitted under `group` was stored or rejected (or the timeout passes).
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Optional, Union

from agentlightning.types import Span

from .batch import BatchStorer, PendingSpan, SpanConverter, SpanWriterStats, SpillFile, span_name

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from agentlightning.store.base import LightningStore

__all__ = ["SpanWriter", "SpanWriterStats"]

logger = logging.getLogger(__name__)


class SpanWriter:
    """Batches spans to stores from a background thread; see the module docstring for the policy.

    Args:
        converter: builds a Span from an OpenTelemetry span (rollout id, attempt id, sequence id).
        max_buffered_spans: spans held in memory before spilling to disk.
        max_batch_size: spans per store call.
        flush_interval: seconds a partial batch may wait for more spans.
        retry_initial_delay: first backoff delay after a store error (doubles up to `retry_max_delay`).
        retry_max_delay: longest backoff delay.
    """

    def __init__(
        self,
        converter: SpanConverter,
        *,
        max_buffered_spans: int = 10_000,
        max_batch_size: int = 512,
        flush_interval: float = 0.2,
        retry_initial_delay: float = 0.25,
        retry_max_delay: float = 10.0,
        name: str = "agl-span-writer",
    ) -> None:
        if max_buffered_spans < 1 or max_batch_size < 1:
            raise ValueError("max_buffered_spans and max_batch_size must be at least 1")
        if flush_interval < 0 or retry_initial_delay <= 0 or retry_max_delay < retry_initial_delay:
            raise ValueError("flush_interval must be >= 0 and 0 < retry_initial_delay <= retry_max_delay")
        self._converter = converter
        self._max_buffered = max_buffered_spans
        self._max_batch = max_batch_size
        self._flush_interval = flush_interval
        self._retry_initial = retry_initial_delay
        self._retry_max = retry_max_delay
        self._cond = threading.Condition()
        self._incoming: deque[PendingSpan] = deque()  # submitted, not converted yet (producers append)
        self._ready: deque[PendingSpan] = deque()  # converted, waiting for a batch (writer thread only, under the lock)
        self._ready_since: Optional[float] = None
        self._spill = SpillFile()
        self._spill_meta: deque[tuple[Hashable, Optional[Callable[[Span], None]]]] = deque()
        self._stores: dict[int, LightningStore] = {}
        self._pending: dict[Hashable, int] = {}
        self._waiters: dict[Hashable, list[tuple[asyncio.AbstractEventLoop, asyncio.Future[bool]]]] = {}
        self._urgent = False
        self._flush_requests = 0
        self._closing = False
        self._stats = SpanWriterStats()
        self._outage_since: Optional[float] = None
        self._storer = BatchStorer(converter, finish=self._finish, on_success=self._recovered)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        atexit.register(_close_at_exit, weakref.ref(self))

    # --------------------------------------------------------------------------------------------- producers
    def submit(
        self,
        store: LightningStore,
        rollout_id: str,
        attempt_id: str,
        span: Union[ReadableSpan, Span],
        *,
        group: Hashable = None,
        urgent: bool = False,
        on_written: Optional[Callable[[Span], None]] = None,
    ) -> None:
        """Queue one finished span for `store` (never waits for the store).

        A `Span` keeps its own sequence id when it has one (> 0); OpenTelemetry spans get one from the store.
        `urgent` spans (rewards) wake the writer at once. `on_written` is called with the stored Span.
        """
        store_key = id(store)
        item = PendingSpan(store_key, rollout_id, attempt_id, group, urgent, on_written=on_written)
        if isinstance(span, Span):
            item.span = span
            item.needs_sequence = span.sequence_id <= 0
        else:
            item.readable = span
        with self._cond:
            if self._closing and not self._thread.is_alive():
                logger.error(
                    "Span writer is closed; span %r for rollout %s was not stored", span_name(item), rollout_id
                )
                self._stats.dropped += 1
                return
            self._stores[store_key] = store
            self._pending[group] = self._pending.get(group, 0) + 1
            self._stats.submitted += 1
            if len(self._incoming) + len(self._ready) < self._max_buffered and self._spill.count == 0:
                self._incoming.append(item)
            elif not self._spill_item(item):
                return
            if urgent:
                self._urgent = True
            if urgent or len(self._incoming) >= self._max_batch or self._flush_interval == 0:
                # Otherwise the writer wakes on its own (flush interval, flush request): waking it for every span
                # costs more context switches than the conversion it would overlap with the agent's I/O.
                self._cond.notify_all()

    def _spill_item(self, item: PendingSpan) -> bool:
        """Put `item` in the spill file (called with the lock held). False when it had to be dropped."""
        try:
            span = item.span
            if span is None:
                assert item.readable is not None
                span = self._converter(item.readable, item.rollout_id, item.attempt_id, 0)
            self._spill.append(
                {
                    "store_key": item.store_key,
                    "rollout_id": item.rollout_id,
                    "attempt_id": item.attempt_id,
                    "urgent": item.urgent,
                    "needs_sequence": item.needs_sequence,
                    "span": span.model_dump(mode="json"),
                }
            )
            self._spill_meta.append((item.group, item.on_written))
            self._stats.spilled += 1
            if self._stats.spilled == 1 or self._stats.spilled % 1000 == 0:
                logger.warning(
                    "Span buffer is full (%d spans in memory); %d spans spilled to disk so far",
                    self._max_buffered,
                    self._stats.spilled,
                )
            return True
        except Exception as exc:  # disk full, unserialisable attribute, ...
            if item.urgent:
                logger.error("Could not spill a reward span to disk (%s); waiting for room in the buffer", exc)
                while len(self._incoming) + len(self._ready) >= self._max_buffered and self._thread.is_alive():
                    self._cond.notify_all()
                    self._cond.wait(0.5)
                self._incoming.append(item)
                return True
            logger.error(
                "Span buffer is full and spilling failed (%s): span %r of rollout %s dropped",
                exc,
                span_name(item),
                item.rollout_id,
            )
            self._stats.dropped += 1
            self._settle(item.group)
            return False

    # ---------------------------------------------------------------------------------------------- flushing
    def flush(self, group: Hashable = ..., timeout: Optional[float] = None) -> bool:
        """Wait until the spans of `group` (all spans when omitted) are stored or rejected.

        Returns False when the timeout passed first (the spans stay queued and keep being retried).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._flush_requests += 1
            self._cond.notify_all()
            try:
                while self._outstanding(group):
                    if not self._thread.is_alive():
                        return False
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    self._cond.wait(remaining if remaining is not None else 1.0)
                return True
            finally:
                self._flush_requests -= 1

    async def flush_async(self, group: Hashable = ..., timeout: Optional[float] = None) -> bool:
        """`flush` without blocking the calling event loop (the writer resolves a future when the group is done)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        waiter = (loop, future)
        with self._cond:
            if not self._outstanding(group):
                return True
            if not self._thread.is_alive():
                return False
            self._waiters.setdefault(group, []).append(waiter)
            self._flush_requests += 1
            self._cond.notify_all()
        try:
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            return False
        finally:
            with self._cond:
                self._flush_requests -= 1
                waiters = self._waiters.get(group)
                if waiters is not None and waiter in waiters:
                    waiters.remove(waiter)
                    if not waiters:
                        del self._waiters[group]

    def _outstanding(self, group: Hashable) -> int:
        if group is ...:
            return sum(self._pending.values())
        return self._pending.get(group, 0)

    def close(self, timeout: Optional[float] = 30.0) -> bool:
        """Flush everything (up to `timeout` seconds) and stop the background thread. Returns True if all was stored."""
        flushed = self.flush(timeout=timeout)
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(5.0)
        if not flushed:
            with self._cond:
                left = sum(self._pending.values())
            logger.error("Span writer closed with %d spans not stored (store unavailable)", left)
        return flushed

    def stats(self) -> SpanWriterStats:
        """A snapshot of the counters."""
        with self._cond:
            snapshot = SpanWriterStats(**{k: v for k, v in vars(self._stats).items() if k != "pending_by_group"})
            snapshot.pending = sum(self._pending.values())
            snapshot.pending_by_group = {repr(key): value for key, value in self._pending.items() if value}
            return snapshot

    # ---------------------------------------------------------------------------------------------- consumer
    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        try:
            while True:
                batch = self._next_batch()
                if batch is None:
                    break
                try:
                    self._write_with_retry(loop, batch)
                except Exception:  # pragma: no cover - a bug here must not kill the writer
                    logger.exception("Unexpected error in the span writer; %d spans not stored", len(batch))
                    for item in batch:
                        self._finish(item, None, dropped=True)
        finally:
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

    def _next_batch(self) -> Optional[list[PendingSpan]]:
        """Convert what arrived and return the next batch once one is due (None when closed and drained)."""
        while True:
            with self._cond:
                fresh = list(self._incoming)
                self._incoming.clear()
                if not fresh and not self._ready and not self._spill.count:
                    if self._closing:
                        return None
                    self._cond.wait(self._flush_interval if self._flush_interval > 0 else 1.0)
                    continue
            self._convert(fresh)
            with self._cond:
                self._ready.extend(item for item in fresh if not item.done)
                self._refill_from_spill()
                if not self._ready:
                    continue
                now = time.monotonic()
                if self._ready_since is None:
                    self._ready_since = now
                due = (
                    len(self._ready) >= self._max_batch
                    or self._urgent
                    or self._flush_requests > 0
                    or self._closing
                    or now - self._ready_since >= self._flush_interval
                )
                if not due:
                    if not self._incoming:
                        self._cond.wait(self._flush_interval - (now - self._ready_since))
                    continue
                batch = [self._ready.popleft() for _ in range(min(self._max_batch, len(self._ready)))]
                self._ready_since = now if self._ready else None
                if not self._ready and not self._incoming:
                    self._urgent = False
                self._cond.notify_all()  # producers waiting for room
                return batch

    def _convert(self, items: list[PendingSpan]) -> None:
        """Turn OpenTelemetry spans into Spans (sequence ids come later, from the store)."""
        for item in items:
            if item.span is not None or item.readable is None:
                continue
            try:
                item.span = self._converter(item.readable, item.rollout_id, item.attempt_id, 0)
                item.readable = None
                item.needs_sequence = True
            except Exception:
                logger.exception(
                    "Could not convert span %r of rollout %s; it is not stored", span_name(item), item.rollout_id
                )
                self._finish(item, None, dropped=True)

    def _refill_from_spill(self) -> None:
        while self._spill.count and len(self._incoming) + len(self._ready) < self._max_buffered:
            record = self._spill.pop()
            group, on_written = self._spill_meta.popleft()
            self._ready.append(
                PendingSpan(
                    store_key=record["store_key"],
                    rollout_id=record["rollout_id"],
                    attempt_id=record["attempt_id"],
                    group=group,
                    urgent=record["urgent"],
                    span=Span.model_validate(record["span"]),
                    needs_sequence=record["needs_sequence"],
                    on_written=on_written,
                )
            )

    def _write_with_retry(self, loop: asyncio.AbstractEventLoop, batch: list[PendingSpan]) -> None:
        delay = self._retry_initial
        failures = 0
        while True:
            try:
                loop.run_until_complete(self._write_batch(batch))
                break
            except Exception as exc:
                failures += 1
                with self._cond:
                    self._stats.retries += 1
                    waiting = sum(self._pending.values())
                    closing = self._closing
                if self._outage_since is None:
                    self._outage_since = time.monotonic()
                    with self._cond:
                        self._stats.outages += 1
                    logger.error(
                        "Store unavailable while writing %d spans (%s: %s); %d spans buffered, retrying with "
                        "backoff. The agent keeps running.",
                        len(batch),
                        type(exc).__name__,
                        exc,
                        waiting,
                    )
                elif failures % 10 == 0:
                    logger.error(
                        "Store still unavailable after %d attempts (%s); %d spans buffered", failures, exc, waiting
                    )
                if closing and failures >= 3:
                    logger.error("Giving up on %d spans at shutdown: the store is unavailable (%s)", len(batch), exc)
                    for item in batch:
                        self._finish(item, None, dropped=True)
                    break
                with self._cond:
                    self._cond.wait(delay)
                delay = min(delay * 2, self._retry_max)
        if self._outage_since is not None and failures and batch:
            logger.warning(
                "Store available again after %.1f s; buffered spans are being written",
                time.monotonic() - self._outage_since,
            )
            self._outage_since = None
        with self._cond:
            self._stats.batches += 1

    async def _write_batch(self, batch: list[PendingSpan]) -> None:
        """Write the unfinished items of `batch`; raises on outages (the caller retries)."""
        await self._storer.write(batch, self._stores)

    def _recovered(self) -> None:
        if self._outage_since is not None:
            logger.warning(
                "Store available again after %.1f s; buffered spans are being written",
                time.monotonic() - self._outage_since,
            )
            self._outage_since = None

    def _finish(
        self,
        item: PendingSpan,
        span: Optional[Span],
        *,
        duplicate: bool = False,
        rejected: bool = False,
        dropped: bool = False,
    ) -> None:
        if item.done:
            return
        item.done = True
        if span is not None and item.on_written is not None:
            try:
                item.on_written(span)
            except Exception:  # pragma: no cover - callbacks are internal
                logger.exception("on_written callback failed")
        with self._cond:
            if rejected:
                self._stats.rejected += 1
            elif dropped:
                self._stats.dropped += 1
            elif duplicate:
                self._stats.duplicates += 1
            else:
                self._stats.written += 1
            self._settle(item.group)

    def _settle(self, group: Hashable) -> None:
        """One span of `group` is done (called with the lock held); wakes whoever waits for the group or for all."""
        left = self._pending.get(group, 0) - 1
        if left <= 0:
            self._pending.pop(group, None)
            self._resolve(group)
            if not self._pending:
                self._resolve(...)
        else:
            self._pending[group] = left
        self._cond.notify_all()

    def _resolve(self, group: Hashable) -> None:
        for loop, future in self._waiters.pop(group, []):
            try:
                loop.call_soon_threadsafe(_set_done, future)
            except RuntimeError:  # the waiting loop was closed meanwhile
                pass


def _set_done(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(True)


def _close_at_exit(ref: weakref.ReferenceType[SpanWriter]) -> None:
    writer = ref()
    if writer is not None and writer._thread.is_alive():  # pyright: ignore[reportPrivateUsage]
        writer.close(timeout=5.0)
