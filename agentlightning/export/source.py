"""Reading a store for export without loading it whole: rollouts page by page, one rollout's spans at a time.

Rollouts are paged in creation order without a status filter (a status can change while the export runs and would
shift the pages; creation order only grows at the end), and only succeeded ones are read further. Each page's
rollouts have their latest attempt's spans read concurrently (a few at a time), are turned into calls with GRPO's
rule (`select_calls`: client-side spans through `TracerTraceToTriplet`, else the LLM proxy's spans) and are yielded in
order, so memory holds one page of rollouts and the spans of at most `concurrency` rollouts.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from agentlightning.adapter.diagnostics import quiet_diagnoses
from agentlightning.adapter.triplet import TracerTraceToTriplet
from agentlightning.algorithm.grpo.rollouts.reading import select_calls
from agentlightning.emitter.reward import find_final_reward
from agentlightning.types import Rollout, RolloutMode

from .records import ExportedRollout, group_key

if TYPE_CHECKING:
    from agentlightning.store.base import LightningStore

__all__ = ["ReadCounts", "RolloutReader", "RolloutRef"]

PAGE_SIZE = 200
CONCURRENCY = 8


@dataclass
class ReadCounts:
    """What the reader saw: rollouts by outcome, and an example of why a rollout had no calls."""

    rollouts_seen: int = 0
    rollouts_read: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    no_calls_example: Optional[str] = None

    def skip(self, reason: str) -> None:
        self.skipped[reason] += 1


@dataclass(slots=True)
class RolloutRef:
    """Enough to read a rollout's spans again (preference pairs read their two sides twice)."""

    rollout_id: str
    attempt_id: Optional[str]
    resources_id: Optional[str]
    group: str


def _why_no_calls(adapter: TracerTraceToTriplet) -> str:
    diagnosis = adapter.last_diagnosis
    if diagnosis is None:
        return "the adapter failed on its spans (see the log)"
    if diagnosis.reason:
        return diagnosis.reason
    return (
        f"{diagnosis.triplets_without_token_ids} of {diagnosis.triplets} LLM calls carry no prompt and response token "
        "ids (the server must return them, e.g. vLLM with return_token_ids), and the LLM proxy recorded none"
    )


class RolloutReader:
    """Streams a store's succeeded rollouts as `ExportedRollout`s (see the module docstring).

    Args:
        store: the store to read.
        agent_match: regex on agent names; only calls made inside a matching agent are kept (None: every call,
            falling back to the proxy's spans when the client side recorded none).
        mode_in: keep only rollouts of these modes (None: all).
        page_size: rollouts per query.
        concurrency: rollouts whose spans are read at the same time.
    """

    def __init__(
        self,
        store: LightningStore,
        *,
        agent_match: Optional[str] = None,
        mode_in: Optional[Sequence[RolloutMode]] = None,
        page_size: int = PAGE_SIZE,
        concurrency: int = CONCURRENCY,
    ) -> None:
        if page_size < 1 or concurrency < 1:
            raise ValueError("page_size and concurrency must be at least 1")
        self.store = store
        self.agent_match = agent_match
        self.mode_in = list(mode_in) if mode_in is not None else None
        self.page_size = page_size
        self.concurrency = concurrency
        self.counts = ReadCounts()
        self.total: Optional[int] = None  # rollouts matching the query, known after the first page

    async def rollouts(self) -> AsyncIterator[ExportedRollout]:
        """Every succeeded rollout with a finite or missing reward and at least one call with token ids, in creation
        order; the others are counted in `counts.skipped` by reason."""
        offset = 0
        semaphore = asyncio.Semaphore(self.concurrency)
        while True:
            page = await self.store.query_rollouts(mode_in=self.mode_in, limit=self.page_size, offset=offset)
            if self.total is None:
                self.total = int(getattr(page, "total", len(page)))
            if not page:
                return
            offset += len(page)
            read = await asyncio.gather(*(self._read_limited(semaphore, rollout) for rollout in page))
            for item in read:
                if item is not None:
                    yield item
            if len(page) < self.page_size:
                return

    async def _read_limited(self, semaphore: asyncio.Semaphore, rollout: Rollout) -> Optional[ExportedRollout]:
        self.counts.rollouts_seen += 1
        if rollout.status != "succeeded":
            self.counts.skip(f"rollout {rollout.status}")
            return None
        attempt = getattr(rollout, "attempt", None)
        ref = RolloutRef(
            rollout_id=rollout.rollout_id,
            attempt_id=attempt.attempt_id if attempt is not None else None,
            resources_id=rollout.resources_id,
            group=group_key(rollout.metadata, rollout.input),
        )
        async with semaphore:
            return await self.read(ref)

    async def read(self, ref: RolloutRef, counts: Optional[ReadCounts] = None) -> Optional[ExportedRollout]:
        """One rollout's reward and calls (None, counted in `counts`, default `self.counts`, when it has none
        usable)."""
        counts = self.counts if counts is None else counts
        try:
            spans = await self.store.query_spans(ref.rollout_id, ref.attempt_id or "latest")
        except Exception as exc:
            counts.skip(f"spans unreadable ({type(exc).__name__})")
            return None
        counts.rollouts_read += 1
        reward = find_final_reward(spans)
        if reward is not None and not math.isfinite(reward):
            counts.skip("reward not finite")
            return None
        adapter = TracerTraceToTriplet(agent_match=self.agent_match)
        with quiet_diagnoses():
            calls, _source = select_calls(spans, adapter, agent_match=self.agent_match)
        if not calls:
            counts.skip("no LLM call with token ids" if self.agent_match is None else "no call of a matching agent")
            if counts.no_calls_example is None:
                counts.no_calls_example = f"{ref.rollout_id}: {_why_no_calls(adapter)}"
            return None
        return ExportedRollout(
            rollout_id=ref.rollout_id,
            attempt_id=ref.attempt_id,
            resources_id=ref.resources_id,
            reward=reward,
            group=ref.group,
            calls=calls,
        )
