"""The storage interface behind `CoreLightningStore`, and the change set an operation writes through it.

A backend provides a `Storage` whose transactions expose a small set of data operations. The contract's rules
(state machine, retries, health checks, validation) live in `CoreLightningStore` and `lifecycle`; a backend only
decides how these operations are stored, indexed and made atomic. Everything done through one transaction object
must commit atomically or not at all.

Objects returned by a transaction may be the backend's own; the core copies them before handing them to callers and
writes every change back through an `update_*` call. `Changes` collects the writes of one store operation and
flushes them through a storage transaction.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Optional

from agentlightning.store.base import LightningStoreCapabilities
from agentlightning.store.core.lifecycle import (
    derive_rollout_status,
    release_worker,
    set_attempt_status,
    set_rollout_status,
    sync_worker_with_attempt,
)
from agentlightning.store.core.query import Query
from agentlightning.store.core.records import owned_copy
from agentlightning.types import Attempt, ResourcesUpdate, Rollout, RolloutStatus, Span, Worker


class StorageTransaction(ABC):
    """Data operations inside one atomic unit of work."""

    # --------------------------------------------------------------------------------------------- rollouts + queue
    @abstractmethod
    async def insert_rollouts(self, rollouts: Sequence[Rollout], *, enqueue: bool) -> None:
        """Insert new rollouts (ids are fresh); when `enqueue`, append them to the queue tail in order."""

    @abstractmethod
    async def get_rollouts(self, rollout_ids: Sequence[str]) -> dict[str, Rollout]:
        """The known rollouts among `rollout_ids`."""

    @abstractmethod
    async def update_rollouts(self, rollouts: Sequence[Rollout]) -> None:
        """Write back modified rollouts (matched by id)."""

    @abstractmethod
    async def query_rollouts(self, query: Query) -> tuple[list[Rollout], int]:
        """Rollouts matching `query` (creation order unless sorted) and the total number of matches."""

    @abstractmethod
    async def enqueue(self, rollout_ids: Sequence[str]) -> None:
        """Append rollouts to the queue tail; ids already in the queue keep their place."""

    @abstractmethod
    async def remove_from_queue(self, rollout_ids: Sequence[str]) -> None:
        """Take rollouts out of the queue (ids not in it are ignored)."""

    @abstractmethod
    async def claim_queued(self, limit: int) -> list[Rollout]:
        """Pop up to `limit` rollouts from the queue head whose status is queuing or requeuing.

        Entries whose rollout is no longer queuing-like are dropped on the way. Concurrent claims (from any thread
        or process sharing the storage) must never return the same rollout twice.
        """

    # ----------------------------------------------------------------------------------------------------- attempts
    @abstractmethod
    async def insert_attempts(self, attempts: Sequence[Attempt]) -> None: ...

    @abstractmethod
    async def update_attempts(self, attempts: Sequence[Attempt]) -> None: ...

    @abstractmethod
    async def get_attempts(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Attempt]:
        """The known attempts among the (rollout_id, attempt_id) pairs."""

    @abstractmethod
    async def get_latest_attempts(self, rollout_ids: Sequence[str]) -> dict[str, Attempt]:
        """The attempt with the highest sequence id of each rollout that has one."""

    async def prefetch_rollouts_and_latest(self, rollout_ids: Sequence[str]) -> None:  # noqa: B027 - optional hook
        """A hint: `get_rollouts_and_latest` will be asked for these rollouts; a database sends the read with its next
        round trip instead of one of its own."""

    async def get_rollouts_and_latest(
        self, rollout_ids: Sequence[str]
    ) -> tuple[dict[str, Rollout], dict[str, Attempt]]:
        """`get_rollouts` and `get_latest_attempts` of the known ones (a database answers both in one read)."""
        rollouts = await self.get_rollouts(rollout_ids)
        latest = await self.get_latest_attempts(list(rollouts)) if rollouts else {}
        return rollouts, latest

    @abstractmethod
    async def query_attempts(self, rollout_id: str, query: Query) -> tuple[list[Attempt], int]:
        """Attempts of one rollout (ascending sequence id unless sorted) and the total number of matches."""

    # -------------------------------------------------------------------------------------------------------- spans
    @abstractmethod
    async def insert_spans(self, spans: Sequence[Span]) -> list[Span]:
        """Insert spans whose rollout and attempt exist; skip those whose (rollout, attempt, span id) is already
        stored or repeated earlier in the batch. Returns the inserted ones, in order."""

    @abstractmethod
    async def query_spans(self, rollout_id: str, attempt_id: Optional[str], query: Query) -> tuple[list[Span], int]:
        """Spans of a rollout (and attempt), ascending sequence id unless sorted. Raises SpansEvictedError when
        the rollout's spans were removed."""

    @abstractmethod
    async def next_span_sequence_ids(self, rollout_ids: Sequence[str]) -> list[int]:
        """Allocate one number per entry from each rollout's counter (repeated ids get consecutive numbers)."""

    @abstractmethod
    async def raise_span_sequence_floor(self, floors: Mapping[str, int]) -> None:
        """Make sure each rollout's next allocated number is greater than the given one."""

    # ---------------------------------------------------------------------------------------------------- resources
    @abstractmethod
    async def get_resources(self, resources_id: str) -> Optional[ResourcesUpdate]: ...

    @abstractmethod
    async def get_latest_resources(self) -> Optional[ResourcesUpdate]:
        """The snapshot most recently added or updated."""

    async def get_latest_resources_id(self) -> Optional[str]:
        """The id of `get_latest_resources()` (a database reads only the id)."""
        latest = await self.get_latest_resources()
        return latest.resources_id if latest is not None else None

    async def queue_span_insert(self, spans: Sequence[Span], floors: Mapping[str, int]) -> None:  # noqa: B027
        """A hint: `raise_span_sequence_floor(floors)` and `insert_spans(spans)` follow; a database sends both with
        its next round trip. Only once the spans' rollouts are locked (after `prefetch_rollouts_and_latest`)."""

    async def prefetch_workers_of(  # noqa: B027 - optional hook
        self, rollout_ids: Sequence[str], worker_ids: Sequence[str]
    ) -> None:
        """A hint: the workers of these rollouts' attempts and these workers will be updated, and the transaction
        locks no further rollouts; a database locks and reads them with its next round trip."""

    async def prefetch_latest_resources_id(self) -> None:  # noqa: B027 - optional hook
        """A hint: `get_latest_resources_id` will be asked; a database sends the read with its next round trip."""

    @abstractmethod
    async def put_resources(self, update: ResourcesUpdate) -> None:
        """Insert or replace a snapshot and make it the latest."""

    @abstractmethod
    async def query_resources(self, query: Query) -> tuple[list[ResourcesUpdate], int]: ...

    # ------------------------------------------------------------------------------------------------------ workers
    @abstractmethod
    async def get_workers(self, worker_ids: Sequence[str]) -> dict[str, Worker]: ...

    @abstractmethod
    async def put_workers(self, workers: Sequence[Worker]) -> None:
        """Insert or replace workers."""

    @abstractmethod
    async def query_workers(self, query: Query) -> tuple[list[Worker], int]: ...

    # ------------------------------------------------------------------------------------------------------- health
    @abstractmethod
    async def health_candidates(self, now: float) -> list[tuple[Rollout, Attempt]]:
        """Running-like rollouts with health rules (timeout or unresponsive seconds) whose latest attempt may have
        broken them by `now`, each with that attempt. Returning more than needed is allowed."""

    @abstractmethod
    async def count_entities(self) -> dict[str, int]:
        """Totals for statistics: keys rollouts, attempts, spans, resources, workers."""


