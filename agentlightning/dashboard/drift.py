"""The drift rate of a run's recent rollouts, computed on the store server for the dashboard's Overview.

A call that continues a conversation but whose prompt ids do not extend the conversation's ids exactly (a chat
template that re-renders the history, a retokenized tool call) trains alone and is counted as *drift*
(`agentlightning.adapter.trajectory`). The drift rate over the run is the first thing to look at when training on a
new model or framework diverges, and it takes the spans of many rollouts to know it, which the page should not read.

`RunDrift` measures it the way training meets it: for each of the newest finished rollouts, the LLM calls GRPO
would train on (`select_calls`: client-side spans through `TracerTraceToTriplet`, else the LLM proxy's spans, every
agent), stitched with `stitch_calls`. The sample is the newest `rollouts` finished rollouts that have such calls,
looking at no more than `max_scanned` finished rollouts. Each rollout's spans are read once (a rollout that ended
less than `settle_seconds` ago is read again, as late spans may still arrive), at most `max_span_reads` per request:
the answer says `complete: false` until the sample is read. A request that finds everything read costs one page of
rollouts.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Optional

from agentlightning.store.base import LightningStore
from agentlightning.types import Rollout, Span

from .progress import BOOKKEEPING_KEY, TERMINAL

__all__ = ["RolloutDrift", "RunDrift", "rollout_drift"]

_READ_CONCURRENCY = 8
_DRIFTED_LISTED = 10
_QUIET_LOGGERS = (
    "agentlightning.adapter.diagnostics",
    "agentlightning.adapter.trace_tree",
    "agentlightning.algorithm.grpo.rollouts.reading",
)
_reading = contextvars.ContextVar("agl_dashboard_drift_reading", default=False)


class _QuietWhileReading(logging.Filter):
    """Drops the adapter's warnings about a rollout while the dashboard reads it (training reports them already)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not _reading.get()


_QUIET = _QuietWhileReading()
for _name in _QUIET_LOGGERS:
    logging.getLogger(_name).addFilter(_QUIET)


@dataclass(frozen=True)
class RolloutDrift:
    """How one rollout's selected LLM calls stitched: `calls` with token ids, `continuations` (calls that continued
    a conversation), `drifted` (continuations that did not extend it exactly) and where the calls came from."""

    rollout_id: str
    attempt_id: Optional[str]
    end_time: float
    calls: int
    continuations: int
    drifted: int
    source: str


def rollout_drift(rollout: Rollout, spans: Sequence[Span]) -> RolloutDrift:
    """Stitch the LLM calls GRPO would select from `spans` (every agent) and count continuations and drift."""
    from agentlightning.adapter.trajectory import call_ids, stitch_calls
    from agentlightning.adapter.triplet import TracerTraceToTriplet
    from agentlightning.algorithm.grpo.rollouts.reading import select_calls

    token = _reading.set(True)
    try:
        calls, source = select_calls(spans, TracerTraceToTriplet(), agent_match=None)
    finally:
        _reading.reset(token)
    report = stitch_calls([call_ids(call) for call in calls])
    attempt = getattr(rollout, "attempt", None)
    return RolloutDrift(
        rollout_id=rollout.rollout_id,
        attempt_id=getattr(attempt, "attempt_id", None),
        end_time=_end_time(rollout),
        calls=report.calls,
        continuations=report.continuations,
        drifted=report.drifted,
        source=source,
    )


def _end_time(rollout: Rollout) -> float:
    return float(rollout.end_time if rollout.end_time is not None else rollout.start_time)


def _key(rollout: Rollout) -> tuple[str, Optional[str], float]:
    return (rollout.rollout_id, getattr(getattr(rollout, "attempt", None), "attempt_id", None), _end_time(rollout))


