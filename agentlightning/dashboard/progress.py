"""The whole run's rewards and outcomes, aggregated on the server for the dashboard's Overview.

The Overview's recent charts read the latest 200 finished rollouts, so a GRPO run of 1,400 rollouts could not show
its curve, and sending every rollout to the browser on each refresh would not scale. `RunProgress` keeps one small
record per finished rollout (end time, mode, status, resources id, final reward) and answers with aggregates: per
time bucket and per resources version, each split by mode (train / val / test).

Keeping the records current costs little: the first request reads the finished rollouts in pages (at most
`max_pages` per request; the answer says `complete: false` until the run is read), later ones read only the newest
finished rollouts, until a page brings nothing new and either ended well before the newest record or leaves as many
records as the store has finished rollouts. Whenever the number of finished rollouts in the store differs from the
number held (rollouts removed, or requeued and not finished yet), the records are read again from the start.

The reward of a rollout is the `final_reward` its runner recorded in the latest attempt's metadata. Rollouts written
by other clients have none; their reward spans are read once each (at most `max_span_reads` per request).
Bookkeeping rollouts (metadata key `agentlightning.bookkeeping`) are not counted.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Optional

from agentlightning.store.base import LightningStore
from agentlightning.types import Rollout

__all__ = ["BUCKET_WIDTHS", "FinishedRollout", "RunProgress", "bucket_width", "grpo_step", "summarize"]

TERMINAL = ("succeeded", "failed", "cancelled")
BOOKKEEPING_KEY = "agentlightning.bookkeeping"
BUCKET_WIDTHS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400, 604800)
"""Bucket widths (seconds) the time aggregation chooses from."""
_REFRESH_MARGIN_SECONDS = 120.0
"""How far below the newest end time an incremental read keeps going (end times of different writers may be out of
order by this much)."""
_FIRST_NEWEST_PAGE = 50
"""Size of the first page of an incremental read (the rest use `page_size`)."""
_UNKNOWN = object()


@dataclass
class FinishedRollout:
    """What the aggregation keeps of one finished rollout. `reward` is None when it has none."""

    rollout_id: str
    end_time: float
    mode: Optional[str]
    status: str
    resources_id: Optional[str]
    reward: Optional[float]
    attempt_id: Optional[str]
    step: Optional[int] = None
    """The GRPO step that enqueued it (`metadata["grpo"]["step"]`), None for any other rollout."""


def grpo_step(metadata: Any) -> Optional[int]:
    """The training step GRPO recorded in a rollout's metadata (`{"grpo": {"step": n, ...}}`), else None."""
    grpo = metadata.get("grpo") if isinstance(metadata, dict) else None
    step = grpo.get("step") if isinstance(grpo, dict) else None
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def _recorded_reward(rollout: Rollout) -> Any:
    """The runner's `final_reward` from the latest attempt's metadata, or _UNKNOWN when it recorded none."""
    attempt = getattr(rollout, "attempt", None)
    metadata = getattr(attempt, "metadata", None)
    if not isinstance(metadata, dict) or "final_reward" not in metadata:
        return _UNKNOWN
    value = metadata["final_reward"]
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def bucket_width(span_seconds: float, buckets: int) -> int:
    """The smallest width of BUCKET_WIDTHS that cuts `span_seconds` into at most `buckets` buckets."""
    wanted = max(span_seconds, 1.0) / max(buckets, 1)
    return next((width for width in BUCKET_WIDTHS if width >= wanted), BUCKET_WIDTHS[-1])


def _group() -> dict[str, Any]:
    return {"count": 0, "succeeded": 0, "failed": 0, "cancelled": 0, "rewarded": 0, "reward_sum": 0.0, "positive": 0}


def _add(group: dict[str, Any], record: FinishedRollout) -> None:
    group["count"] += 1
    if record.status in ("succeeded", "failed", "cancelled"):
        group[record.status] += 1
    if record.reward is not None:
        group["rewarded"] += 1
        group["reward_sum"] += record.reward
        group["positive"] += record.reward > 0


def _finish(group: dict[str, Any]) -> dict[str, Any]:
    rewarded = group["rewarded"]
    group["mean_reward"] = group["reward_sum"] / rewarded if rewarded else None
    group["positive_share"] = group["positive"] / rewarded if rewarded else None
    return group


