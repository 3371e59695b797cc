"""The storage interface behind `CoreLightningStore`.

A backend provides a `Storage` whose transactions expose a small set of data operations. The contract's rules
(state machine, retries, health checks, validation) live in `CoreLightningStore` and `lifecycle`; a backend only
decides how these operations are stored, indexed and made atomic. Everything done through one transaction object
must commit atomically or not at all.

Objects returned by a transaction may be the backend's own; the core copies them before handing them to callers and
writes every change back through an `update_*` call.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Optional

from agentlightning.store.base import LightningStoreCapabilities
from agentlightning.store.core.query import Query
from agentlightning.types import Attempt, ResourcesUpdate, Rollout, Span, Worker


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
