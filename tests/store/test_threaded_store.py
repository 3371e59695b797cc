"""LightningStoreThreaded specifics: delegation, serialisation across threads and tasks, pass-through cases."""

from __future__ import annotations

import asyncio
import pickle
import threading
from typing import Any, Optional

from agentlightning.store import InMemoryLightningStore, LightningStore, LightningStoreCapabilities
from agentlightning.store.threading import LightningStoreThreaded
from agentlightning.types import ResourcesUpdate, Rollout

from .helpers import make_readable_span, make_span


class RecordingStore(LightningStore):
    """Records every call and returns a canned value; optionally slow, to expose overlapping calls."""

    def __init__(self, delay: float = 0.0) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.delay = delay
        self.active = 0
        self.max_active = 0
        self._guard = threading.Lock()

    async def _record(self, name: str, *args: Any, **kwargs: Any) -> str:
        with self._guard:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
            self.calls.append((name, args, kwargs))
        if self.delay:
            await asyncio.sleep(self.delay)
        with self._guard:
            self.active -= 1
        return f"result:{name}"

    def __getattribute__(self, name: str) -> Any:
        if name in _CONTRACT_METHODS:

            async def call(*args: Any, **kwargs: Any) -> str:
                return await self._record(name, *args, **kwargs)

            return call
        return super().__getattribute__(name)


_CONTRACT_METHODS = {
    "start_rollout", "enqueue_rollout", "enqueue_many_rollouts", "dequeue_rollout", "dequeue_many_rollouts",
    "start_attempt", "query_rollouts", "get_rollout_by_id", "update_rollout", "wait_for_rollouts", "query_attempts",
    "get_latest_attempt", "update_attempt", "add_span", "add_many_spans", "add_otel_span", "get_next_span_sequence_id",
    "get_many_span_sequence_ids", "query_spans", "add_resources", "update_resources", "get_resources_by_id",
    "get_latest_resources", "query_resources", "query_workers", "get_worker_by_id", "update_worker", "statistics",
}  # fmt: skip


async def test_every_method_is_delegated_with_its_arguments() -> None:
    inner = RecordingStore()
    store = LightningStoreThreaded(inner)
    span = make_span("ro-1", "at-1", 1)
    readable = make_readable_span()
    # Required arguments travel positionally; the others by name, and only when they differ from the default.
    calls = [
        (
            store.start_rollout("in", "train", "rs", None, {"m": 1}),
            ("start_rollout", ("in",), {"mode": "train", "resources_id": "rs", "metadata": {"m": 1}}),
        ),
        (store.enqueue_rollout("in"), ("enqueue_rollout", ("in",), {})),
        (store.dequeue_rollout(), ("dequeue_rollout", (), {})),
        (store.dequeue_rollout(worker_id="w"), ("dequeue_rollout", (), {"worker_id": "w"})),
        (store.start_attempt("ro-1"), ("start_attempt", ("ro-1",), {})),
        (store.query_rollouts(status=["queuing"]), ("query_rollouts", (), {"status": ["queuing"]})),
        (store.get_rollout_by_id("ro-1"), ("get_rollout_by_id", ("ro-1",), {})),
        (store.query_attempts("ro-1"), ("query_attempts", ("ro-1",), {})),
        (store.get_latest_attempt("ro-1"), ("get_latest_attempt", ("ro-1",), {})),
        (store.add_resources({}), ("add_resources", ({},), {})),
        (store.update_resources("rs", {}), ("update_resources", ("rs", {}), {})),
        (store.get_resources_by_id("rs"), ("get_resources_by_id", ("rs",), {})),
        (store.get_latest_resources(), ("get_latest_resources", (), {})),
        (store.add_span(span), ("add_span", (span,), {})),
        (
            store.add_otel_span("ro-1", "at-1", readable, 3),
            ("add_otel_span", ("ro-1", "at-1", readable), {"sequence_id": 3}),
        ),
        (store.get_next_span_sequence_id("ro-1", "at-1"), ("get_next_span_sequence_id", ("ro-1", "at-1"), {})),
        (store.query_spans("ro-1", "latest"), ("query_spans", ("ro-1",), {"attempt_id": "latest"})),
        (store.update_rollout("ro-1", status="failed"), ("update_rollout", ("ro-1",), {"status": "failed"})),
        (
            store.update_attempt("ro-1", "latest", worker_id="w"),
            ("update_attempt", ("ro-1", "latest"), {"worker_id": "w"}),
        ),
        (store.dequeue_many_rollouts(limit=2), ("dequeue_many_rollouts", (), {"limit": 2})),
        (store.update_worker("w", {"cpu": 1}), ("update_worker", ("w",), {"heartbeat_stats": {"cpu": 1}})),
        (store.statistics(), ("statistics", (), {})),
    ]
    for coro, expected in calls:
        assert await coro == f"result:{expected[0]}"
        assert inner.calls[-1] == expected


