"""Releasing the attempts of a runner that died: mark them unresponsive at once, so their rollouts are retried (or
failed) now rather than after the unresponsive timeout — or never, when the rollout has no health rules. Its workers
are recorded as stopped too (the `stopped_at` of a last heartbeat, as a runner that stops by itself sends), so the
progress display and the dashboard do not count a dead runner as alive beside its replacement.

Runners report their process id and host in their worker heartbeats (`system_snapshot`), which is how a supervisor
finds the workers of a dead process.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentlightning.store.base import LightningStore

__all__ = ["release_attempts_of_process"]

_RUNNING = ("preparing", "running")


async def release_attempts_of_process(store: LightningStore, *, pid: int, hostname: str, reason: str) -> list[str]:
    """Mark the in-flight attempts of the workers of process `pid` on `hostname` unresponsive, with `reason` in
    their metadata, and record those workers as stopped. Returns the ids of the rollouts whose attempt was
    released."""
    from agentlightning.runner.heartbeat import STOPPED_AT, has_stopped

    released: list[str] = []
    for worker in await store.query_workers():
        stats = worker.heartbeat_stats or {}
        if stats.get("pid") != pid or stats.get("hostname") != hostname:
            continue
        if not has_stopped(stats):
            await store.update_worker(
                worker.worker_id, heartbeat_stats={**stats, STOPPED_AT: time.time(), "died": reason}
            )
        rollout_id, attempt_id = worker.current_rollout_id, worker.current_attempt_id
        if not rollout_id or not attempt_id:
            continue
        attempt = next((item for item in await store.query_attempts(rollout_id) if item.attempt_id == attempt_id), None)
        if attempt is None or attempt.status not in _RUNNING:
            continue
        metadata = dict(attempt.metadata or {})
        metadata.update({"error": reason, "error_type": "RunnerDied"})
        await store.update_attempt(rollout_id, attempt_id, status="unresponsive", metadata=metadata)
        released.append(rollout_id)
    return released
