"""Process-local storage for `InMemoryLightningStore`: dicts and a queue under one thread lock.

Every transaction method runs without suspending, so holding a `threading.Lock` for the whole transaction makes
each store operation atomic across tasks, event loops and threads, at the cost of a few hundred nanoseconds.

A transaction is all-or-nothing: every change is recorded in an undo log, which is replayed backwards when the
transaction body raises (a failed write leaves no partial rollouts, spans, duplicate keys or byte counts behind).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Optional

from agentlightning.store.base import FINISHED_STATUSES, RUNNING_STATUSES, LightningStoreCapabilities
from agentlightning.store.core.concurrency import TransactionLock
from agentlightning.store.core.lifecycle import has_health_rules, health_deadline
from agentlightning.store.core.query import Query
from agentlightning.store.core.storage import Storage, StorageTransaction
from agentlightning.store.errors import SpansEvictedError
from agentlightning.types import Attempt, ResourcesUpdate, Rollout, Span, Worker


class SpanMemoryBudget:
    """Byte accounting of stored spans with eviction between two thresholds."""

    def __init__(self, estimator: Callable[[Span], int], eviction_bytes: int, safe_bytes: int) -> None:
        self.estimator = estimator
        self.eviction_bytes = eviction_bytes
        self.safe_bytes = safe_bytes
        self.total_bytes = 0
        self.bytes_by_rollout: dict[str, int] = {}

    def add(self, rollout_id: str, span: Span) -> None:
        size = max(int(self.estimator(span)), 0)
        self.bytes_by_rollout[rollout_id] = self.bytes_by_rollout.get(rollout_id, 0) + size
        self.total_bytes += size

    def over_budget(self) -> bool:
        return self.total_bytes > self.eviction_bytes

    def release(self, rollout_id: str) -> None:
        self.total_bytes = max(self.total_bytes - self.bytes_by_rollout.pop(rollout_id, 0), 0)


_MISSING: Any = object()

# Undo log entries: (kind, target, key, previous value)
_KEY, _MEMBER, _ATTR, _POP, _APPENDLEFT, _INDEX = range(6)


class _UndoLog:
    """Changes made by one transaction, to be reverted in reverse order if it fails."""

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: list[tuple[int, Any, Any, Any]] = []

    def key(self, mapping: dict[Any, Any], key: Any) -> None:
        """`mapping[key]` is about to be set or deleted."""
        self.entries.append((_KEY, mapping, key, mapping.get(key, _MISSING)))

    def member(self, items: set[Any], item: Any) -> None:
        """`item` is about to be added to or removed from `items`."""
        self.entries.append((_MEMBER, items, item, item in items))

    def attr(self, obj: Any, name: str) -> None:
        self.entries.append((_ATTR, obj, name, getattr(obj, name)))

    def appended(self, sequence: Any) -> None:
        """An item was appended to a list or deque."""
        self.entries.append((_POP, sequence, None, None))

    def popped_left(self, queue: deque[Any], item: Any) -> None:
        self.entries.append((_APPENDLEFT, queue, None, item))

    def index(self, items: list[Any], index: int) -> None:
        self.entries.append((_INDEX, items, index, items[index]))

    def rollback(self) -> None:
        for kind, target, key, previous in reversed(self.entries):
            if kind == _KEY:
                if previous is _MISSING:
                    target.pop(key, None)
                else:
                    target[key] = previous
            elif kind == _MEMBER:
                if previous:
                    target.add(key)
                else:
                    target.discard(key)
            elif kind == _ATTR:
                setattr(target, key, previous)
            elif kind == _POP:
                target.pop()
            elif kind == _APPENDLEFT:
                target.appendleft(previous)
            else:
                target[key] = previous
        self.entries.clear()


class InMemoryStorage(Storage):
    tracks_health_deadlines = True

    def __init__(self, budget: SpanMemoryBudget) -> None:
        self.lock = TransactionLock("memory store")
        self.budget = budget
        self.rollouts: dict[str, Rollout] = {}
        self.attempts: dict[str, list[Attempt]] = {}
        self.attempt_count = 0
        self.queue: deque[tuple[str, int]] = deque()
        self.queued: dict[str, int] = {}
        self.queue_tokens = 0
        self.spans: dict[str, list[Span]] = {}
        self.span_keys: dict[str, set[tuple[str, str]]] = {}
        self.span_count = 0
        self.span_sequence: dict[str, int] = {}
        self.evicted: set[str] = set()
        self.resources: dict[str, ResourcesUpdate] = {}
        self.latest_resources_id: Optional[str] = None
        self.workers: dict[str, Worker] = {}
        self.health_watch: set[str] = set()
        self.health_hint = math.inf
        self._tx = _MemoryTransaction(self)

    def __getstate__(self) -> dict[str, object]:
        """Pickling takes a snapshot of the data (locks are recreated in the copy)."""
        with self.lock:
            state = dict(self.__dict__)
        del state["lock"], state["_tx"]
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        vars(self).update(state)
        self.lock = TransactionLock("memory store")
        self._tx = _MemoryTransaction(self)

    @property
    def capabilities(self) -> LightningStoreCapabilities:
        return LightningStoreCapabilities(thread_safe=True, async_safe=True, zero_copy=False, otlp_traces=False)

    @asynccontextmanager
    async def transaction(self, *, write: bool = True) -> AsyncIterator[StorageTransaction]:
        with self.lock:
            undo = self._tx.undo = _UndoLog()
            try:
                yield self._tx
            except BaseException:
                undo.rollback()
                raise
            finally:
                self._tx.undo = _NO_UNDO

    def health_scan_due(self, now: float) -> bool:
        return now >= self.health_hint

    def next_health_deadline(self) -> Optional[float]:
        return self.health_hint if self.health_hint != math.inf else None

    async def statistics(self) -> dict[str, object]:
        return {
            "total_span_bytes": self.budget.total_bytes,
            "eviction_threshold_bytes": self.budget.eviction_bytes,
            "safe_threshold_bytes": self.budget.safe_bytes,
        }

    # ---------------------------------------------------------------------------------------------- health tracking
    def watch_health(self, rollout: Rollout, undo: _UndoLog) -> None:
        """Track the health deadline of a running rollout with health rules (forget it otherwise)."""
        rollout_id = rollout.rollout_id
        undo.member(self.health_watch, rollout_id)
        if rollout.status not in RUNNING_STATUSES or not has_health_rules(rollout.config):
            self.health_watch.discard(rollout_id)
            return
        self.health_watch.add(rollout_id)
        attempts = self.attempts.get(rollout_id)
        if attempts:
            deadline = health_deadline(attempts[-1], rollout.config)
        else:
            deadline = rollout.start_time + min(
                value
                for value in (rollout.config.timeout_seconds, rollout.config.unresponsive_seconds)
                if value is not None
            )
        if deadline is not None and deadline < self.health_hint:
            undo.attr(self, "health_hint")
            self.health_hint = deadline

    def evict_if_needed(self, undo: _UndoLog) -> None:
        budget = self.budget
        if not budget.over_budget():
            return

        def age(rollout_id: str) -> tuple[bool, float, str]:
            rollout = self.rollouts.get(rollout_id)
            if rollout is None:
                spans = self.spans[rollout_id]
                return (False, spans[0].start_time or 0.0, rollout_id)
            # Finished rollouts go first; within each group the oldest goes first.
            return (rollout.status not in FINISHED_STATUSES, rollout.start_time, rollout_id)

        for rollout_id in sorted((rid for rid, spans in self.spans.items() if spans), key=age):
            if budget.total_bytes <= budget.safe_bytes:
                break
            undo.key(self.spans, rollout_id)
            undo.key(self.span_keys, rollout_id)
            undo.attr(self, "span_count")
            undo.attr(budget, "total_bytes")
            undo.key(budget.bytes_by_rollout, rollout_id)
            undo.member(self.evicted, rollout_id)
            removed = self.spans.pop(rollout_id)
            self.span_keys.pop(rollout_id, None)
            self.span_count -= len(removed)
            budget.release(rollout_id)
            self.evicted.add(rollout_id)


class _DiscardedLog(_UndoLog):
    """Stands in outside transactions: records nothing."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__()
        self.entries = _NoEntries()


