"""Store contract: atomicity under many concurrent callers, as tasks and as threads (every backend)."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Optional

from agentlightning.store import LightningStore, RolloutNotFoundError
from agentlightning.types import LLM, EnqueueRolloutRequest, Span

from .helpers import make_readable_span, make_span


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


# Durable stores run concurrent span ingests, claims and attempt updates in shared transactions (group commit):
# each call must still get exactly what it would have had alone.


async def _claimed(store: LightningStore, count: int) -> list[tuple[str, str]]:
    await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=i) for i in range(count)])
    claims = [await store.dequeue_rollout(worker_id=f"w{i}") for i in range(count)]
    return [(claim.rollout_id, claim.attempt.attempt_id) for claim in claims if claim is not None]


async def test_concurrent_add_span_calls_each_get_their_own_span(store: LightningStore) -> None:
    claims = await _claimed(store, 8)
    spans = [make_span(rollout_id, attempt_id, n) for rollout_id, attempt_id in claims for n in (1, 2, 3)]
    added = await asyncio.gather(*(store.add_span(span) for span in spans))
    assert [span.span_id if span is not None else None for span in added] == [span.span_id for span in spans]
    for rollout_id, _ in claims:
        assert [span.sequence_id for span in await store.query_spans(rollout_id)] == [1, 2, 3]
        assert (await store.get_rollout_by_id(rollout_id)).status == "running"  # type: ignore[union-attr]


async def test_of_two_concurrent_add_span_calls_with_one_key_only_one_adds_it(store: LightningStore) -> None:
    (rollout_id, attempt_id), *_ = await _claimed(store, 1)
    span = make_span(rollout_id, attempt_id, 1)
    others = [make_span(rollout_id, attempt_id, n) for n in (2, 3)]
    added = await asyncio.gather(store.add_span(others[0]), store.add_span(span), store.add_span(span.model_copy()))
    assert added[0] is not None and (added[1] is None) != (added[2] is None)
    assert len(await store.query_spans(rollout_id)) == 2


async def test_a_concurrent_add_span_for_an_unknown_rollout_fails_alone(store: LightningStore) -> None:
    claims = await _claimed(store, 3)
    spans = [make_span(rollout_id, attempt_id, 1) for rollout_id, attempt_id in claims]
    spans.insert(1, make_span("ro-unknown", "at-unknown", 1))
    results = await asyncio.gather(*(store.add_span(span) for span in spans), return_exceptions=True)
    assert isinstance(results[1], RolloutNotFoundError)
    assert [result.span_id for result in results if isinstance(result, Span)] == [
        span.span_id for span in spans if span.rollout_id != "ro-unknown"
    ]


async def test_concurrent_attempt_updates_each_get_their_own_result_and_an_unknown_one_fails_alone(
    store: LightningStore,
) -> None:
    claims = await _claimed(store, 6)
    calls = [store.update_attempt(rollout_id, attempt_id, status="succeeded") for rollout_id, attempt_id in claims]
    calls.insert(2, store.update_attempt("ro-unknown", "latest", status="failed"))
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert isinstance(results[2], RolloutNotFoundError)
    updated = [result for result in results if not isinstance(result, BaseException)]
    assert [(attempt.rollout_id, attempt.status) for attempt in updated] == [
        (rollout_id, "succeeded") for rollout_id, _ in claims
    ]
    for rollout_id, _ in claims:
        assert (await store.get_rollout_by_id(rollout_id)).status == "succeeded"  # type: ignore[union-attr]


async def test_concurrent_updates_of_one_attempt_each_return_the_attempt_as_they_left_it(store: LightningStore) -> None:
    (rollout_id, attempt_id), *_ = await _claimed(store, 1)
    results = await asyncio.gather(
        *(store.update_attempt(rollout_id, attempt_id, metadata={"step": i}) for i in range(10))
    )
    assert [attempt.metadata for attempt in results] == [{"step": i} for i in range(10)]
    stored = await store.get_latest_attempt(rollout_id)
    assert stored is not None and stored.metadata in [{"step": i} for i in range(10)]


async def test_concurrent_dequeues_leave_each_worker_busy_with_its_own_claim(store: LightningStore) -> None:
    await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=i) for i in range(6)])
    claims = await asyncio.gather(*(store.dequeue_rollout(worker_id=f"worker-{i}") for i in range(8)))
    for i, claim in enumerate(claims):
        worker = await store.get_worker_by_id(f"worker-{i}")
        assert worker is not None and worker.last_dequeue_time is not None
        if claim is None:
            assert worker.current_rollout_id is None
        else:
            assert (worker.status, worker.current_rollout_id) == ("busy", claim.rollout_id)
    assert sum(claim is not None for claim in claims) == 6
