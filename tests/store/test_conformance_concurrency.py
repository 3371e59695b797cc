"""Store contract: atomicity under many concurrent callers, as tasks and as threads (every backend)."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Optional

from agentlightning.store import LightningStore
from agentlightning.types import LLM, EnqueueRolloutRequest

from .helpers import make_readable_span


async def test_hundreds_of_concurrent_dequeuers_get_each_rollout_exactly_once(store: LightningStore) -> None:
    queued = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=i) for i in range(200)])
    results = await asyncio.gather(*(store.dequeue_rollout(worker_id=f"w{i}") for i in range(300)))
    claimed = [r.rollout_id for r in results if r is not None]
    assert len(claimed) == 200
    assert Counter(claimed) == Counter(r.rollout_id for r in queued)
    assert sum(r is None for r in results) == 100
    assert await store.dequeue_rollout() is None


async def test_concurrent_dequeuers_in_threads_get_each_rollout_exactly_once(store: LightningStore) -> None:
    queued = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=i) for i in range(150)])
    claimed: list[Optional[str]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(50)

    def worker() -> None:
        async def run() -> None:
            barrier.wait()
            for _ in range(4):
                result = await store.dequeue_rollout()
                with lock:
                    claimed.append(result.rollout_id if result is not None else None)

        asyncio.run(run())

    threads = [threading.Thread(target=worker) for _ in range(50)]
    await asyncio.to_thread(lambda: ([t.start() for t in threads], [t.join() for t in threads]))
    got = [rollout_id for rollout_id in claimed if rollout_id is not None]
    assert Counter(got) == Counter(r.rollout_id for r in queued)
    assert claimed.count(None) == 200 - 150


async def test_concurrent_enqueues_all_get_unique_ids(store: LightningStore) -> None:
    rollouts = await asyncio.gather(*(store.enqueue_rollout({"i": i}) for i in range(50)))
    ids = {r.rollout_id for r in rollouts}
    assert len(ids) == 50
    assert {r.rollout_id for r in await store.query_rollouts()} == ids


async def test_concurrent_enqueue_many_and_dequeue_many_never_duplicate(store: LightningStore) -> None:
    async def producer(batch: int) -> list[str]:
        rollouts = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=(batch, i)) for i in range(10)])
        return [r.rollout_id for r in rollouts]

    async def consumer() -> list[str]:
        got: list[str] = []
        for _ in range(20):
            got.extend(r.rollout_id for r in await store.dequeue_many_rollouts(limit=3))
            await asyncio.sleep(0)
        return got

    results = await asyncio.gather(*(producer(b) for b in range(8)), *(consumer() for _ in range(6)))
    produced = [rollout_id for ids in results[:8] for rollout_id in ids]
    consumed = [rollout_id for ids in results[8:] for rollout_id in ids]
    consumed += [r.rollout_id for r in await store.dequeue_many_rollouts(limit=1000)]
    assert len(consumed) == len(set(consumed))
    assert sorted(consumed) == sorted(produced)


async def test_concurrent_add_otel_span_allocates_every_sequence_id_once(store: LightningStore) -> None:
    started = await store.start_rollout("task")
    spans = await asyncio.gather(
        *(store.add_otel_span(started.rollout_id, started.attempt.attempt_id, make_readable_span()) for _ in range(30))
    )
    assert sorted(s.sequence_id for s in spans if s is not None) == list(range(1, 31))
    latest = await store.query_spans(started.rollout_id, "latest")
    assert len(latest) == 30


async def test_concurrent_resource_updates_are_all_stored(store: LightningStore) -> None:
    llm = LLM(endpoint="http://127.0.0.1:1/v1", model="m")
    names = [f"res-{i}" for i in range(50)]
    await asyncio.gather(*(store.update_resources(name, {"llm": llm}) for name in names))
    for name in names:
        assert await store.get_resources_by_id(name) is not None
    latest = await store.get_latest_resources()
    assert latest is not None and latest.resources_id in names


async def test_concurrent_updates_of_one_resource_id_lose_no_version(store: LightningStore) -> None:
    llm = LLM(endpoint="http://127.0.0.1:1/v1", model="m")
    results = await asyncio.gather(*(store.update_resources("shared", {"llm": llm}) for _ in range(20)))
    assert sorted(r.version for r in results) == list(range(1, 21))


async def test_threads_adding_resources_get_unique_ids(store: LightningStore) -> None:
    llm = LLM(endpoint="http://127.0.0.1:1/v1", model="m")
    ids: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        update = asyncio.run(store.add_resources({"llm": llm}))
        with lock:
            ids.append(update.resources_id)

    threads = [threading.Thread(target=worker) for _ in range(10)]
    await asyncio.to_thread(lambda: ([t.start() for t in threads], [t.join() for t in threads]))
    assert len(set(ids)) == 10
