"""Durable stores (SQLite, PostgreSQL): persistence across reopening, sharing one database, JSON storage rules."""

from __future__ import annotations

import asyncio
import logging
import math
import pickle
import threading
import time
from collections import Counter

import pytest

from agentlightning.store import InvalidArgumentError, LightningStore
from agentlightning.store.core.clock import use_clock
from agentlightning.store.errors import StoreClosedError
from agentlightning.types import LLM, EnqueueRolloutRequest, RolloutConfig, Span

from .durable_support import DurableDatabase
from .helpers import make_span


async def test_everything_written_is_there_after_reopening(durable: DurableDatabase) -> None:
    first = durable.open()
    resources = await first.add_resources({"llm": LLM(endpoint="http://127.0.0.1:1/v1", model="m")})
    queued = await first.enqueue_many_rollouts([EnqueueRolloutRequest(input={"i": i}) for i in range(3)])
    claimed = await first.dequeue_rollout(worker_id="w1")
    assert claimed is not None
    await first.add_many_spans([make_span(claimed.rollout_id, claimed.attempt.attempt_id, i) for i in (1, 2)])
    await first.close()

    second = durable.open()
    assert (await second.get_latest_resources()) == resources
    rollout = await second.get_rollout_by_id(claimed.rollout_id)
    assert rollout is not None and rollout.status == "running" and rollout.input == {"i": 0}
    assert [s.sequence_id for s in await second.query_spans(claimed.rollout_id)] == [1, 2]
    assert await second.get_next_span_sequence_id(claimed.rollout_id, claimed.attempt.attempt_id) == 3
    worker = await second.get_worker_by_id("w1")
    assert worker is not None and worker.current_rollout_id == claimed.rollout_id
    next_claims = await second.dequeue_many_rollouts(limit=5)
    assert [r.rollout_id for r in next_claims] == [r.rollout_id for r in queued[1:]]


async def test_two_store_objects_on_one_database_hand_out_each_rollout_once(durable: DurableDatabase) -> None:
    first, second = durable.open(), durable.open()
    queued = await first.enqueue_many_rollouts([EnqueueRolloutRequest(input=i) for i in range(60)])
    results = await asyncio.gather(*(store.dequeue_rollout() for store in (first, second) * 40))
    claimed = Counter(r.rollout_id for r in results if r is not None)
    assert claimed == Counter(r.rollout_id for r in queued)


async def test_a_rollout_finished_through_another_store_object_wakes_waiters(durable: DurableDatabase) -> None:
    first, second = durable.open(), durable.open()
    started = await first.start_rollout("task")

    async def finish() -> None:
        await asyncio.sleep(0.1)
        await second.update_attempt(started.rollout_id, "latest", status="succeeded")

    task = asyncio.create_task(finish())
    done = await first.wait_for_rollouts(rollout_ids=[started.rollout_id], timeout=10)
    await task
    assert [r.status for r in done] == ["succeeded"]


async def test_input_without_a_json_form_is_rejected_and_nothing_is_stored(durable: DurableDatabase) -> None:
    store = durable.open()
    with pytest.raises(InvalidArgumentError, match="'input' field of the rollout"):
        await store.enqueue_rollout(object())
    assert list(await store.query_rollouts()) == []
    assert await store.dequeue_rollout() is None


async def test_a_failed_update_leaves_the_stored_rollout_unchanged(durable: DurableDatabase) -> None:
    store = durable.open()
    rollout = await store.enqueue_rollout("task", metadata={"keep": 1})
    with pytest.raises(InvalidArgumentError, match="'metadata' field"):
        await store.update_rollout(rollout.rollout_id, status="running", metadata={"bad": {1, object()}})
    stored = await store.get_rollout_by_id(rollout.rollout_id)
    assert stored is not None and stored.status == "queuing" and stored.metadata == {"keep": 1}


async def test_a_span_with_an_unstorable_extra_field_is_rejected_whole(durable: DurableDatabase) -> None:
    store = durable.open()
    started = await store.start_rollout("task")
    good = make_span(started.rollout_id, started.attempt.attempt_id, 1)
    bad = Span.model_validate(
        {**make_span(started.rollout_id, started.attempt.attempt_id, 2).model_dump(), "x": object()}
    )
    with pytest.raises(InvalidArgumentError, match="'x' field of the span"):
        await store.add_many_spans([good, bad])
    assert list(await store.query_spans(started.rollout_id)) == []


