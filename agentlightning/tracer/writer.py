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
import json
import logging
import os
import tempfile
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Union

from agentlightning.types import Span

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from agentlightning.store.base import LightningStore

__all__ = ["SpanWriter", "SpanWriterStats"]

logger = logging.getLogger(__name__)

SpanConverter = Callable[["ReadableSpan", str, str, int], Span]
"""Turns a finished OpenTelemetry span into a stored Span (rollout id, attempt id, sequence id)."""


@dataclass
class _Item:
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


@dataclass
class SpanWriterStats:
    """Counters of a SpanWriter since it started."""

    submitted: int = 0
    written: int = 0
    duplicates: int = 0
    rejected: int = 0
    dropped: int = 0
    spilled: int = 0
    retries: int = 0
    pending: int = 0
    batches: int = 0
    outages: int = 0
    pending_by_group: dict[str, int] = field(default_factory=dict)


def _is_rejection(exc: BaseException) -> bool:
    """True when the store refused the data itself (retrying cannot help); False for outages."""
    from pydantic import ValidationError

    from agentlightning.store.errors import StoreClosedError

    if isinstance(exc, StoreClosedError):
        return False
    return isinstance(exc, (ValueError, TypeError, ValidationError))


class _SpillFile:
    """An append-only JSON-lines file of spans waiting for room in the memory queue, read back in order."""

    def __init__(self) -> None:
        self._path: Optional[str] = None
        self._writer: Any = None
        self._reader: Any = None
        self.count = 0

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record) + "\n"
        if self._path is None:
            fd, path = tempfile.mkstemp(prefix="agl-spans-", suffix=".jsonl")
            os.close(fd)
            self._path = path
            self._writer = open(path, "a", encoding="utf-8")  # noqa: SIM115
            self._reader = open(path, encoding="utf-8")  # noqa: SIM115
        self._writer.write(line)
        self._writer.flush()
        self.count += 1

    def pop(self) -> dict[str, Any]:
        line = self._reader.readline()
        self.count -= 1
        record = json.loads(line)
        if self.count == 0:
            self.close()
        return record

    def close(self) -> None:
        for handle in (self._writer, self._reader):
            if handle is not None:
                handle.close()
        if self._path is not None:
            try:
                os.unlink(self._path)
            except OSError:
                pass
        self._path = self._writer = self._reader = None
        self.count = 0


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
        self._incoming: deque[_Item] = deque()  # submitted, not converted yet (producers append)
        self._ready: deque[_Item] = deque()  # converted, waiting for a batch (writer thread only, under the lock)
        self._ready_since: Optional[float] = None
        self._spill = _SpillFile()
        self._spill_meta: deque[tuple[Hashable, Optional[Callable[[Span], None]]]] = deque()
        self._stores: dict[int, LightningStore] = {}
        self._pending: dict[Hashable, int] = {}
        self._waiters: dict[Hashable, list[tuple[asyncio.AbstractEventLoop, asyncio.Future[bool]]]] = {}
        self._urgent = False
        self._flush_requests = 0
        self._closing = False
        self._stats = SpanWriterStats()
        self._outage_since: Optional[float] = None
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
        item = _Item(store_key, rollout_id, attempt_id, group, urgent, on_written=on_written)
        if isinstance(span, Span):
            item.span = span
            item.needs_sequence = span.sequence_id <= 0
        else:
            item.readable = span
        with self._cond:
            if self._closing and not self._thread.is_alive():
                logger.error("Span writer is closed; span %r for rollout %s was not stored", _name(item), rollout_id)
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

    def _spill_item(self, item: _Item) -> bool:
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
                _name(item),
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

    def _next_batch(self) -> Optional[list[_Item]]:
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

    def _convert(self, items: list[_Item]) -> None:
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
                    "Could not convert span %r of rollout %s; it is not stored", _name(item), item.rollout_id
                )
                self._finish(item, None, dropped=True)

    def _refill_from_spill(self) -> None:
        while self._spill.count and len(self._incoming) + len(self._ready) < self._max_buffered:
            record = self._spill.pop()
            group, on_written = self._spill_meta.popleft()
            self._ready.append(
                _Item(
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

    def _write_with_retry(self, loop: asyncio.AbstractEventLoop, batch: list[_Item]) -> None:
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

    async def _write_batch(self, batch: list[_Item]) -> None:
        """Write the unfinished items of `batch`; raises on outages (the caller retries)."""
        by_store: dict[int, list[_Item]] = {}
        for item in batch:
            if not item.done:
                by_store.setdefault(item.store_key, []).append(item)
        for store_key, items in by_store.items():
            store = self._stores[store_key]
            try:
                await self._store_items(store, items)
            except Exception as exc:
                if not _is_rejection(exc):
                    raise
                await self._isolate(store, items, exc)

    async def _store_items(self, store: LightningStore, items: Sequence[_Item]) -> None:
        missing = [item for item in items if item.needs_sequence]
        if missing:
            ids = await store.get_many_span_sequence_ids([(item.rollout_id, item.attempt_id) for item in missing])
            for item, sequence_id in zip(missing, ids, strict=True):
                if item.span is None:
                    assert item.readable is not None
                    item.span = self._converter(item.readable, item.rollout_id, item.attempt_id, int(sequence_id))
                    item.readable = None
                else:
                    item.span = item.span.model_copy(update={"sequence_id": int(sequence_id)})
                item.needs_sequence = False
        spans = [item.span for item in items if item.span is not None]
        added = await store.add_many_spans(spans)
        if self._outage_since is not None:
            logger.warning(
                "Store available again after %.1f s; buffered spans are being written",
                time.monotonic() - self._outage_since,
            )
            self._outage_since = None
        added_ids = Counter((span.rollout_id, span.attempt_id, span.span_id) for span in added)
        for item in items:
            assert item.span is not None
            key = (item.span.rollout_id, item.span.attempt_id, item.span.span_id)
            duplicate = added_ids[key] <= 0
            added_ids[key] -= 1
            self._finish(item, item.span, duplicate=duplicate)

    async def _isolate(self, store: LightningStore, items: list[_Item], first_error: BaseException) -> None:
        """The store rejected a batch: retry per attempt, then per span, and reject only what fails alone."""
        groups: dict[tuple[str, str], list[_Item]] = {}
        for item in items:
            groups.setdefault((item.rollout_id, item.attempt_id), []).append(item)
        for (rollout_id, attempt_id), group_items in groups.items():
            try:
                await self._store_items(store, group_items)
                continue
            except Exception as exc:
                if not _is_rejection(exc):
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
                try:
                    await self._store_items(store, [item])
                except Exception as exc:
                    if not _is_rejection(exc):
                        raise
                    logger.error("Store rejected span %r of rollout %s: %s", _name(item), rollout_id, exc)
                    self._finish(item, None, rejected=True)
        del first_error

    def _finish(
        self,
        item: _Item,
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


def _name(item: _Item) -> str:
    if item.span is not None:
        return item.span.name
    if item.readable is not None:
        return item.readable.name
    return "?"


def _close_at_exit(ref: weakref.ReferenceType[SpanWriter]) -> None:
    writer = ref()
    if writer is not None and writer._thread.is_alive():  # pyright: ignore[reportPrivateUsage]
        writer.close(timeout=5.0)
