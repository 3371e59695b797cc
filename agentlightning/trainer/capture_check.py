"""Whether a run captured any LLM call, for the run summary: a run whose rollouts recorded spans but no LLM call says
so once, with the adapter's diagnosis of the cause and the fix, instead of only warning per rollout.

The rollouts of the run are read newest first and stop at the first one whose spans hold an LLM call, so a healthy
run costs one span query; a run without any reads the spans of at most `limit` rollouts. Rollouts that recorded no
span are skipped (their failure is the cause, and the summary's failure reasons name it), as are bookkeeping
rollouts. Only adapters that diagnose their trajectories (`last_diagnosis`: the triplet adapters) can tell.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Optional

from agentlightning.adapter.diagnostics import quiet_diagnoses
from agentlightning.types import RolloutStatus
from agentlightning.utils.bookkeeping import is_bookkeeping_rollout

if TYPE_CHECKING:
    from agentlightning.store.base import LightningStore

__all__ = ["missing_llm_calls"]

logger = logging.getLogger(__name__)

FINISHED: list[RolloutStatus] = ["succeeded", "failed", "cancelled"]


async def missing_llm_calls(
    store: LightningStore, adapter: Any, *, since: float = 0.0, limit: int = 200
) -> Optional[str]:
    """None when a rollout started at or after `since` recorded an LLM call (or none recorded any span, or the adapter
    cannot tell); else "no rollout produced an LLM call (...): <cause and fix>", from the adapter's diagnosis of the
    newest rollout with spans."""
    if not hasattr(adapter, "last_diagnosis"):
        return None
    rollouts = await store.query_rollouts(status_in=FINISHED, sort_by="end_time", sort_order="desc", limit=limit)
    reason: Optional[str] = None
    read = 0
    for rollout in rollouts:
        if rollout.start_time < since or is_bookkeeping_rollout(rollout):
            continue
        spans = list(await store.query_spans(rollout.rollout_id))
        if not spans:
            continue
        read += 1
        try:
            with quiet_diagnoses():
                adapter.adapt(spans)
        except Exception as exc:  # the algorithm reports adapter failures; this check only explains empty runs
            logger.debug("capture check: the adapter failed on %s: %r", rollout.rollout_id, exc)
            continue
        diagnosis = adapter.last_diagnosis
        if diagnosis is None or diagnosis.llm_call_spans > 0:
            return None
        reason = reason or diagnosis.reason
    if reason is None:
        return None
    newest = f", the newest of {len(rollouts)} read" if len(rollouts) >= limit else ""
    return f"no rollout produced an LLM call ({read} rollouts with spans{newest}): {reason}"