def test_calls_from_many_threads_never_overlap() -> None:
    inner = RecordingStore(delay=0.02)
    store = LightningStoreThreaded(inner)
    results: list[Any] = []

    def worker() -> None:
        results.append(asyncio.run(store.update_attempt("ro-1", "latest", status="running")))

    threads = [threading.Thread(target=worker) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert inner.max_active == 1
    assert results == ["result:update_attempt"] * 5


async def test_tasks_on_one_loop_are_serialised_without_deadlock() -> None:
    inner = RecordingStore(delay=0.01)
    store = LightningStoreThreaded(inner)
    await asyncio.wait_for(asyncio.gather(*(store.get_latest_resources() for _ in range(10))), 10)
    assert inner.max_active == 1


class OverlapDetectingStore(InMemoryLightningStore):
    """Not thread-safe: records how many of its calls run at once (the memory store's wait suspends inside)."""

    def __init__(self) -> None:
        super().__init__()
        self.active = 0
        self.max_active = 0
        self._guard = threading.Lock()

    @property
    def capabilities(self) -> LightningStoreCapabilities:
        return LightningStoreCapabilities(thread_safe=False, async_safe=True)

    async def _tracked(self, call: Any) -> Any:
        with self._guard:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            return await call
        finally:
            with self._guard:
                self.active -= 1

    async def wait_for_rollouts(self, *, rollout_ids: list[str], timeout: Optional[float] = None) -> list[Rollout]:
        return await self._tracked(super().wait_for_rollouts(rollout_ids=rollout_ids, timeout=timeout))

    async def update_attempt(self, *args: Any, **kwargs: Any) -> Any:
        return await self._tracked(super().update_attempt(*args, **kwargs))


async def test_wait_for_rollouts_never_runs_beside_another_call_of_a_store_that_is_not_thread_safe() -> None:
    inner = OverlapDetectingStore()
    store = LightningStoreThreaded(inner)
    started = await store.start_rollout("task")
    waiter = asyncio.create_task(store.wait_for_rollouts(rollout_ids=[started.rollout_id, "ro-unknown"], timeout=30))
    await asyncio.sleep(0)

    def finish() -> None:
        asyncio.run(store.update_attempt(started.rollout_id, started.attempt.attempt_id, status="succeeded"))

    await asyncio.to_thread(finish)
    finished = await asyncio.wait_for(waiter, 30)
    assert [rollout.rollout_id for rollout in finished] == [started.rollout_id]
    assert inner.max_active == 1


async def test_wait_for_rollouts_on_a_serialised_store_honours_its_timeout() -> None:
    store = LightningStoreThreaded(OverlapDetectingStore())
    started = await store.start_rollout("task")
    assert await store.wait_for_rollouts(rollout_ids=[started.rollout_id], timeout=0.05) == []
    assert await store.wait_for_rollouts(rollout_ids=["ro-unknown"]) == []  # unknown ids are not waited for


class SuspendingStore(InMemoryLightningStore):
    """Not thread-safe, and its get_latest_resources suspends until `release` is set (real I/O would)."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    @property
    def capabilities(self) -> LightningStoreCapabilities:
        return LightningStoreCapabilities(thread_safe=False, async_safe=True)

    async def get_latest_resources(self) -> Any:
        self.entered.set()
        while not self.release.is_set():
            await asyncio.sleep(0.005)
        return await super().get_latest_resources()


def test_a_suspended_call_in_one_thread_does_not_freeze_the_event_loop_of_another() -> None:
    inner = SuspendingStore()
    store = LightningStoreThreaded(inner)
    holder = threading.Thread(target=lambda: asyncio.run(store.get_latest_resources()), daemon=True)
    holder.start()
    assert inner.entered.wait(30)

    async def server_loop() -> bool:
        # A call waiting for the lock must leave this loop free: the probe below runs and lets the holder finish.
        waiting = asyncio.create_task(store.statistics())
        await asyncio.sleep(0)

        async def probe() -> None:
            inner.release.set()

        await asyncio.wait_for(probe(), 30)
        await asyncio.wait_for(waiting, 30)
        return True

    result: list[bool] = []
    server = threading.Thread(target=lambda: result.append(asyncio.run(server_loop())), daemon=True)
    server.start()
    server.join(30)
    froze = server.is_alive()
    inner.release.set()  # unblocks everything if the loop was frozen
    holder.join(30)
    server.join(30)
    assert not froze, "the waiting call froze its event loop"
    assert result == [True]


class CounterStore(InMemoryLightningStore):
    """Not thread-safe on purpose: a read-modify-write with a suspension in the middle."""

    def __init__(self) -> None:
        super().__init__()
        self.counter = 0

    @property
    def capabilities(self) -> LightningStoreCapabilities:
        return LightningStoreCapabilities(thread_safe=False, async_safe=True)

    async def update_resources(self, resources_id: str, resources: Any) -> ResourcesUpdate:
        current = self.counter
        await asyncio.sleep(0.001)
        self.counter = current + 1
        return await super().update_resources(f"res-{self.counter}", resources)


def test_read_modify_write_from_threads_loses_no_update() -> None:
    store = LightningStoreThreaded(CounterStore())
    ids: list[str] = []

    def worker() -> None:
        ids.append(asyncio.run(store.update_resources("ignored", {})).resources_id)

    threads = [threading.Thread(target=worker) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert store.store.counter == 20  # type: ignore[attr-defined]
    assert sorted(ids) == sorted(f"res-{i}" for i in range(1, 21))


def test_capabilities_are_thread_safe_and_keep_the_inner_ones() -> None:
    store = LightningStoreThreaded(RecordingStore())
    assert store.capabilities == {"thread_safe": True, "async_safe": True, "zero_copy": False, "otlp_traces": False}


async def test_wrapper_pickles_with_a_snapshot_of_its_store() -> None:
    store = LightningStoreThreaded(InMemoryLightningStore())
    queued = await store.enqueue_rollout("task")
    clone = pickle.loads(pickle.dumps(store))
    assert isinstance(clone.store, InMemoryLightningStore)
    assert (await clone.dequeue_rollout()).rollout_id == queued.rollout_id  # type: ignore[union-attr]
    assert await clone.dequeue_rollout() is None
    assert (await store.dequeue_rollout()) is not None
