"""The memory store is all-or-nothing: a failure injected after any data operation of a transaction leaves the
store exactly as it was, for every write operation."""

from __future__ import annotations

import pickle
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agentlightning.store import InMemoryLightningStore
from agentlightning.store.memory.storage import InMemoryStorage, _MemoryTransaction
from agentlightning.types import LLM, EnqueueRolloutRequest, RolloutConfig

from .helpers import make_readable_span, make_span


class InjectedFailure(Exception):
    pass


class _FailingTransaction(_MemoryTransaction):
    """Counts data operations and raises right after the `fail_at`-th one has changed the data."""

    def __init__(self, storage: InMemoryStorage, fail_at: int) -> None:
        super().__init__(storage)
        self.fail_at = fail_at
        self.calls = 0

    def __getattribute__(self, name: str) -> Any:
        attribute = super().__getattribute__(name)
        if name.startswith("_") or name in ("s", "undo", "fail_at", "calls") or not callable(attribute):
            return attribute

        async def counted(*args: Any, **kwargs: Any) -> Any:
            result = await attribute(*args, **kwargs)
            self.calls += 1
            if self.calls == self.fail_at:
                raise InjectedFailure(name)
            return result

        return counted


def _state(store: InMemoryLightningStore) -> dict[str, Any]:
    storage: InMemoryStorage = store._storage  # type: ignore[assignment]
    state = storage.__getstate__()
    budget = state.pop("budget")
    state["budget"] = (budget.total_bytes, dict(budget.bytes_by_rollout))
    state["queue"] = list(state["queue"])
    return state


async def _populated() -> tuple[InMemoryLightningStore, dict[str, str]]:
    store = InMemoryLightningStore(eviction_memory_threshold=10_000, safe_memory_threshold=5_000)
    ids: dict[str, str] = {}
    resources = await store.add_resources({"llm": LLM(endpoint="http://127.0.0.1:1/v1", model="m")})
    ids["resources"] = resources.resources_id
    await store.enqueue_rollout("queued-1")
    await store.enqueue_rollout("queued-2", config=RolloutConfig(timeout_seconds=3600))
    running = await store.start_rollout("running", config=RolloutConfig(max_attempts=3, timeout_seconds=3600))
    ids["running"], ids["attempt"] = running.rollout_id, running.attempt.attempt_id
    await store.add_span(make_span(running.rollout_id, running.attempt.attempt_id, 1))
    old = await store.start_rollout("old")
    await store.update_attempt(old.rollout_id, old.attempt.attempt_id, status="succeeded")
    for sequence in range(1, 4):  # spans near the eviction threshold: one more batch evicts
        await store.add_span(make_span(old.rollout_id, old.attempt.attempt_id, sequence, attributes={"x": "y" * 2500}))
    ids["old"] = old.rollout_id
    await store.update_worker("w1", {"cpu": 1})
    return store, ids


Operation = Callable[[InMemoryLightningStore, dict[str, str]], Awaitable[Any]]

WRITES: dict[str, Operation] = {
    "start_rollout": lambda s, i: s.start_rollout("new", worker_id="w2"),
    "enqueue_rollout": lambda s, i: s.enqueue_rollout("new"),
    "enqueue_many_rollouts": lambda s, i: s.enqueue_many_rollouts(
        [EnqueueRolloutRequest(input=1), EnqueueRolloutRequest(input=2)]
    ),
    "dequeue_many_rollouts": lambda s, i: s.dequeue_many_rollouts(limit=2, worker_id="w1"),
    "start_attempt": lambda s, i: s.start_attempt(i["running"], worker_id="w1"),
    "update_rollout": lambda s, i: s.update_rollout(i["running"], status="requeuing", metadata={"m": 1}),
    "update_attempt": lambda s, i: s.update_attempt(i["running"], i["attempt"], status="failed", worker_id="w1"),
    "add_span": lambda s, i: s.add_span(make_span(i["running"], i["attempt"], 5, attributes={"x": "y" * 2000})),
    "add_many_spans": lambda s, i: s.add_many_spans(
        [make_span(i["running"], i["attempt"], n, attributes={"x": "y" * 2000}) for n in (6, 7, 8)]
    ),
    "add_otel_span": lambda s, i: s.add_otel_span(i["running"], i["attempt"], make_readable_span()),
    "get_many_span_sequence_ids": lambda s, i: s.get_many_span_sequence_ids([(i["running"], i["attempt"])] * 2),
    "add_resources": lambda s, i: s.add_resources({"llm": LLM(endpoint="http://127.0.0.1:2/v1", model="n")}),
    "update_resources": lambda s, i: s.update_resources(
        i["resources"], {"llm": LLM(endpoint="http://127.0.0.1:3/v1", model="o")}
    ),
    "update_worker": lambda s, i: s.update_worker("w1", {"cpu": 2}),
}


async def _count_operations(operation: Operation) -> int:
    store, ids = await _populated()
    storage: InMemoryStorage = store._storage  # type: ignore[assignment]
    counter = _FailingTransaction(storage, fail_at=-1)
    storage._tx = counter
    await operation(store, ids)
    return counter.calls


@pytest.mark.parametrize("name", sorted(WRITES))
async def test_a_failure_after_any_data_operation_leaves_the_store_unchanged(name: str) -> None:
    operation = WRITES[name]
    total = await _count_operations(operation)
    assert total > 0
    base, ids = await _populated()
    for fail_at in range(1, total + 1):
        store: InMemoryLightningStore = pickle.loads(pickle.dumps(base))
        before = _state(store)
        storage: InMemoryStorage = store._storage  # type: ignore[assignment]
        storage._tx = _FailingTransaction(storage, fail_at)
        with pytest.raises(InjectedFailure):
            await operation(store, ids)
        assert _state(store) == before, f"{name} failing after data operation {fail_at} of {total}"
        storage._tx = _MemoryTransaction(storage)
        await operation(store, ids)  # the store still works after the failure


async def test_a_failure_mid_batch_stores_none_of_the_spans_and_keeps_the_byte_count() -> None:
    store, ids = await _populated()
    storage: InMemoryStorage = store._storage  # type: ignore[assignment]
    before = _state(store)

    def exploding_estimator(span: Any) -> int:
        if span.sequence_id == 7:
            raise InjectedFailure("estimator")
        return 100

    storage.budget.estimator = exploding_estimator
    with pytest.raises(InjectedFailure):
        await store.add_many_spans([make_span(ids["running"], ids["attempt"], n) for n in (6, 7, 8)])
    assert _state(store) == before
    assert len(await store.query_spans(ids["running"])) == 1
