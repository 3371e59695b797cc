"""Recovery of claims nobody acknowledged.

A `dequeue` answer can be lost for good (the client gave up retrying, or died). The client replays a lost claim
with its Idempotency-Key while it lives; for a client that never comes back, the server remembers the claims it
handed out and, once `ack_seconds` passed without the attempt being acknowledged (a heartbeat, a span, a status
change), puts the rollout back in the queue. The check and the requeue are one transaction of the store, so a claim
acknowledged at the last moment is left alone.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Optional

from agentlightning.store.base import LightningStore

__all__ = ["ClaimLedger"]

logger = logging.getLogger(__name__)


def _core_store(store: LightningStore) -> Optional[Any]:
    """The store that can requeue a claim atomically (unwrapping LightningStoreThreaded), or None."""
    from agentlightning.store.threading import LightningStoreThreaded

    while isinstance(store, LightningStoreThreaded):
        store = store.store
    return store if hasattr(store, "requeue_unacknowledged_claim") else None


class ClaimLedger:
    """Claims answered by this server process, oldest first; `sweep()` requeues the unacknowledged ones."""

    def __init__(
        self, store: LightningStore, *, ack_seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if ack_seconds <= 0:
            raise ValueError(f"ack_seconds must be positive, got {ack_seconds}")
        self.ack_seconds = ack_seconds
        self.clock = clock
        self._store = _core_store(store)
        self._claims: deque[tuple[float, str, str]] = deque()
        if self._store is None:
            logger.info("%s cannot requeue unacknowledged claims; lost claims wait for health rules", type(store))

    def __len__(self) -> int:
        return len(self._claims)

    def record(self, claimed: Sequence[Any]) -> None:
        if self._store is None:
            return
        now = self.clock()
        for rollout in claimed:
            attempt = getattr(rollout, "attempt", None)
            if attempt is not None:
                self._claims.append((now, rollout.rollout_id, attempt.attempt_id))

    async def sweep(self) -> int:
        """Requeue the claims older than `ack_seconds` that are still unacknowledged; the number requeued."""
        store = self._store
        if store is None:
            return 0
        deadline = self.clock() - self.ack_seconds
        requeued = 0
        claims = self._claims
        while claims and claims[0][0] <= deadline:
            _, rollout_id, attempt_id = claims.popleft()
            try:
                if await store.requeue_unacknowledged_claim(rollout_id, attempt_id):
                    requeued += 1
                    logger.warning(
                        "Rollout %s: the claim of attempt %s was never acknowledged within %g s; requeued",
                        rollout_id,
                        attempt_id,
                        self.ack_seconds,
                    )
            except Exception:
                logger.exception("Could not check the claim of attempt %s of rollout %s", attempt_id, rollout_id)
        return requeued