def summarize(records: Iterable[FinishedRollout], buckets: int = 60) -> dict[str, Any]:
    """Aggregates of `records`: totals, per time bucket and mode, per resources version and mode.

    Each group has count, succeeded, failed, cancelled, rewarded (rollouts with a reward), reward_sum,
    mean_reward (None without rewards), positive (rewards above 0) and positive_share (positive / rewarded: the
    accuracy when rewards are 0 or 1). Buckets and versions are in time order (a version's place is its first
    finished rollout). `steps` groups a GRPO run's rollouts by training step and mode: a training rollout by the
    step that enqueued it, any other (an evaluation) by the first step whose rollouts ran with the same resources;
    rollouts of no step are left out of `steps` (it is empty for a run without GRPO).
    """
    records = list(records)
    totals = _group()
    if not records:
        return {
            "totals": _finish(totals),
            "bucket_seconds": None,
            "buckets": [],
            "versions": [],
            "steps": [],
            "modes": [],
        }
    first = min(record.end_time for record in records)
    last = max(record.end_time for record in records)
    width = bucket_width(last - first, buckets)
    by_bucket: dict[tuple[float, str], dict[str, Any]] = {}
    by_version: dict[tuple[str, str], dict[str, Any]] = {}
    for record in records:
        _add(totals, record)
        mode = record.mode or "none"
        start = math.floor(record.end_time / width) * width
        bucket = by_bucket.get((start, mode))
        if bucket is None:
            bucket = by_bucket[(start, mode)] = {"start": start, "mode": mode, **_group()}
        _add(bucket, record)
        version = by_version.get((record.resources_id or "none", mode))
        if version is None:
            version = by_version[(record.resources_id or "none", mode)] = {
                "resources_id": record.resources_id,
                "mode": mode,
                "first_end_time": record.end_time,
                **_group(),
            }
        elif record.end_time < version["first_end_time"]:
            version["first_end_time"] = record.end_time
        _add(version, record)
    return {
        "totals": _finish(totals),
        "bucket_seconds": width,
        "buckets": sorted((_finish(group) for group in by_bucket.values()), key=lambda group: group["start"]),
        "versions": sorted(
            (_finish(group) for group in by_version.values()), key=lambda group: group["first_end_time"]
        ),
        "steps": _by_step(records),
        "modes": sorted({record.mode or "none" for record in records}),
    }


def _by_step(records: list[FinishedRollout]) -> list[dict[str, Any]]:
    """Groups per (GRPO step, mode), in step order (see `summarize`)."""
    step_of_resources: dict[Optional[str], int] = {}
    for record in records:
        if record.step is not None:
            known = step_of_resources.get(record.resources_id)
            step_of_resources[record.resources_id] = record.step if known is None else min(known, record.step)
    by_step: dict[tuple[int, str], dict[str, Any]] = {}
    for record in records:
        step = record.step if record.step is not None else step_of_resources.get(record.resources_id)
        if step is None:
            continue
        mode = record.mode or "none"
        group = by_step.get((step, mode))
        if group is None:
            group = by_step[(step, mode)] = {"step": step, "mode": mode, **_group()}
        _add(group, record)
    return sorted((_finish(group) for group in by_step.values()), key=lambda group: (group["step"], group["mode"]))