class Storage(ABC):
    """Persistence and atomicity for a CoreLightningStore."""

    #: Other processes may change the data (waiters then poll every `poll_interval` seconds, unless the storage
    #: announces their changes: see `announces_changes`).
    shared_across_processes: bool = False
    poll_interval: float = 0.5
    #: `next_health_deadline()` is exact; otherwise waiters rescan every `poll_interval` seconds.
    tracks_health_deadlines: bool = False
    #: A transaction costs much more than the work of one span or claim (a database): concurrent span ingests,
    #: enqueues and dequeues then share transactions (see `core/grouping.py`).
    groups_concurrent_writes: bool = False

    @property
    def announces_changes(self) -> bool:
        """True while rollouts finished and health deadlines set by other processes are reported to the callbacks
        given to `subscribe` (waiters then sleep until told instead of polling)."""
        return False

    def subscribe(  # noqa: B027 - optional hook
        self,
        on_finished: Callable[[Optional[list[str]]], None],
        on_wake: Callable[[bool], None],
    ) -> None:
        """Report changes made by other processes: `on_finished(ids)` for rollouts that finished (None: unknown
        which), `on_wake(reread)` when waiters should re-plan their sleep (and, with `reread`, re-read everything
        because changes may have gone unannounced). Storages that are not shared ignore this."""

    @property
    @abstractmethod
    def capabilities(self) -> LightningStoreCapabilities: ...

    @abstractmethod
    def transaction(self, *, write: bool = True) -> AbstractAsyncContextManager[StorageTransaction]:
        """An atomic unit of work. Read-only work passes `write=False`."""

    def health_scan_due(self, now: float) -> bool:
        """False when no attempt can have broken a health rule by `now` (lets the core skip the scan)."""
        return True

    def next_health_deadline(self) -> Optional[float]:
        """The earliest time a health rule may fire, when the storage tracks it; else None."""
        return None

    async def statistics(self) -> dict[str, object]:
        """Backend-specific figures merged into `LightningStore.statistics()`."""
        return {}

    @property
    def write_problem(self) -> Optional[Exception]:
        """Why the database refuses work right now (its disk is full, its server is down), or None."""
        return None

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


