"""A GRPO run's health in its store, for the dashboard: the records of its latest steps, the active warnings and the
verdict, as JSON in the metadata of one bookkeeping rollout of the run (created already finished, never queued, left
out of progress counts; see `agentlightning.utils.bookkeeping`). Every rollout GRPO enqueues names that rollout in its
metadata (`metadata["grpo"]["health_record"]`), so the dashboard finds the record from any recent rollout of the run in one request.

Writing the record never stops training: a store that refuses it is logged once and the run goes on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional

from agentlightning.utils.bookkeeping import bookkeeping_metadata

if TYPE_CHECKING:
    from agentlightning.store.base import LightningStore

__all__ = ["HEALTH_KEY", "MAX_STEPS_KEPT", "POINTER_KEY", "HealthRecordWriter", "health_record"]

logger = logging.getLogger("agentlightning.algorithm.grpo.grpo")

HEALTH_KEY = "grpo_health"
"""The metadata key of the bookkeeping rollout that holds the record."""
POINTER_KEY = "health_record"
"""The key, in the `grpo` metadata of every rollout GRPO enqueues, naming the rollout that holds the run's record."""
MAX_STEPS_KEPT = 500
"""Steps the record keeps (the newest)."""
RECORD_FORMAT = 1


def health_record(history: Sequence[Mapping[str, Any]], verdict: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """The record the dashboard reads: each step's health (with the codes of its warnings), the newest
    `MAX_STEPS_KEPT` steps, the warnings active at the last step, and the verdict (None before the end)."""
    steps = [
        {**entry["health"], "warnings": [w["code"] for w in entry.get("warnings") or []]}
        for entry in history
        if isinstance(entry.get("health"), Mapping)
    ]
    return {
        "format": RECORD_FORMAT,
        "updated": time.time(),
        "steps": steps[-MAX_STEPS_KEPT:],
        "warnings": list(history[-1].get("warnings") or []) if history else [],
        "verdict": dict(verdict) if verdict is not None else None,
    }


class HealthRecordWriter:
    """Writes a run's health record to its bookkeeping rollout (created on the first save)."""

    def __init__(self, store: LightningStore) -> None:
        self.store = store
        self.rollout_id: Optional[str] = None
        self._failed = False

    async def save(
        self, history: Sequence[Mapping[str, Any]], verdict: Optional[Mapping[str, Any]] = None
    ) -> Optional[str]:
        """Write the record of `history` (and `verdict`); the record's rollout id, or None when the store refused."""
        metadata = {HEALTH_KEY: health_record(history, verdict), **bookkeeping_metadata(HEALTH_KEY)}
        try:
            if self.rollout_id is None:
                started = await self.store.start_rollout(
                    input={HEALTH_KEY: "the health of a GRPO run"}, metadata=metadata
                )
                await self.store.update_attempt(started.rollout_id, started.attempt.attempt_id, status="succeeded")
                self.rollout_id = started.rollout_id
            else:
                await self.store.update_rollout(self.rollout_id, metadata=metadata)
        except Exception as exc:
            if not self._failed:
                logger.warning("GRPO could not write its health record to the store (the dashboard lacks it): %r", exc)
            self._failed = True
        return self.rollout_id