class _NoEntries(list[tuple[int, Any, Any, Any]]):
    def append(self, item: tuple[int, Any, Any, Any], /) -> None:
        return None


_NO_UNDO: _UndoLog = _DiscardedLog()


class _MemoryTransaction(StorageTransaction):
    def __init__(self, storage: InMemoryStorage) -> None:
        self.s = storage
        self.undo = _NO_UNDO

    # --------------------------------------------------------------------------------------------- rollouts + queue
    async def insert_rollouts(self, rollouts: Sequence[Rollout], *, enqueue: bool) -> None:
        s, undo = self.s, self.undo
        for rollout in rollouts:
            undo.key(s.rollouts, rollout.rollout_id)
            s.rollouts[rollout.rollout_id] = rollout
            s.watch_health(rollout, undo)
        if enqueue:
            await self.enqueue([rollout.rollout_id for rollout in rollouts])

    async def get_rollouts(self, rollout_ids: Sequence[str]) -> dict[str, Rollout]:
        rollouts = self.s.rollouts
        return {rollout_id: rollouts[rollout_id] for rollout_id in rollout_ids if rollout_id in rollouts}

    async def update_rollouts(self, rollouts: Sequence[Rollout]) -> None:
        s, undo = self.s, self.undo
        for rollout in rollouts:
            undo.key(s.rollouts, rollout.rollout_id)
            s.rollouts[rollout.rollout_id] = rollout
            s.watch_health(rollout, undo)

    async def query_rollouts(self, query: Query) -> tuple[list[Rollout], int]:
        return query.apply(self.s.rollouts.values())

    async def enqueue(self, rollout_ids: Sequence[str]) -> None:
        s, undo = self.s, self.undo
        for rollout_id in rollout_ids:
            if rollout_id in s.queued:
                continue
            undo.attr(s, "queue_tokens")
            undo.key(s.queued, rollout_id)
            undo.appended(s.queue)
            s.queue_tokens += 1
            s.queued[rollout_id] = s.queue_tokens
            s.queue.append((rollout_id, s.queue_tokens))

    async def remove_from_queue(self, rollout_ids: Sequence[str]) -> None:
        queued, undo = self.s.queued, self.undo
        for rollout_id in rollout_ids:
            if rollout_id in queued:
                undo.key(queued, rollout_id)
            queued.pop(rollout_id, None)  # the deque entry becomes stale and is skipped when popped

    async def claim_queued(self, limit: int) -> list[Rollout]:
        s, undo = self.s, self.undo
        claimed: list[Rollout] = []
        while s.queue and len(claimed) < limit:
            item = s.queue.popleft()
            undo.popped_left(s.queue, item)
            rollout_id, token = item
            if s.queued.get(rollout_id) != token:
                continue
            undo.key(s.queued, rollout_id)
            del s.queued[rollout_id]
            rollout = s.rollouts.get(rollout_id)
            if rollout is not None and rollout.status in ("queuing", "requeuing"):
                claimed.append(rollout)
        return claimed

    # ----------------------------------------------------------------------------------------------------- attempts
    async def insert_attempts(self, attempts: Sequence[Attempt]) -> None:
        s, undo = self.s, self.undo
        for attempt in attempts:
            stored = s.attempts.get(attempt.rollout_id)
            if stored is None:
                undo.key(s.attempts, attempt.rollout_id)
                stored = s.attempts[attempt.rollout_id] = []
            undo.appended(stored)
            stored.append(attempt)
            undo.attr(s, "attempt_count")
            s.attempt_count += 1
            rollout = s.rollouts.get(attempt.rollout_id)
            if rollout is not None:
                s.watch_health(rollout, undo)

    async def update_attempts(self, attempts: Sequence[Attempt]) -> None:
        s, undo = self.s, self.undo
        for attempt in attempts:
            stored = s.attempts.get(attempt.rollout_id, [])
            for index in range(len(stored) - 1, -1, -1):
                if stored[index].attempt_id == attempt.attempt_id:
                    undo.index(stored, index)
                    stored[index] = attempt
                    break
            rollout = s.rollouts.get(attempt.rollout_id)
            if rollout is not None and attempt.rollout_id in s.health_watch:
                s.watch_health(rollout, undo)

    async def get_attempts(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Attempt]:
        found: dict[tuple[str, str], Attempt] = {}
        attempts = self.s.attempts
        for rollout_id, attempt_id in keys:
            for attempt in reversed(attempts.get(rollout_id, ())):
                if attempt.attempt_id == attempt_id:
                    found[(rollout_id, attempt_id)] = attempt
                    break
        return found

    async def get_latest_attempts(self, rollout_ids: Sequence[str]) -> dict[str, Attempt]:
        attempts = self.s.attempts
        return {rollout_id: attempts[rollout_id][-1] for rollout_id in rollout_ids if attempts.get(rollout_id)}

    async def query_attempts(self, rollout_id: str, query: Query) -> tuple[list[Attempt], int]:
        return query.apply(self.s.attempts.get(rollout_id, ()))

    # -------------------------------------------------------------------------------------------------------- spans
    async def insert_spans(self, spans: Sequence[Span]) -> list[Span]:
        s, undo = self.s, self.undo
        budget = s.budget
        inserted: list[Span] = []
        for span in spans:
            rollout_id = span.rollout_id
            if rollout_id in s.evicted:
                # The rollout's trace is gone: the span is not stored (nor its key remembered, which would grow
                # without bound for a rollout that keeps running); it still counts as a heartbeat.
                inserted.append(span)
                continue
            keys = s.span_keys.get(rollout_id)
            if keys is None:
                undo.key(s.span_keys, rollout_id)
                keys = s.span_keys[rollout_id] = set()
            key = (span.attempt_id, span.span_id)
            if key in keys:
                continue
            undo.member(keys, key)
            keys.add(key)
            inserted.append(span)
            stored = s.spans.get(rollout_id)
            if stored is None:
                undo.key(s.spans, rollout_id)
                stored = s.spans[rollout_id] = []
            undo.appended(stored)
            stored.append(span)
            undo.attr(s, "span_count")
            s.span_count += 1
            undo.attr(budget, "total_bytes")
            undo.key(budget.bytes_by_rollout, rollout_id)
            budget.add(rollout_id, span)
        s.evict_if_needed(undo)
        return inserted

    async def query_spans(self, rollout_id: str, attempt_id: Optional[str], query: Query) -> tuple[list[Span], int]:
        s = self.s
        if rollout_id in s.evicted:
            raise SpansEvictedError(rollout_id)
        spans = s.spans.get(rollout_id, ())
        if attempt_id is not None:
            spans = [span for span in spans if span.attempt_id == attempt_id]
        if query.sort_by is None:
            query = Query(query.conditions, query.logic, "sequence_id", "asc", query.limit, query.offset)
        return query.apply(spans)

    async def next_span_sequence_ids(self, rollout_ids: Sequence[str]) -> list[int]:
        counters, undo = self.s.span_sequence, self.undo
        allocated: list[int] = []
        for rollout_id in rollout_ids:
            undo.key(counters, rollout_id)
            value = counters.get(rollout_id, 0) + 1
            counters[rollout_id] = value
            allocated.append(value)
        return allocated

    async def raise_span_sequence_floor(self, floors: Mapping[str, int]) -> None:
        counters, undo = self.s.span_sequence, self.undo
        for rollout_id, floor in floors.items():
            if floor > counters.get(rollout_id, 0):
                undo.key(counters, rollout_id)
                counters[rollout_id] = floor

    # ---------------------------------------------------------------------------------------------------- resources
    async def get_resources(self, resources_id: str) -> Optional[ResourcesUpdate]:
        return self.s.resources.get(resources_id)

    async def get_latest_resources(self) -> Optional[ResourcesUpdate]:
        s = self.s
        return s.resources.get(s.latest_resources_id) if s.latest_resources_id is not None else None

    async def put_resources(self, update: ResourcesUpdate) -> None:
        s, undo = self.s, self.undo
        undo.key(s.resources, update.resources_id)
        undo.attr(s, "latest_resources_id")
        s.resources[update.resources_id] = update
        s.latest_resources_id = update.resources_id

    async def query_resources(self, query: Query) -> tuple[list[ResourcesUpdate], int]:
        return query.apply(self.s.resources.values())

    # ------------------------------------------------------------------------------------------------------ workers
    async def get_workers(self, worker_ids: Sequence[str]) -> dict[str, Worker]:
        workers = self.s.workers
        return {worker_id: workers[worker_id] for worker_id in worker_ids if worker_id in workers}

    async def put_workers(self, workers: Sequence[Worker]) -> None:
        for worker in workers:
            self.undo.key(self.s.workers, worker.worker_id)
            self.s.workers[worker.worker_id] = worker

    async def query_workers(self, query: Query) -> tuple[list[Worker], int]:
        return query.apply(self.s.workers.values())

    # ------------------------------------------------------------------------------------------------------- health
    async def health_candidates(self, now: float) -> list[tuple[Rollout, Attempt]]:
        s, undo = self.s, self.undo
        candidates: list[tuple[Rollout, Attempt]] = []
        hint = math.inf
        for rollout_id in list(s.health_watch):
            rollout = s.rollouts.get(rollout_id)
            attempts = s.attempts.get(rollout_id)
            if rollout is None or rollout.status not in RUNNING_STATUSES or not attempts:
                undo.member(s.health_watch, rollout_id)
                s.health_watch.discard(rollout_id)
                continue
            deadline = health_deadline(attempts[-1], rollout.config)
            if deadline is None:
                undo.member(s.health_watch, rollout_id)
                s.health_watch.discard(rollout_id)
                continue
            hint = min(hint, deadline)
            if deadline <= now:
                candidates.append((rollout, attempts[-1]))
        undo.attr(s, "health_hint")
        s.health_hint = hint
        return candidates

    async def count_entities(self) -> dict[str, int]:
        s = self.s
        return {
            "rollouts": len(s.rollouts),
            "attempts": s.attempt_count,
            "spans": s.span_count,
            "resources": len(s.resources),
            "workers": len(s.workers),
        }
