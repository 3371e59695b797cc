"""Span retention in the durable stores: finished rollouts lose their spans, oldest first; running ones never."""

from __future__ import annotations

import asyncio
import time

import pytest

from agentlightning.store import InvalidArgumentError, LightningStore, SpansEvictedError
from agentlightning.store.sql.retention import RetentionPolicy

from .durable_support import DurableDatabase
from .helpers import make_span


async def _rollout_with_spans(store: LightningStore, count: int, *, finish: bool) -> str:
    started = await store.start_rollout("task")
    await store.add_many_spans([make_span(started.rollout_id, started.attempt.attempt_id, i) for i in range(count)])
    if finish:
        await store.update_attempt(started.rollout_id, "latest", status="succeeded")
    return started.rollout_id


async def test_a_span_limit_clears_the_oldest_finished_rollouts_first(durable: DurableDatabase) -> None:
    store = durable.open(retention=RetentionPolicy(max_spans=25, low_water_ratio=0.7))
    oldest = await _rollout_with_spans(store, 10, finish=True)
    middle = await _rollout_with_spans(store, 10, finish=True)
    running = await _rollout_with_spans(store, 10, finish=False)
    newest = await _rollout_with_spans(store, 5, finish=True)
    cleared = await store.apply_retention()  # type: ignore[attr-defined]
    assert cleared == [oldest, middle]
    for rollout_id in (oldest, middle):
        with pytest.raises(SpansEvictedError, match=rollout_id):
            await store.query_spans(rollout_id)
    assert len(await store.query_spans(running)) == 10
    assert len(await store.query_spans(newest)) == 5
    assert (await store.statistics())["total_spans"] == 15


async def test_running_rollouts_keep_their_spans_whatever_the_limit(durable: DurableDatabase) -> None:
    store = durable.open(retention=RetentionPolicy(max_spans=1))
    running = await _rollout_with_spans(store, 5, finish=False)
    assert await store.apply_retention() == []  # type: ignore[attr-defined]
    assert len(await store.query_spans(running)) == 5


async def test_a_byte_limit_counts_the_stored_span_json(durable: DurableDatabase) -> None:
    store = durable.open()
    first = await _rollout_with_spans(store, 4, finish=True)
    first_bytes = int((await store.statistics())["total_span_bytes"])  # type: ignore[call-overload]
    await _rollout_with_spans(store, 4, finish=True)
    span_bytes = int((await store.statistics())["total_span_bytes"])  # type: ignore[call-overload]
    limited = durable.open(retention=RetentionPolicy(max_bytes=span_bytes - 1, low_water_ratio=0.9))
    assert await limited.apply_retention() == [first]  # type: ignore[attr-defined]
    remaining = int((await limited.statistics())["total_span_bytes"])  # type: ignore[call-overload]
    assert remaining == span_bytes - first_bytes > 0


async def test_an_age_limit_clears_rollouts_finished_long_enough_ago(durable: DurableDatabase) -> None:
    store = durable.open(retention=RetentionPolicy(max_age_seconds=0.2))
    old = await _rollout_with_spans(store, 2, finish=True)
    await asyncio.sleep(0.3)
    recent = await _rollout_with_spans(store, 2, finish=True)
    assert await store.apply_retention() == [old]  # type: ignore[attr-defined]
    assert len(await store.query_spans(recent)) == 2


async def test_the_policy_applies_itself_after_enough_new_spans(durable: DurableDatabase) -> None:
    policy = RetentionPolicy(max_spans=10, low_water_ratio=0.5, check_every_spans=8, check_interval_seconds=3600)
    store = durable.open(retention=policy)
    finished = await _rollout_with_spans(store, 6, finish=True)
    assert len(await store.query_spans(finished)) == 6  # 6 new spans: not yet due
    await _rollout_with_spans(store, 6, finish=False)  # 12 spans now, over the limit and due
    with pytest.raises(SpansEvictedError):
        await store.query_spans(finished)


async def test_late_spans_of_a_cleared_rollout_count_as_heartbeats_but_are_not_stored(
    durable: DurableDatabase,
) -> None:
    store = durable.open(retention=RetentionPolicy(max_spans=1, low_water_ratio=0.0))
    rollout_id = await _rollout_with_spans(store, 3, finish=True)
    assert await store.apply_retention() == [rollout_id]  # type: ignore[attr-defined]
    retry = await store.start_attempt(rollout_id)
    before = time.time()
    added = await store.add_span(make_span(rollout_id, retry.attempt.attempt_id, 10))
    attempt = await store.get_latest_attempt(rollout_id)
    assert added is not None
    assert attempt is not None and attempt.last_heartbeat_time is not None and attempt.last_heartbeat_time >= before
    with pytest.raises(SpansEvictedError):
        await store.query_spans(rollout_id)


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"max_spans": 0}, "max_spans must be positive"),
        ({"max_bytes": 1.5}, "max_bytes must be an integer"),
        ({"max_age_seconds": -1}, "max_age_seconds must be positive"),
        ({"low_water_ratio": 2}, "low_water_ratio must be between 0 and 1"),
        ({"check_interval_seconds": float("inf")}, "check_interval_seconds must be positive"),
    ],
)
def test_invalid_policies_are_rejected(options: dict[str, float], problem: str) -> None:
    with pytest.raises(InvalidArgumentError, match=problem):
        RetentionPolicy(**options)  # type: ignore[arg-type]


def test_a_policy_without_limits_is_disabled() -> None:
    assert not RetentionPolicy().enabled
    assert RetentionPolicy(max_spans=5).enabled
