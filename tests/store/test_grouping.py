"""Group commit (`GroupedCall`): concurrent calls of one operation share a run, in arrival order, and each call gets
the outcome it would have had alone."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from agentlightning.store.core.grouping import GroupedCall, Outcome, Rider, RiderConflict, current_riders, riding
from agentlightning.store.errors import RolloutNotFoundError, StoreError


class Recorder:
    """A run_group that records its groups and the riders it saw, and can be held open."""

    def __init__(self) -> None:
        self.groups: list[list[Any]] = []
        self.riders: list[tuple[Rider, ...]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail_with: dict[Any, BaseException] = {}
        self.group_error: BaseException | None = None

    async def __call__(self, items: list[Any]) -> Sequence[Outcome[Any]]:
        self.groups.append(list(items))
        self.riders.append(current_riders())
        await self.gate.wait()
        if len(items) > 1 and self.group_error is not None:
            raise self.group_error
        for item in items:
            if item in self.fail_with and len(items) > 1:
                raise self.fail_with[item]
        return [self.fail_with.get(item, f"done {item}") for item in items]


async def _start(grouped: GroupedCall[Any, Any], items: list[Any]) -> list[asyncio.Task[Any]]:
    tasks = []
    for item in items:
        tasks.append(asyncio.create_task(grouped(item)))
        await asyncio.sleep(0)  # arrival order
    return tasks


async def test_a_lone_call_runs_at_once_as_a_group_of_one() -> None:
    recorder = Recorder()
    grouped = GroupedCall(recorder)
    assert await grouped("a") == "done a"
    assert recorder.groups == [["a"]]


async def test_calls_arriving_while_a_group_runs_form_the_next_group_in_arrival_order() -> None:
    recorder = Recorder()
    recorder.gate.clear()
    grouped = GroupedCall(recorder)
    tasks = await _start(grouped, ["a", "b", "c", "d"])
    recorder.gate.set()
    assert await asyncio.gather(*tasks) == ["done a", "done b", "done c", "done d"]
    assert recorder.groups == [["a"], ["b", "c", "d"]]
    assert (grouped.groups_run, grouped.calls_run) == (2, 4)


async def test_groups_are_no_larger_than_max_group() -> None:
    recorder = Recorder()
    recorder.gate.clear()
    grouped = GroupedCall(recorder, max_group=2)
    tasks = await _start(grouped, ["a", "b", "c", "d", "e"])
    recorder.gate.set()
    await asyncio.gather(*tasks)
    assert recorder.groups == [["a"], ["b", "c"], ["d", "e"]]


async def test_a_group_failing_before_writing_reruns_each_call_alone_so_only_the_faulty_one_fails() -> None:
    recorder = Recorder()
    recorder.gate.clear()
    recorder.fail_with["bad"] = RolloutNotFoundError("ro-missing")
    grouped = GroupedCall(recorder)
    tasks = await _start(grouped, ["a", "b", "bad", "c"])
    recorder.gate.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert results[:2] == ["done a", "done b"] and results[3] == "done c"
    assert isinstance(results[2], RolloutNotFoundError)
    assert recorder.groups == [["a"], ["b", "bad", "c"], ["b"], ["bad"], ["c"]]


async def test_a_group_failing_otherwise_fails_every_call_of_the_group_without_rerunning_them() -> None:
    # A lost connection may have hit the commit: running the calls again could apply them twice.
    recorder = Recorder()
    recorder.gate.clear()
    recorder.group_error = StoreError("connection lost")
    grouped = GroupedCall(recorder)
    tasks = await _start(grouped, ["a", "b", "c"])
    recorder.gate.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert results[0] == "done a"
    assert all(isinstance(result, StoreError) and str(result) == "connection lost" for result in results[1:])
    assert recorder.groups == [["a"], ["b", "c"]]


async def test_a_call_cancelled_while_waiting_never_runs() -> None:
    recorder = Recorder()
    recorder.gate.clear()
    grouped = GroupedCall(recorder)
    tasks = await _start(grouped, ["a", "b", "c"])
    tasks[1].cancel()
    recorder.gate.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(results[1], asyncio.CancelledError)
    assert recorder.groups == [["a"], ["c"]]


async def test_the_riders_of_waiting_calls_travel_into_their_group() -> None:
    recorder = Recorder()
    recorder.gate.clear()
    grouped = GroupedCall(recorder)
    riders = [Rider("INSERT", (name,), conflict_table="t") for name in ("r1", "r2")]

    async def call_with(item: str, rider: Rider | None) -> Any:
        if rider is None:
            return await grouped(item)
        with riding(rider):
            return await grouped(item)

    first = asyncio.create_task(call_with("a", None))
    await asyncio.sleep(0)
    second = asyncio.create_task(call_with("b", riders[0]))
    third = asyncio.create_task(call_with("c", riders[1]))
    await asyncio.sleep(0)
    recorder.gate.set()
    await asyncio.gather(first, second, third)
    assert recorder.riders == [(), tuple(riders)]


async def test_a_rider_conflict_in_a_group_fails_only_the_call_that_carried_it() -> None:
    rider = Rider("INSERT", ("k",), conflict_table="idempotency")

    async def run_group(items: list[str]) -> list[Outcome[str]]:
        if any(r is rider for r in current_riders()):
            raise RiderConflict(rider)
        return [f"done {item}" for item in items]

    gate = asyncio.Event()

    async def holder(items: list[str]) -> list[Outcome[str]]:
        await gate.wait()
        return await run_group(items)

    grouped = GroupedCall(holder)
    first = asyncio.create_task(grouped("a"))
    await asyncio.sleep(0)

    async def with_rider() -> str:
        with riding(rider):
            return await grouped("b")

    second = asyncio.create_task(with_rider())
    third = asyncio.create_task(grouped("c"))
    await asyncio.sleep(0)
    gate.set()
    results = await asyncio.gather(first, second, third, return_exceptions=True)
    assert results[0] == "done a" and results[2] == "done c"
    assert isinstance(results[1], RiderConflict)


def test_group_limits_must_be_positive() -> None:
    with pytest.raises(ValueError):
        GroupedCall(Recorder(), max_group=0)


@pytest.mark.postgres
async def test_a_postgres_store_runs_concurrent_writes_of_every_kind_in_shared_transactions() -> None:
    # (SQLite's transactions run without yielding to the event loop: its calls never overlap to be grouped.)
    from agentlightning.store.postgres.store import PostgresLightningStore
    from agentlightning.types import EnqueueRolloutRequest

    from .helpers import make_span
    from .postgres_support import drop_schema, fresh_schema_name, require_postgres

    schema = fresh_schema_name()
    store = PostgresLightningStore(require_postgres(), schema=schema)
    try:
        await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=i) for i in range(20)])
        claims = [await store.dequeue_rollout(worker_id=f"w{i}") for i in range(20)]
        spans = [make_span(claim.rollout_id, claim.attempt.attempt_id, 1) for claim in claims if claim is not None]
        writes = store._writes
        assert writes is not None
        before = (writes.groups_run, writes.calls_run)
        results = await asyncio.gather(
            *(store.add_span(span) for span in spans[:10]),
            *(store.update_attempt(claim.rollout_id, "latest", status="succeeded") for claim in claims[10:] if claim),
            *(store.enqueue_rollout({"more": i}) for i in range(5)),
            *(store.dequeue_rollout(worker_id=f"late-{i}") for i in range(3)),
        )
        assert all(result is not None for result in results[:25])  # (a dequeue may come before the enqueues)
        assert [result.status for result in results[10:20]] == ["succeeded"] * 10  # type: ignore[union-attr]
        calls, groups = writes.calls_run - before[1], writes.groups_run - before[0]
        assert calls == 28 and groups < 28
    finally:
        await store.close()
        await asyncio.to_thread(drop_schema, schema)
