"""GRPO's rollouts through the store: enqueue a group of rollouts per task, wait for them, cancel the leftovers.

Each rollout carries `metadata["grpo"]` (the caller's step or evaluation label, and its task's position in the
request as `group`), which is also how a later run recognises the rollouts an interrupted run left behind.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from agentlightning.types import EnqueueRolloutRequest, Rollout, RolloutMode

from .reading import SkipCounts

if TYPE_CHECKING:
    from agentlightning.store.base import LightningStore

__all__ = ["cancel_stale_rollouts", "run_rollouts"]

# The trainer's logger (these records were written from grpo.py before the split; logging configs name it).
logger = logging.getLogger("agentlightning.algorithm.grpo.grpo")

_WAIT_SLICE = 2.0

ProgressCallback = Callable[[int, int], None]
"""Called with `(finished, enqueued)` after every wait slice."""


async def run_rollouts(
    store: LightningStore,
    tasks: Sequence[Any],
    *,
    mode: RolloutMode,
    resources_id: str,
    repeat: int,
    meta: dict[str, Any],
    timeout: float,
    skips: SkipCounts,
    on_progress: ProgressCallback,
) -> tuple[list[Rollout], list[int]]:
    """Enqueue `repeat` rollouts per task; return the finished rollouts and each one's task index.

    Rollouts still unfinished after `timeout` seconds are cancelled, left out and counted in `skips`.
    """
    requests = [
        EnqueueRolloutRequest(
            input=task, mode=mode, resources_id=resources_id, metadata={"grpo": {**meta, "group": index}}
        )
        for index, task in enumerate(tasks)
        for _ in range(repeat)
    ]
    enqueued = await store.enqueue_many_rollouts(requests)
    group_of = {rollout.rollout_id: index // repeat for index, rollout in enumerate(enqueued)}
    pending = set(group_of)
    finished: list[Rollout] = []
    deadline = time.monotonic() + timeout
    while pending:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        done = await store.wait_for_rollouts(rollout_ids=list(pending), timeout=min(remaining, _WAIT_SLICE))
        for rollout in done:
            if rollout.rollout_id in pending:
                pending.discard(rollout.rollout_id)
                finished.append(rollout)
        on_progress(len(finished), len(enqueued))
    if pending:
        logger.warning(
            "GRPO: %d of %d rollouts did not finish within rollout_timeout=%.0f s; cancelled and left out",
            len(pending),
            len(enqueued),
            timeout,
        )
        skips.rollouts_unfinished += len(pending)
        for rollout_id in pending:
            try:
                await store.update_rollout(rollout_id, status="cancelled")
            except Exception as exc:
                logger.warning("Could not cancel rollout %s: %r", rollout_id, exc)
    return finished, [group_of[r.rollout_id] for r in finished]


async def cancel_stale_rollouts(store: LightningStore) -> None:
    """Cancel GRPO rollouts an earlier (killed) run left queued or running: their model endpoint is gone."""
    stale = await store.query_rollouts(status_in=["queuing", "requeuing", "preparing", "running"])
    ids = [r.rollout_id for r in stale if isinstance((r.metadata or {}).get("grpo"), dict)]
    for rollout_id in ids:
        try:
            await store.update_rollout(rollout_id, status="cancelled")
        except Exception as exc:
            logger.warning("Could not cancel stale rollout %s: %r", rollout_id, exc)
    if ids:
        logger.info("GRPO cancelled %d rollouts left unfinished by an earlier run", len(ids))
