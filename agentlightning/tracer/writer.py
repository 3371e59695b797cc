"""`SpanWriter`: moves finished spans to LightningStores in batches, off the caller's thread.

One writer serves the tracer (OpenTelemetry spans of a trace context) and the LLM proxy (one `Span` per proxied call,
with ids fixed when the call arrived). Policy (documented in docs/capture.md):
- `submit` never waits for the store. Spans go to a bounded in-memory queue; a background thread (`agl-span-writer`,
  whose store requests run on the process's I/O loop, `agentlightning.utils.io_loop`) takes up to `max_batch_size`
  spans at a time, allocates their sequence ids with one
  `get_many_span_sequence_ids` call and stores them with one `add_many_spans` call per store.
- Sequence ids come from the store, so several processes or tracers writing one rollout never collide; within one
  writer they follow the order in which spans ended. Spans that arrive with a sequence id (> 0) keep it.
- A span keeps its trace and span ids through every retry, so a retry after a write that committed but whose answer
  was lost is recognised by the store as a duplicate (counted as `duplicates`).
- Errors are handled per store and per kind (`batch.ErrorKind`):
  * outage (unreachable, timeout, 502/503/504): the store's spans wait with exponential backoff and are retried as
    long as the writer runs; other stores keep being written. Logged once per outage, and again on recovery.
  * authentication refused (401/403): logged at ERROR at once, counted in `auth_failures`, and every span for that
    store is dropped from then on (retrying cannot help; the queue must not fill up behind it).
  * server error (500, unexpected exceptions): the failed batch is split in halves and retried apart from new spans,
    so one span that breaks the server cannot hold back the others; a single span is retried at most `max_retries`
    times with backoff and then given up (`failed`).
  * rejection of the data (unknown rollout/attempt, invalid span): isolated per attempt and per span, never retried
    (`rejected`).
- When the in-memory queue is full, further spans spill to a file in `spill_dir` (in arrival order, at most
  `max_spill_bytes` on disk) and are read back when the queue drains. When the spill file is full too (or cannot be
  written), a reward span (`urgent`) waits up to `max_wait_for_room` seconds for room; other spans are dropped with an
  error log. Every such loss is counted in `stats()`.
- `flush(group)` waits until every span submitted under `group` was stored, rejected, or given up (or the timeout
  passes).

This module owns the writer thread, the lock and the outcome of every span. Its parts: `batch` (the span record,
counters, error kinds, one store request), `span_queue` (where spans wait and when a batch is due), `store_state`
(per-store waits and the error policy above), `spill` (the overflow file), `flush_groups` (flush accounting and
waiters). Every backoff comes from one `agentlightning.utils.retry.RetryPolicy`.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import threading
import time
import weakref
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Optional, Union

from agentlightning.types import Span
from agentlightning.utils.io_loop import IOLoop, io_loop
from agentlightning.utils.retry import RetryPolicy

from .batch import BatchStorer, PendingSpan, SpanConverter, SpanWriterStats, span_name
from .flush_groups import ALL, FlushGroups, Waiter
from .span_queue import SpanQueue
from .spill import SpilledSpans, SpillFile
from .store_state import Job, StoreState, StoreStates, WriteFailure, drop_for_auth, handle_failure

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from agentlightning.store.base import LightningStore

__all__ = ["SpanWriter", "SpanWriterStats"]

logger = logging.getLogger(__name__)

_LIVE_WRITERS: weakref.WeakSet[SpanWriter] = weakref.WeakSet()


class SpanWriter:
    """Batches spans to stores from a background thread; see the module docstring for the policy.

    Args:
        converter: builds a Span from an OpenTelemetry span (rollout id, attempt id, sequence id); None when only
            `Span` objects are submitted (the LLM proxy).
        max_buffered_spans: spans held in memory before spilling to disk.
        max_batch_size: spans per store call.
        flush_interval: seconds a partial batch may wait for more spans.
        retry_initial_delay: first backoff delay after a store error (doubles up to `retry_max_delay`).
        retry_max_delay: longest backoff delay.
        max_retries: tries after the first for a span the store answers with a server error before it is given up.
        spill_dir: directory of the spill file (default `AGL_SPAN_SPILL_DIR`, else the temporary directory).
        max_spill_bytes: cap on the spill file's size.
        max_wait_for_room: seconds a reward span may wait for room when memory and spill file are full.
    """

    def __init__(
        self,
        converter: Optional[SpanConverter] = None,
        *,
        max_buffered_spans: int = 10_000,
        max_batch_size: int = 512,
        flush_interval: float = 0.2,
        retry_initial_delay: float = 0.25,
        retry_max_delay: float = 10.0,
        max_retries: int = 5,
        spill_dir: Optional[str] = None,
        max_spill_bytes: int = 256 * 1024 * 1024,
        max_wait_for_room: float = 10.0,
        name: str = "agl-span-writer",
    ) -> None:
        if max_buffered_spans < 1 or max_batch_size < 1:
            raise ValueError("max_buffered_spans and max_batch_size must be at least 1")
        if flush_interval < 0 or retry_initial_delay <= 0 or retry_max_delay < retry_initial_delay:
            raise ValueError("flush_interval must be >= 0 and 0 < retry_initial_delay <= retry_max_delay")
        if max_retries < 0 or max_wait_for_room < 0:
            raise ValueError("max_retries and max_wait_for_room must not be negative")
        self._converter = converter
        self._max_batch = max_batch_size
        self._flush_interval = flush_interval
        self._backoff = RetryPolicy(
            max_retries=max_retries, initial_delay=retry_initial_delay, max_delay=retry_max_delay, jitter=0.0
        )
        self._max_wait_for_room = max_wait_for_room
        self._cond = threading.Condition()
        self._stats = SpanWriterStats()
        self._queue = SpanQueue(
            SpilledSpans(SpillFile(spill_dir, max_bytes=max_spill_bytes)),
            converter,
            self._stats,
            max_buffered=max_buffered_spans,
            max_batch=max_batch_size,
            flush_interval=flush_interval,
        )
        self._stores = StoreStates()
        self._groups = FlushGroups()
        self._flush_requests = 0
        self._closing = False
        self._storer = BatchStorer(converter, finish=self._finish)
        self._io: IOLoop = io_loop()  # started now: a first write at interpreter exit could not start its thread
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        _LIVE_WRITERS.add(self)

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
        """Queue one finished span for `store` (never waits for the store, except a reward span when memory and the
        spill file are both full).

        A `Span` keeps its own sequence id when it has one (> 0); OpenTelemetry spans get one from the store.
        `urgent` spans (rewards) wake the writer at once. `on_written` is called with the stored Span.
        """
        item = PendingSpan(id(store), rollout_id, attempt_id, group, urgent, on_written=on_written)
        if isinstance(span, Span):
            item.span = span
            item.needs_sequence = span.sequence_id <= 0
        else:
            if self._converter is None:
                raise TypeError("this SpanWriter has no converter: submit agentlightning Span objects")
            item.readable = span
        with self._cond:
            self._stats.submitted += 1
            if self._closing and not self._thread.is_alive():
                logger.error(
                    "Span writer is closed; span %r for rollout %s was not stored", span_name(item), rollout_id
                )
                self._stats.dropped += 1
                return
            state = self._stores.for_store(store)
            if state.auth_error is not None:
                state.auth_drops += 1
                self._stats.dropped += 1
                if state.auth_drops % 1000 == 0:
                    logger.error("%d spans dropped: the store refused the span writer's credentials", state.auth_drops)
                return
            state.pending += 1
            self._groups.add(group)
            if self._queue.has_room():
                self._queue.push(item)
            elif not self._spill_item(item):
                return
            if urgent:
                self._queue.urgent = True
            if urgent or self._queue.wants_writer() or self._flush_interval == 0:
                # Otherwise the writer wakes on its own (flush interval, flush request): waking it for every span
                # costs more context switches than the conversion it would overlap with the agent's I/O.
                self._cond.notify_all()

    def _spill_item(self, item: PendingSpan) -> bool:
        """Put `item` in the spill file (called with the lock held). False when it had to be dropped."""
        reason = self._queue.spill_item(item)
        if reason is None:
            return True
        if item.urgent and self._wait_for_room():
            self._queue.push(item)
            return True
        self._stats.dropped += 1
        if self._stats.dropped == 1 or self._stats.dropped % 1000 == 0:
            logger.error(
                "Span buffer is full and %s: span %r of rollout %s dropped (%d spans dropped so far)",
                reason,
                span_name(item),
                item.rollout_id,
                self._stats.dropped,
            )
        self._release(item)
        return False

    def _wait_for_room(self) -> bool:
        """Wait (lock held, at most `max_wait_for_room` s) until the memory queue has room for a reward span."""
        deadline = time.monotonic() + self._max_wait_for_room
        while self._queue.full and self._thread.is_alive():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._cond.notify_all()
            self._cond.wait(min(remaining, 0.5))
        return True

    # ---------------------------------------------------------------------------------------------- flushing
    def flush(self, group: Hashable = ALL, timeout: Optional[float] = None) -> bool:
        """Wait until the spans of `group` (all spans when omitted) are stored, rejected or given up.

        Returns False when the timeout passed first (the spans stay queued and keep being retried).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._flush_requests += 1
            self._cond.notify_all()
            try:
                while self._groups.outstanding(group):
                    if not self._thread.is_alive():
                        return False
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    self._cond.wait(remaining if remaining is not None else 1.0)
                return True
            finally:
                self._flush_requests -= 1

    async def flush_async(self, group: Hashable = ALL, timeout: Optional[float] = None) -> bool:
        """`flush` without blocking the calling event loop (the writer resolves a future when the group is done)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        waiter: Waiter = (loop, future)
        with self._cond:
            if not self._groups.outstanding(group):
                return True
            if not self._thread.is_alive():
                return False
            self._groups.wait(group, waiter)
            self._flush_requests += 1
            self._cond.notify_all()
        try:
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            return False
        finally:
            with self._cond:
                self._flush_requests -= 1
                self._groups.forget(group, waiter)

    def close(self, timeout: Optional[float] = 30.0) -> bool:
        """Flush everything (up to `timeout` seconds) and stop the background thread. Returns True if all was stored."""
        flushed = self.flush(timeout=timeout)
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(5.0)
        _LIVE_WRITERS.discard(self)
        if not flushed:
            with self._cond:
                left = self._groups.outstanding()
            logger.error("Span writer closed with %d spans not stored (store unavailable)", left)
        with self._cond:
            if not self._thread.is_alive():
                self._queue.spill.file.close()
        return flushed

    @property
    def closed(self) -> bool:
        return self._closing

    def stats(self) -> SpanWriterStats:
        """A snapshot of the counters."""
        with self._cond:
            values = {k: v for k, v in vars(self._stats).items() if k != "pending_by_group"}
            snapshot = SpanWriterStats(**values)
            snapshot.pending = self._groups.outstanding()
            snapshot.pending_by_group = self._groups.snapshot()
            snapshot.queued = self._queue.in_memory
            snapshot.spill_bytes = self._queue.spill.file.bytes
            snapshot.stores = len(self._stores)
            return snapshot

    # ---------------------------------------------------------------------------------------------- consumer
    def _run(self) -> None:
        while True:
            jobs = self._next_jobs()
            if jobs is None:
                break
            self._run_jobs(jobs)
            del jobs  # holds the stores: nothing may keep one alive while the writer waits

    def _run_jobs(self, jobs: list[Job]) -> None:
        for state, items in jobs:
            try:
                self._write(state, items)
            except Exception:  # pragma: no cover - a bug here must not kill the writer
                logger.exception("Unexpected error in the span writer; %d spans not stored", len(items))
                for item in items:
                    self._finish(item, None, dropped=True)

    def _next_jobs(self) -> Optional[list[Job]]:
        """Convert what arrived and return the next requests once some are due (None when closed and drained)."""
        while True:
            with self._cond:
                fresh = self._queue.take_incoming()
            self._convert(fresh)
            with self._cond:
                self._queue.add_ready(fresh)
                now = time.monotonic()
                jobs = self._stores.due(now, self._max_batch)
                batch = self._queue.next_batch(now, hurry=self._flush_requests > 0 or self._closing)
                if batch:
                    jobs.extend(self._stores.route(batch, now))
                    self._cond.notify_all()  # producers waiting for room
                if jobs:
                    return jobs
                if self._queue.incoming:
                    continue
                if self._closing and self._queue.drained() and not self._stores.waiting():
                    return None
                self._cond.wait(self._wait_time(now))

    def _wait_time(self, now: float) -> float:
        """How long the writer may sleep before something becomes due (lock held)."""
        wait = self._queue.wait_time(now)
        due = self._stores.next_due()
        if due is not None:
            wait = min(wait, due - now)
        return max(wait, 0.001)

    def _convert(self, items: list[PendingSpan]) -> None:
        """Turn OpenTelemetry spans into Spans (sequence ids come later, from the store)."""
        for item in items:
            if item.span is not None or item.readable is None:
                continue
            try:
                assert self._converter is not None
                item.span = self._converter(item.readable, item.rollout_id, item.attempt_id, 0)
                item.readable = None
                item.needs_sequence = True
            except Exception:
                logger.exception(
                    "Could not convert span %r of rollout %s; it is not stored", span_name(item), item.rollout_id
                )
                self._finish(item, None, dropped=True)

    # ------------------------------------------------------------------------------------------------ writing
    def _write(self, state: StoreState, items: list[PendingSpan]) -> None:
        if state.auth_error is not None:
            with self._cond:
                self._finish_locked(drop_for_auth(state, items), dropped=True)
            return

        def store_answered() -> None:
            if state.outage_since is not None:
                logger.warning(
                    "Store available again after %.1f s; buffered spans are being written",
                    time.monotonic() - state.outage_since,
                )
            state.outage_since = None
            state.failures = 0

        try:
            self._io.run(self._storer.write(state.store, items, on_answer=store_answered))
        except Exception as exc:
            self._failed(state, [item for item in items if not item.done], exc)
        with self._cond:
            self._stats.batches += 1

    def _failed(self, state: StoreState, items: list[PendingSpan], exc: BaseException) -> None:
        with self._cond:
            failure = WriteFailure(exc, time.monotonic(), self._closing, self._groups.outstanding())
            finished = handle_failure(state, items, failure, self._stats, self._backoff)
            self._finish_locked(finished.dropped, dropped=True)
            self._finish_locked(finished.failed, failed=True)

    # ----------------------------------------------------------------------------------------------- outcomes
    def _finish_locked(self, items: list[PendingSpan], **outcome: bool) -> None:
        if not items:
            return
        self._cond.release()
        try:
            for item in items:
                self._finish(item, None, **outcome)
        finally:
            self._cond.acquire()

    def _finish(
        self,
        item: PendingSpan,
        span: Optional[Span],
        *,
        duplicate: bool = False,
        rejected: bool = False,
        failed: bool = False,
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
            elif failed:
                self._stats.failed += 1
            elif dropped:
                self._stats.dropped += 1
            elif duplicate:
                self._stats.duplicates += 1
            else:
                self._stats.written += 1
            self._queue.finished()
            self._release(item)

    def _release(self, item: PendingSpan) -> None:
        """One span is done (lock held): settle its group, forget its store once nothing is pending for it."""
        self._stores.release(item.store_key)
        self._groups.settle(item.group)
        self._cond.notify_all()


def _close_all_at_exit() -> None:
    for writer in list(_LIVE_WRITERS):
        if writer._thread.is_alive():  # pyright: ignore[reportPrivateUsage]
            writer.close(timeout=5.0)


atexit.register(_close_all_at_exit)
