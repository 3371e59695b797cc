"""Which rollout attempts a call may be recorded under: the proxy refuses a call for an attempt the store does not know.

The store's sequence-id allocation checks the rollout only, and a span written under an unknown attempt is refused
by the store, so without this check the proxy would forward such a call and then lose its record. Attempts never
disappear from a store, so the pairs found are remembered (a bounded set) and later calls of an attempt cost nothing.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Optional

from agentlightning.store.base import LightningStore
from agentlightning.store.errors import RolloutNotFoundError

__all__ = ["KnownAttempts"]

logger = logging.getLogger(__name__)


class KnownAttempts:
    """A bounded memory of the (rollout id, attempt id) pairs found in the store."""

    def __init__(self, capacity: int = 8192) -> None:
        self.capacity = capacity
        self._pairs: OrderedDict[tuple[str, str], None] = OrderedDict()

    def remember(self, rollout_id: str, attempt_id: str) -> None:
        pair = (rollout_id, attempt_id)
        self._pairs[pair] = None
        self._pairs.move_to_end(pair)
        while len(self._pairs) > self.capacity:
            self._pairs.popitem(last=False)

    async def check(self, store: LightningStore, rollout_id: str, attempt_id: str) -> Optional[tuple[str, str]]:
        """None when the store knows the attempt, else the error code and message. An unreachable store lets the
        call through (its span is written, or refused and counted, when the store answers again)."""
        if (rollout_id, attempt_id) in self._pairs:
            return None
        try:
            latest = await store.get_latest_attempt(rollout_id)
            if latest is not None and latest.attempt_id == attempt_id:
                self.remember(rollout_id, attempt_id)
                return None
            attempts = [attempt.attempt_id for attempt in await store.query_attempts(rollout_id)]
            if attempt_id in attempts:
                self.remember(rollout_id, attempt_id)
                return None
            rollout_known = bool(attempts) or await store.get_rollout_by_id(rollout_id) is not None
        except RolloutNotFoundError as exc:
            return "rollout_not_found", str(exc)
        except Exception as exc:  # the store is unreachable: serve the call
            logger.warning("LLM proxy: could not check attempt %s of rollout %s (%s)", attempt_id, rollout_id, exc)
            return None
        if not rollout_known:
            return "rollout_not_found", f"Rollout {rollout_id!r} is not in the store"
        shown = ", ".join(attempts[-5:]) or "none"
        return (
            "attempt_not_found",
            f"Rollout {rollout_id!r} has no attempt {attempt_id!r} (its latest attempts: {shown}); the call was not "
            "forwarded, since its record could not be stored",
        )
