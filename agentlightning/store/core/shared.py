"""The shared part of `CoreLightningStore`: storage, health scans and waiter wake-ups."""

from __future__ import annotations

import logging
from typing import Any, Optional

from agentlightning.store.base import (
    LightningStore,
    LightningStoreCapabilities,
    LightningStoreStatistics,
)
from agentlightning.store.core import clock
from agentlightning.store.core.changes import Changes
from agentlightning.store.core.lifecycle import unhealthy_attempt_status
from agentlightning.store.core.locks import AsyncCrossLoopLock
from agentlightning.store.core.notify import CompletionNotifier
from agentlightning.store.core.riders import riders_of
from agentlightning.store.core.storage import Storage, StorageTransaction

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
        """Create the per-store call groups (see `core/writes.py`); rebuilt after unpickling."""

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