class Changes:
    """Modified copies of rollouts, attempts and workers, plus queue actions and finished rollouts.

    Operations mutate copies obtained with `rollout()`/`attempt()` and call the `set_*` helpers; `flush()` writes
    everything at the end of the transaction, so a failed validation never leaves half an operation behind.
    """

    def __init__(self, now: float) -> None:
        self.now = now
        self.new_rollouts: list[Rollout] = []
        self.new_attempts: list[Attempt] = []
        self.rollouts: dict[str, Rollout] = {}
        self.attempts: dict[tuple[str, str], Attempt] = {}
        self.queue_actions: list[tuple[str, str]] = []
        self.finished: list[str] = []
        self.worker_syncs: dict[str, Optional[Attempt]] = {}
        self.worker_releases: dict[str, str] = {}
        #: Workers whose dequeue this was (their last dequeue time is set).
        self.dequeued_by: set[str] = set()

    def new_latest_attempts(self) -> dict[str, Attempt]:
        """The attempts created so far (not yet written), by rollout: each is its rollout's latest."""
        return {attempt.rollout_id: attempt for attempt in self.new_attempts}

    def rollout(self, rollout: Rollout) -> Rollout:
        """The modifiable copy of a stored rollout (the same copy on repeated calls)."""
        copy = self.rollouts.get(rollout.rollout_id)
        if copy is None:
            copy = owned_copy(rollout)
            self.rollouts[rollout.rollout_id] = copy
        return copy

    def attempt(self, attempt: Attempt) -> Attempt:
        key = (attempt.rollout_id, attempt.attempt_id)
        copy = self.attempts.get(key)
        if copy is None:
            copy = owned_copy(attempt)
            self.attempts[key] = copy
        return copy

    def set_rollout_status(self, rollout: Rollout, status: RolloutStatus) -> None:
        """Assign a status to a (copied) rollout with its queue and completion effects."""
        effects = set_rollout_status(rollout, status, self.now)
        self.queue_actions.append((effects.queue, rollout.rollout_id))
        if effects.finished:
            self.finished.append(rollout.rollout_id)

    def set_attempt_status(self, rollout: Rollout, attempt: Attempt, status: str, *, is_latest: bool) -> None:
        """Assign an attempt status and let the rollout follow when the attempt is its latest one."""
        set_attempt_status(attempt, status, self.now)  # type: ignore[arg-type]
        self.follow_attempt(rollout, attempt, is_latest=is_latest)
        self.sync_worker(attempt)

    def follow_attempt(self, rollout: Rollout, attempt: Attempt, *, is_latest: bool) -> None:
        """Propagate the latest attempt's status to its rollout. A cancelled rollout stays cancelled."""
        if not is_latest or rollout.status == "cancelled":
            return
        derived = derive_rollout_status(attempt, rollout.config)
        if derived != rollout.status:
            self.set_rollout_status(rollout, derived)

    def sync_worker(self, attempt: Attempt) -> None:
        if attempt.worker_id:
            self.worker_syncs[attempt.worker_id] = attempt

    def touch_worker(self, worker_id: str) -> None:
        """Make sure the worker exists and record an empty dequeue for it."""
        self.worker_syncs.setdefault(worker_id, None)

    def release_worker_of(self, worker_id: str, attempt: Attempt) -> None:
        """The attempt moved to another worker: the old one is released if it was running that attempt."""
        self.worker_releases[worker_id] = attempt.attempt_id

    async def flush(self, tx: StorageTransaction) -> None:
        """Write everything."""
        if self.new_rollouts:
            await tx.insert_rollouts(self.new_rollouts, enqueue=False)
        if self.new_attempts:
            await tx.insert_attempts(self.new_attempts)
        if self.rollouts:
            await tx.update_rollouts(list(self.rollouts.values()))
        if self.attempts:
            await tx.update_attempts(list(self.attempts.values()))
        await self._flush_queue(tx)
        await self._flush_workers(tx)

    async def _flush_queue(self, tx: StorageTransaction) -> None:
        if not self.queue_actions:
            return
        # Only the last action per rollout matters; keep the order of the pushes.
        final: dict[str, str] = {}
        for action, rollout_id in self.queue_actions:
            final.pop(rollout_id, None)
            final[rollout_id] = action
        removes = [rollout_id for rollout_id, action in final.items() if action == "remove"]
        pushes = [rollout_id for rollout_id, action in final.items() if action == "push"]
        if removes:
            await tx.remove_from_queue(removes)
        if pushes:
            await tx.enqueue(pushes)

    async def _flush_workers(self, tx: StorageTransaction) -> None:
        dequeued_by = self.dequeued_by
        ids = set(self.worker_syncs) | set(self.worker_releases) | dequeued_by
        if not ids:
            return
        existing = await tx.get_workers(sorted(ids))
        changed: list[Worker] = []
        for worker_id in sorted(ids):
            stored = existing.get(worker_id)
            worker = owned_copy(stored) if stored is not None else Worker(worker_id=worker_id)
            released_attempt = self.worker_releases.get(worker_id)
            if released_attempt is not None and worker.current_attempt_id == released_attempt:
                release_worker(worker, self.now)
            if worker_id in dequeued_by:
                worker.last_dequeue_time = self.now
            attempt = self.worker_syncs.get(worker_id)
            if attempt is not None:
                sync_worker_with_attempt(worker, attempt, self.now)
            elif worker_id in self.worker_syncs and worker.status != "busy":
                release_worker(worker, self.now)
            changed.append(worker)
        await tx.put_workers(changed)