class RunProgress:
    """The finished rollouts of one store, kept current by `refresh` (see the module docstring)."""

    def __init__(
        self, store: LightningStore, *, page_size: int = 500, max_pages: int = 40, max_span_reads: int = 200
    ) -> None:
        self.store = store
        self.page_size = page_size
        self.max_pages = max_pages
        self.max_span_reads = max_span_reads
        self.records: dict[str, FinishedRollout] = {}
        self.unrewarded: dict[str, FinishedRollout] = {}  # rewards still to read from spans
        self.bookkeeping: set[str] = set()
        self.scanned = 0  # finished rollouts read by the full scan (in end-time order)
        self.complete = False
        self.total = 0
        self._changes = 0  # counts changes of the records, so that an unchanged run is not summarised again
        self._summary: Optional[tuple[tuple[int, int], dict[str, Any]]] = None
        self._lock = asyncio.Lock()

    async def snapshot(self, buckets: int = 60) -> dict[str, Any]:
        """Refresh, then the aggregates (`summarize`) with `finished` (finished rollouts in the store, bookkeeping
        left out), `complete` (all of them are counted) and `pending_rewards` (rewards still to read)."""
        async with self._lock:
            await self.refresh()
            key = (self._changes, buckets)
            if self._summary is None or self._summary[0] != key:
                # In a thread: summarising a long run takes a while, and this loop also serves the runners.
                summary = await asyncio.to_thread(summarize, list(self.records.values()), buckets)
                self._summary = (key, summary)
            summary = dict(self._summary[1])
            summary["finished"] = max(self.total - len(self.bookkeeping), 0)
            summary["complete"] = self.complete and not self.unrewarded
            summary["pending_rewards"] = len(self.unrewarded)
            return summary

    async def refresh(self) -> None:
        """Bring the records up to date (bounded work per call)."""
        if self.complete:
            await self._read_newest()
            if not self._counted_all():
                self._restart()
        if not self.complete:
            await self._scan()
        await self._read_rewards()

    def _restart(self) -> None:
        self._changes += 1
        self.records.clear()
        self.unrewarded.clear()
        self.bookkeeping.clear()
        self.scanned = 0
        self.complete = False

    async def _page(self, order: Literal["asc", "desc"], offset: int, size: int) -> Sequence[Rollout]:
        page = await self.store.query_rollouts(
            status_in=list(TERMINAL), sort_by="end_time", sort_order=order, limit=size, offset=offset
        )
        self.total = int(getattr(page, "total", len(page)))
        return page

    async def _scan(self) -> None:
        """Read finished rollouts oldest first from where the last call stopped (at most `max_pages` pages)."""
        for _ in range(self.max_pages):
            page = await self._page("asc", self.scanned, self.page_size)
            for rollout in page:
                self._keep(rollout)
            self.scanned += len(page)
            if len(page) < self.page_size or self.scanned >= self.total:
                self.complete = True
                return

    async def _read_newest(self) -> None:
        """Read finished rollouts newest first until a page brings nothing new and either ended well before the
        newest record or leaves the records as many as the store's finished rollouts."""
        newest = max((record.end_time for record in self.records.values()), default=0.0)
        horizon = newest - _REFRESH_MARGIN_SECONDS
        offset = 0
        size = min(self.page_size, _FIRST_NEWEST_PAGE)  # usually nothing or a few rollouts are new: read a few first
        for _ in range(self.max_pages):
            page = await self._page("desc", offset, size)
            changed = [self._keep(rollout) for rollout in page]
            offset += len(page)
            if len(page) < size or offset >= self.total:
                return
            oldest = page[-1].end_time or 0.0
            if not any(changed) and (oldest < horizon or self._counted_all()):
                return
            size = self.page_size
        self._restart()  # more news than one call reads: read everything again, in bounded steps

    def _counted_all(self) -> bool:
        return self.total == len(self.records) + len(self.bookkeeping)

    def _keep(self, rollout: Rollout) -> bool:
        """Hold `rollout`'s record; True when it is new or changed."""
        rollout_id = rollout.rollout_id
        if isinstance(rollout.metadata, dict) and rollout.metadata.get(BOOKKEEPING_KEY):
            new = rollout_id not in self.bookkeeping
            self.bookkeeping.add(rollout_id)
            return new
        attempt = getattr(rollout, "attempt", None)
        attempt_id = getattr(attempt, "attempt_id", None)
        held = self.records.get(rollout_id)
        end_time = rollout.end_time if rollout.end_time is not None else rollout.start_time
        if (
            held is not None
            and held.attempt_id == attempt_id
            and held.status == rollout.status
            and held.end_time == end_time
        ):
            return False
        reward = _recorded_reward(rollout)
        record = FinishedRollout(
            rollout_id=rollout_id,
            end_time=end_time,
            mode=rollout.mode,
            status=rollout.status,
            resources_id=rollout.resources_id,
            reward=None if reward is _UNKNOWN else reward,
            attempt_id=attempt_id,
            step=grpo_step(rollout.metadata),
        )
        self.records[rollout_id] = record
        self._changes += 1
        if reward is _UNKNOWN:
            self.unrewarded[rollout_id] = record
        else:
            self.unrewarded.pop(rollout_id, None)
        return True

    async def _read_rewards(self) -> None:
        """The final reward of rollouts without a recorded one, from their reward spans (bounded per call)."""
        from agentlightning.emitter.reward import find_final_reward
        from agentlightning.semconv import AGL_ANNOTATION

        for rollout_id in list(self.unrewarded)[: self.max_span_reads]:
            record = self.unrewarded.pop(rollout_id)
            try:
                spans = await self.store.query_spans(
                    rollout_id,
                    record.attempt_id or "latest",
                    name=AGL_ANNOTATION,
                    name_contains="reward",
                    filter_logic="or",
                )
            except Exception:  # spans removed by retention, or a rollout that is gone: no reward to show
                continue
            record.reward = find_final_reward(list(spans))
            self._changes += 1