class RunDrift:
    """The drift rate of the newest finished rollouts of one store (see the module docstring)."""

    def __init__(
        self,
        store: LightningStore,
        *,
        max_scanned: int = 400,
        max_span_reads: int = 50,
        page_size: int = 100,
        settle_seconds: float = 10.0,
    ) -> None:
        self.store = store
        self.settle_seconds = settle_seconds
        self.max_scanned = max_scanned
        self.max_span_reads = max_span_reads
        self.page_size = page_size
        self._read: dict[tuple[str, Optional[str], float], RolloutDrift] = {}
        self._lock = asyncio.Lock()

    async def snapshot(self, rollouts: int = 100) -> dict[str, Any]:
        """The drift over the newest `rollouts` finished rollouts with LLM calls carrying token ids.

        Keys: `limit` (the `rollouts` asked for), `rollouts` (in the sample), `calls`, `continuations`, `drifted`,
        `drift_rate` (drifted / continuations; None without continuations), `rollouts_drifted`, `drifted_rollouts`
        (the newest drifted ones: id, attempt, calls, continuations, drifted), `sources` (rollouts whose calls came
        from client-side spans, "adapter", or the proxy's, "proxy"), `scanned` (finished rollouts looked at),
        `without_calls` (of those, without such calls), `first_end_time` / `last_end_time` of the sample,
        `complete` (nothing left to read), `pending` (rollouts still to read), and what this request cost:
        `span_reads` and `seconds`.
        """
        started = time.perf_counter()
        async with self._lock:
            sample, scanned, pending, reads = await self._collect(rollouts)
        continuations = sum(item.continuations for item in sample)
        drifted = sum(item.drifted for item in sample)
        drifted_rollouts = [item for item in sample if item.drifted]
        sources: dict[str, int] = {}
        for item in sample:
            sources[item.source] = sources.get(item.source, 0) + 1
        return {
            "limit": rollouts,
            "rollouts": len(sample),
            "calls": sum(item.calls for item in sample),
            "continuations": continuations,
            "drifted": drifted,
            "drift_rate": drifted / continuations if continuations else None,
            "rollouts_drifted": len(drifted_rollouts),
            "drifted_rollouts": [
                {key: value for key, value in asdict(item).items() if key not in ("end_time", "source")}
                for item in drifted_rollouts[:_DRIFTED_LISTED]
            ],
            "sources": sources,
            "scanned": scanned,
            "without_calls": scanned - len(sample) - pending,
            "first_end_time": min((item.end_time for item in sample), default=None),
            "last_end_time": max((item.end_time for item in sample), default=None),
            "complete": pending == 0,
            "pending": pending,
            "span_reads": reads,
            "seconds": round(time.perf_counter() - started, 4),
        }

    async def _collect(self, limit: int) -> tuple[list[RolloutDrift], int, int, int]:
        """The sample (newest first), finished rollouts scanned, rollouts left unread and span reads made."""
        sample: list[RolloutDrift] = []
        kept: dict[tuple[str, Optional[str], float], RolloutDrift] = {}
        scanned = pending = reads = 0
        offset = 0
        now = time.time()
        while len(sample) < limit and scanned < self.max_scanned and not pending:
            size = min(self.page_size, self.max_scanned - scanned)
            page = await self.store.query_rollouts(
                status_in=list(TERMINAL), sort_by="end_time", sort_order="desc", limit=size, offset=offset
            )
            offset += len(page)
            candidates = [
                rollout
                for rollout in page
                if not (isinstance(rollout.metadata, dict) and rollout.metadata.get(BOOKKEEPING_KEY))
            ]
            unread = [rollout for rollout in candidates if _key(rollout) not in self._read]
            allowed = unread[: max(self.max_span_reads - reads, 0)]
            fresh = await self._read_rollouts(allowed)
            reads += len(allowed)
            for rollout in candidates:
                key = _key(rollout)
                item = fresh.get(key) or self._read.get(key)
                if item is not None and now - item.end_time >= self.settle_seconds:
                    kept[key] = item  # held while its page is read, even past the sample's end
                if len(sample) >= limit:
                    continue
                scanned += 1
                if item is None:
                    pending += 1
                elif item.calls:
                    sample.append(item)
            if len(page) < size:
                break
        self._read = kept  # only the pages read this time stay held: memory is bounded by max_scanned + page_size
        return sample, scanned, pending, reads

    async def _read_rollouts(self, rollouts: Sequence[Rollout]) -> dict[tuple[str, Optional[str], float], RolloutDrift]:
        semaphore = asyncio.Semaphore(_READ_CONCURRENCY)

        async def spans_of(rollout: Rollout) -> Optional[list[Span]]:
            attempt_id = getattr(getattr(rollout, "attempt", None), "attempt_id", None) or "latest"
            async with semaphore:
                try:
                    return list(await self.store.query_spans(rollout.rollout_id, attempt_id))
                except Exception:  # spans removed by retention, or a rollout that is gone: no calls to count
                    return None

        span_lists = await asyncio.gather(*(spans_of(rollout) for rollout in rollouts))

        def stitch_all() -> dict[tuple[str, Optional[str], float], RolloutDrift]:
            return {
                _key(rollout): rollout_drift(rollout, spans or [])
                for rollout, spans in zip(rollouts, span_lists, strict=True)
            }

        # In a thread: building trace trees for dozens of rollouts takes a while, and this loop also serves runners.
        return await asyncio.to_thread(stitch_all) if rollouts else {}