async def test_non_finite_span_attributes_survive_storage(durable: DurableDatabase) -> None:
    store = durable.open()
    started = await store.start_rollout("task")
    span = make_span(started.rollout_id, started.attempt.attempt_id, 1, attributes={"nan": math.nan, "inf": -math.inf})
    await store.add_span(span)
    stored = (await store.query_spans(started.rollout_id))[0]
    assert math.isnan(stored.attributes["nan"]) and stored.attributes["inf"] == -math.inf  # type: ignore[arg-type]


async def test_inputs_come_back_in_their_json_form(durable: DurableDatabase) -> None:
    store = durable.open()
    rollout = await store.enqueue_rollout({"pair": (1, 2), "nested": [{"x": None}]})
    stored = await store.get_rollout_by_id(rollout.rollout_id)
    assert stored is not None and stored.input == {"pair": [1, 2], "nested": [{"x": None}]}


async def test_health_scans_from_several_store_objects_handle_each_rollout_once(
    durable: DurableDatabase, caplog: pytest.LogCaptureFixture
) -> None:
    stores = [durable.open() for _ in range(4)]
    config = RolloutConfig(timeout_seconds=10, max_attempts=3, retry_condition=["timeout"])
    requests = [EnqueueRolloutRequest(input=i, config=config) for i in range(100)]
    claimed_at = time.time()
    with use_clock(lambda: claimed_at):
        queued = await stores[0].enqueue_many_rollouts(requests)
        assert len(await stores[0].dequeue_many_rollouts(limit=100)) == 100
    caplog.set_level(logging.INFO, logger="agentlightning.store.core")
    barrier = threading.Barrier(len(stores))

    def scan(store: LightningStore) -> None:
        async def run() -> None:
            barrier.wait()
            await store.query_rollouts()

        asyncio.run(run())

    with use_clock(lambda: claimed_at + 11):  # every attempt is past its timeout for the scans
        threads = [threading.Thread(target=scan, args=(store,)) for store in stores]
        await asyncio.to_thread(lambda: ([t.start() for t in threads], [t.join() for t in threads]))
        handled = Counter(record.args[1] for record in caplog.records if "is timeout" in record.getMessage())  # type: ignore[index]
        assert handled == Counter({r.rollout_id: 1 for r in queued})
        retried = await stores[1].dequeue_many_rollouts(limit=100)
        assert sorted(r.rollout_id for r in retried) == sorted(r.rollout_id for r in queued)
        assert {r.attempt.sequence_id for r in retried} == {2}


async def test_statistics_count_spans_and_their_bytes(durable: DurableDatabase) -> None:
    store = durable.open()
    started = await store.start_rollout("task")
    await store.add_many_spans([make_span(started.rollout_id, started.attempt.attempt_id, i) for i in range(1, 4)])
    stats = await store.statistics()
    assert stats["total_spans"] == 3 and stats["total_rollouts"] == 1 and stats["total_attempts"] == 1
    assert stats["total_span_bytes"] > 3 * 100  # type: ignore[operator]


async def test_a_closed_store_refuses_calls(durable: DurableDatabase) -> None:
    store = durable.open()
    await store.close()
    with pytest.raises(StoreClosedError):
        await store.enqueue_rollout("task")


async def test_the_store_pickles_to_a_store_on_the_same_database(durable: DurableDatabase) -> None:
    store = durable.open()
    rollout = await store.enqueue_rollout("task")
    copy = pickle.loads(pickle.dumps(store))
    durable.stores.append(copy)
    assert (await copy.get_rollout_by_id(rollout.rollout_id)) is not None


async def test_durable_stores_are_shared_by_processes(durable: DurableDatabase) -> None:
    capabilities = durable.open().capabilities
    assert capabilities.get("thread_safe") and capabilities.get("async_safe") and capabilities.get("zero_copy")


async def test_a_cancelled_call_writes_nothing_and_the_store_keeps_working(durable: DurableDatabase) -> None:
    store = durable.open()
    started = await store.start_rollout("task")
    rollout_id, attempt_id = started.rollout_id, started.attempt.attempt_id
    for attempt in range(10):
        batch = [make_span(rollout_id, attempt_id, attempt * 1000 + i) for i in range(200)]
        task = asyncio.create_task(store.add_many_spans(batch))
        await asyncio.sleep(0.003 * attempt)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        stored = {s.span_id for s in await store.query_spans(rollout_id)}
        ids = {s.span_id for s in batch}
        assert len(stored & ids) in (0, len(ids))
    assert await store.add_span(make_span(rollout_id, attempt_id, 10**6)) is not None
