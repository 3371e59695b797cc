"""The shared part of `CoreLightningStore`: storage, health scans, waiter wake-ups, and the one path of its frequent
writes (enqueue, claim, span ingest, attempt update).

Each frequent write is a body that works inside a given transaction and `Changes` (`_enqueue_in`, `_claim_in`,
`_spans_in`, `_updates_in`, in `core/rollouts.py` and `core/attempts.py`). `GroupedWrites._write` runs one call;
where the storage groups concurrent writes (`Storage.groups_concurrent_writes`), the calls that arrive while a
transaction is in flight wait and then share the next one, whatever their kinds (`GroupedCall`): each kind's calls
run in arrival order, the kinds in the order of `WRITE_KINDS`, which is one valid order of calls that were
concurrent. Each call's outcome goes to its riders (`core/grouping.py`) before the commit, so what they record of it
commits with the write.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections.abc import Sequence
from typing import Any, Optional

from agentlightning.store.base import (
    LightningStore,
    LightningStoreCapabilities,
    LightningStoreStatistics,
)
from agentlightning.store.core import clock
from agentlightning.store.core.concurrency import AsyncCrossLoopLock, CompletionNotifier
from agentlightning.store.core.grouping import GroupedCall, Outcome, Rider, pending_riders, riders_of, unwrap
from agentlightning.store.core.lifecycle import unhealthy_attempt_status
from agentlightning.store.core.records import span_floors
from agentlightning.store.core.storage import Changes, Storage, StorageTransaction

logger = logging.getLogger("agentlightning.store.core")  # one logger for the whole core


class CoreStoreBase(LightningStore):
    """State shared by the operation groups of `CoreLightningStore`: storage, health scans, waiters."""

    def __init__(self, storage: Storage, *, scan_debounce_seconds: float = 0.0) -> None:
        if scan_debounce_seconds < 0:
            raise ValueError(f"scan_debounce_seconds must not be negative, got {scan_debounce_seconds}")
        self._storage = storage
        self._scan_debounce_seconds = float(scan_debounce_seconds)
        self._last_scan_time = float("-inf")
        self._scan_guard = AsyncCrossLoopLock()
        self._notifier = CompletionNotifier()
        self._created_at = clock.now()
        self._make_groups()
        storage.subscribe(self._on_remote_finished, self._on_remote_wake)

    def _make_groups(self) -> None:
        """Create the per-store call groups (see `GroupedWrites` below); rebuilt after unpickling."""

    def _on_remote_finished(self, rollout_ids: Optional[list[str]]) -> None:
        """Rollouts finished by another process (called from the storage's listener thread)."""
        if rollout_ids is None:
            self._notifier.notify_all(reread=True)
        else:
            self._notifier.notify(rollout_ids)

    def _on_remote_wake(self, reread: bool) -> None:
        self._notifier.notify_all(reread=reread)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_scan_guard", None)
        state.pop("_notifier", None)
        state.pop("_writes", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._scan_guard = AsyncCrossLoopLock()
        self._notifier = CompletionNotifier()
        self._make_groups()

    # ------------------------------------------------------------------------------------------------------- basics
    @property
    def capabilities(self) -> LightningStoreCapabilities:
        return self._storage.capabilities

    async def statistics(self) -> LightningStoreStatistics:
        async with self._storage.transaction(write=False) as tx:
            counts = await tx.count_entities()
        stats = LightningStoreStatistics(
            name=type(self).__name__,
            total_rollouts=counts.get("rollouts", 0),
            total_attempts=counts.get("attempts", 0),
            total_spans=counts.get("spans", 0),
            total_resources=counts.get("resources", 0),
            total_workers=counts.get("workers", 0),
            uptime=clock.now() - self._created_at,
        )
        stats.update(await self._storage.statistics())  # type: ignore[typeddict-item]
        return stats

    @property
    def write_problem(self) -> Optional[Exception]:
        """Why the database refuses writes right now (a full disk, a server that is down), or None; the store
        server's health route reports it."""
        return self._storage.write_problem

    async def close(self) -> None:
        await self._storage.close()

    # ------------------------------------------------------------------------------------------------------- health
    async def _scan_health(self) -> None:
        """Apply the timeout and unresponsiveness rules to running rollouts, at most once per debounce interval."""
        now = clock.now()
        if now - self._last_scan_time < self._scan_debounce_seconds or not self._storage.health_scan_due(now):
            return
        if not self._scan_guard.try_acquire():
            # Another task or thread is scanning: wait until its changes are committed, so that this operation does
            # not read a status the running scan is about to change (that scan covers this moment).
            await self._scan_guard.acquire()
            self._scan_guard.release()
            return
        try:
            self._last_scan_time = now
            changes = Changes(now)
            # The caller's riders go with its own write, not with this scan: the record of an idempotency key (and
            # its answer) commits exactly when the key's operation does.
            with riders_of(()):
                async with self._storage.transaction() as tx:
                    for rollout, attempt in await tx.health_candidates(now):
                        status = unhealthy_attempt_status(attempt, rollout.config, now)
                        if status is None:
                            continue
                        logger.info("Attempt %s of rollout %s is %s", attempt.attempt_id, rollout.rollout_id, status)
                        changes.set_attempt_status(
                            changes.rollout(rollout), changes.attempt(attempt), status, is_latest=True
                        )
                    await changes.flush(tx)
            self._notifier.notify(changes.finished)
        finally:
            self._scan_guard.release()

    async def _latest_resources_id(self, tx: StorageTransaction, resources_id: Optional[str]) -> Optional[str]:
        if resources_id:
            return resources_id
        return await tx.get_latest_resources_id()

    def _wake_after(self, remaining: Optional[float]) -> Optional[float]:
        """How long a waiter may sleep: until its timeout, the next poll, or the next health scan that may fire."""
        candidates = [] if remaining is None else [remaining]
        storage = self._storage
        polled = storage.shared_across_processes and not storage.announces_changes
        if polled or not storage.tracks_health_deadlines:
            candidates.append(max(storage.poll_interval, self._scan_debounce_seconds))
        else:
            deadline = storage.next_health_deadline()
            if deadline is not None:
                next_scan = max(deadline, self._last_scan_time + self._scan_debounce_seconds)
                candidates.append(max(next_scan - clock.now(), 0.0) + 0.001)
        return min(candidates) if candidates else None


#: One call of `_run_writes`: its kind, its payload and the riders of its caller.
_Item = tuple[str, Any, tuple[Rider, ...]]

#: The kinds of grouped writes, in the order a shared transaction runs them (enqueues last: their one read, of the
#: latest resources id, then rides on an earlier round trip).
WRITE_KINDS = ("claim", "spans", "update", "enqueue")


def _rollouts_read(kind: str, payload: Any) -> list[str]:
    """The rollouts (with their latest attempts) the body of `kind` reads for `payload`."""
    if kind == "spans":
        return [span.rollout_id for span in payload]
    if kind == "update":
        return [payload.rollout_id]
    return []


class GroupedWrites(CoreStoreBase):
    """`_write(kind, payload)` and the transaction that runs the writes of one group."""

    def _make_groups(self) -> None:
        super()._make_groups()
        self._writes: Optional[GroupedCall[_Item, Any]] = (
            GroupedCall(self._run_writes) if self._storage.groups_concurrent_writes else None
        )

    async def _write(self, kind: str, payload: Any) -> Any:
        """Run one write (`payload`: what the kind's body takes per call) and return its result."""
        item: _Item = (kind, payload, tuple(pending_riders()))
        if self._writes is not None:
            return await self._writes(item)
        return unwrap((await self._run_writes([item]))[0])

    async def _run_writes(self, items: list[_Item]) -> list[Outcome[Any]]:
        """The writes of a group in one transaction: one outcome per item, in order."""
        by_kind: dict[str, list[int]] = {}
        for index, (kind, _, _) in enumerate(items):
            by_kind.setdefault(kind, []).append(index)
        outcomes: list[Outcome[Any]] = [None] * len(items)
        changes = Changes(clock.now())
        async with self._storage.transaction() as tx:
            reads = [rollout_id for kind, payload, _ in items for rollout_id in _rollouts_read(kind, payload)]
            # Everything the group can ask for before it sees an answer goes with its first round trip: its rollouts
            # and their latest attempts (locked), its span inserts, then its workers (locked last), the latest
            # resources id.
            if reads:
                await tx.prefetch_rollouts_and_latest(reads)
            spans = [span for index in by_kind.get("spans", ()) for span in items[index][1]]
            if spans:
                await tx.queue_span_insert(spans, span_floors(spans))
            if reads or "claim" in by_kind:
                await tx.prefetch_workers_of(reads, self._named_workers(items, by_kind))
            if "enqueue" in by_kind and len(by_kind) > 1:
                await tx.prefetch_latest_resources_id()
            for kind in WRITE_KINDS:
                indexes = by_kind.get(kind)
                if not indexes:
                    continue
                body = self._body(kind)
                results = await body(tx, changes, [items[index][1] for index in indexes])
                for index, result in zip(indexes, results, strict=True):
                    outcomes[index] = result
            for (_, _, riders), outcome in zip(items, outcomes, strict=True):
                for rider in riders:
                    rider.record_outcome(outcome)
            await changes.flush(tx)
        self._notifier.notify(changes.finished)
        return outcomes

    @staticmethod
    def _named_workers(items: list[_Item], by_kind: dict[str, list[int]]) -> list[str]:
        """The workers the group's calls name: claimers, and workers given to attempt updates."""
        workers = {items[index][1][1] for index in by_kind.get("claim", ())}
        workers.update(items[index][1].worker_id for index in by_kind.get("update", ()))
        return sorted(worker for worker in workers if isinstance(worker, str))

    def _body(self, kind: str) -> Any:
        bodies = {
            "enqueue": self._enqueue_in,
            "claim": self._claim_in,
            "spans": self._spans_in,
            "update": self._updates_in,
        }
        return bodies[kind]

    # The bodies: each returns one outcome per payload, or raises when the whole transaction must not commit.
    @abstractmethod
    async def _enqueue_in(self, tx: StorageTransaction, changes: Changes, groups: Any) -> Sequence[Outcome[Any]]: ...

    @abstractmethod
    async def _claim_in(self, tx: StorageTransaction, changes: Changes, requests: Any) -> Sequence[Outcome[Any]]: ...

    @abstractmethod
    async def _spans_in(self, tx: StorageTransaction, changes: Changes, groups: Any) -> Sequence[Outcome[Any]]: ...

    @abstractmethod
    async def _updates_in(self, tx: StorageTransaction, changes: Changes, updates: Any) -> Sequence[Outcome[Any]]: ...
