"""Collects the writes of one store operation and flushes them through a storage transaction."""

from __future__ import annotations

from typing import Optional

from agentlightning.store.core.lifecycle import (
    derive_rollout_status,
    release_worker,
    set_attempt_status,
    set_rollout_status,
    sync_worker_with_attempt,
)
from agentlightning.store.core.records import owned_copy
from agentlightning.store.core.storage import StorageTransaction
from agentlightning.types import Attempt, Rollout, RolloutStatus, Worker


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
