"""InMemoryLightningStore specifics: memory thresholds, span eviction, size estimation, URLs and event loops."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from agentlightning.store import InMemoryLightningStore, SpansEvictedError, store_from_url
from agentlightning.store.errors import InvalidArgumentError
from agentlightning.store.memory import store as memory_module
from agentlightning.store.memory.store import estimate_model_size, estimate_span_size
from agentlightning.types import Span

from .helpers import make_rich_span, make_span


@pytest.fixture
def capacity_100(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(memory_module, "_detect_total_memory_bytes", lambda: 100)
    yield


def test_integer_thresholds_are_bytes() -> None:
    store = InMemoryLightningStore(eviction_memory_threshold=150, safe_memory_threshold=20)
    assert (store._eviction_threshold_bytes, store._safe_threshold_bytes) == (150, 20)


def test_float_thresholds_are_fractions_of_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory_module, "_detect_total_memory_bytes", lambda: 200)
    store = InMemoryLightningStore(eviction_memory_threshold=0.6, safe_memory_threshold=0.0)
    assert (store._eviction_threshold_bytes, store._safe_threshold_bytes) == (120, 0)


def test_default_thresholds_are_70_and_56_percent_of_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory_module, "_detect_total_memory_bytes", lambda: 1000)
    store = InMemoryLightningStore()
    assert (store._eviction_threshold_bytes, store._safe_threshold_bytes) == (700, 560)


def test_safe_threshold_must_be_below_the_eviction_threshold() -> None:
    with pytest.raises(ValueError, match="safe_memory_threshold must be smaller"):
        InMemoryLightningStore(eviction_memory_threshold=50, safe_memory_threshold=100)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"eviction_memory_threshold": 1.5}, "greater than 0 and at most 1"),
        ({"eviction_memory_threshold": 0.0}, "greater than 0 and at most 1"),
        ({"eviction_memory_threshold": -5}, "non-negative"),
        ({"eviction_memory_threshold": 0}, "at least 1 bytes"),
        ({"eviction_memory_threshold": 100, "safe_memory_threshold": 1.2}, "between 0 and 1"),
        ({"eviction_memory_threshold": "lots"}, "float ratio or an int"),
    ],
)
def test_invalid_thresholds_are_rejected(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        InMemoryLightningStore(**kwargs)


def test_a_non_positive_memory_capacity_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory_module, "_detect_total_memory_bytes", lambda: 0)
    with pytest.raises(ValueError, match="capacity"):
        InMemoryLightningStore()


async def test_eviction_drops_the_oldest_rollouts_down_to_the_safe_threshold(capacity_100: None) -> None:
    store = InMemoryLightningStore(
        eviction_memory_threshold=0.5, safe_memory_threshold=0.05, span_size_estimator=lambda span: 20
    )
    started = [await store.start_rollout(i) for i in range(4)]
    for rollout in started:
        await store.add_span(make_span(rollout.rollout_id, rollout.attempt.attempt_id, 1))
    for rollout in started[:3]:
        with pytest.raises(SpansEvictedError, match=f"Spans for rollout {rollout.rollout_id} have been evicted"):
            await store.query_spans(rollout.rollout_id)
    assert len(await store.query_spans(started[3].rollout_id)) == 1
    stats = await store.statistics()
    assert stats["total_span_bytes"] == 20


async def test_eviction_prefers_finished_rollouts(capacity_100: None) -> None:
    store = InMemoryLightningStore(
        eviction_memory_threshold=0.5, safe_memory_threshold=0.4, span_size_estimator=lambda span: 20
    )
    old_running = await store.start_rollout("old")
    newer_finished = await store.start_rollout("newer")
    await store.add_span(make_span(old_running.rollout_id, old_running.attempt.attempt_id, 1))
    await store.add_span(make_span(newer_finished.rollout_id, newer_finished.attempt.attempt_id, 1))
    await store.update_attempt(newer_finished.rollout_id, "latest", status="succeeded")
    third = await store.start_rollout("third")
    await store.add_span(make_span(third.rollout_id, third.attempt.attempt_id, 1))
    with pytest.raises(SpansEvictedError):
        await store.query_spans(newer_finished.rollout_id)
    assert len(await store.query_spans(old_running.rollout_id)) == 1


async def test_spans_arriving_after_eviction_still_count_as_heartbeats(capacity_100: None) -> None:
    store = InMemoryLightningStore(
        eviction_memory_threshold=0.5, safe_memory_threshold=0.0, span_size_estimator=lambda span: 60
    )
    started = await store.start_rollout("task")
    await store.add_span(make_span(started.rollout_id, started.attempt.attempt_id, 1))
    late = await store.add_span(make_span(started.rollout_id, started.attempt.attempt_id, 2))
    assert late is not None
    with pytest.raises(SpansEvictedError):
        await store.query_spans(started.rollout_id)
    attempt = await store.get_latest_attempt(started.rollout_id)
    assert attempt is not None and attempt.status == "running"


async def test_an_evicted_rollout_that_keeps_receiving_spans_holds_no_memory_for_them(capacity_100: None) -> None:
    store = InMemoryLightningStore(
        eviction_memory_threshold=0.5, safe_memory_threshold=0.0, span_size_estimator=lambda span: 60
    )
    started = await store.start_rollout("long-running")
    await store.add_span(make_span(started.rollout_id, started.attempt.attempt_id, 1))  # evicted at once
    storage = store._storage
    for sequence in range(2, 2002):
        assert await store.add_span(make_span(started.rollout_id, started.attempt.attempt_id, sequence)) is not None
    assert storage.span_keys == {}  # type: ignore[attr-defined]
    assert storage.spans == {}  # type: ignore[attr-defined]
    assert (await store.statistics())["total_span_bytes"] == 0


class _Inner(BaseModel):
    values: list[int]
    mapping: dict[str, str]


class _Outer(BaseModel):
    name: str
    inner: _Inner
    items: tuple[int, ...]


def test_estimate_model_size_sums_getsizeof_recursively() -> None:
    inner = _Inner(values=[1, 2, 3], mapping={"k": "value"})
    outer = _Outer(name="outer", inner=inner, items=(4, 5))
    size = sys.getsizeof
    expected_inner = size(inner) + size(inner.values) + sum(map(size, inner.values))
    expected_inner += size(inner.mapping) + size("value")
    expected = size(outer) + size("outer") + expected_inner + size(outer.items) + size(4) + size(5)
    assert estimate_model_size(outer) == expected


def test_estimate_model_size_of_a_span_counts_every_field() -> None:
    span = make_span("ro-000000000001", "at-00000001", 1)

    def manual(value: Any) -> int:
        if isinstance(value, BaseModel):
            return sys.getsizeof(value) + sum(manual(v) for v in value.__dict__.values())
        if isinstance(value, dict):
            return sys.getsizeof(value) + sum(manual(v) for v in value.values())
        if isinstance(value, (list, tuple, set)):
            return sys.getsizeof(value) + sum(manual(v) for v in value)
        return sys.getsizeof(value)

    assert estimate_model_size(span) == manual(span)


@pytest.mark.parametrize(
    "span",
    [
        make_span("ro-000000000001", "at-00000001", 1),
        make_rich_span("ro-000000000001", "at-00000001", 1),
        Span.from_attributes(attributes={"ids": list(range(500)), "text": "x" * 5000}, rollout_id="r", attempt_id="a"),
    ],
)
def test_default_span_size_estimate_is_close_to_the_exact_one(span: Span) -> None:
    exact = estimate_model_size(span)
    assert abs(estimate_span_size(span) - exact) <= 0.1 * exact


def test_memory_url_opens_a_fresh_store() -> None:
    first = store_from_url("memory://")
    second = store_from_url("memory://")
    assert isinstance(first, InMemoryLightningStore) and first is not second


def test_malformed_memory_url_is_rejected() -> None:
    with pytest.raises(InvalidArgumentError, match="memory://"):
        store_from_url("memory://somewhere/else")


def test_unknown_url_scheme_is_rejected() -> None:
    with pytest.raises(InvalidArgumentError, match="Unknown store URL scheme 'ftp'"):
        store_from_url("ftp://example")
    with pytest.raises(InvalidArgumentError, match="Invalid store URL"):
        store_from_url("no-scheme")


def test_store_is_usable_from_a_new_event_loop_in_another_thread() -> None:
    store = InMemoryLightningStore()
    created = asyncio.run(store.enqueue_rollout("task"))
    seen: list[Any] = []

    def read() -> None:
        seen.append(asyncio.run(store.get_rollout_by_id(created.rollout_id)))

    thread = threading.Thread(target=read)
    thread.start()
    thread.join()
    assert seen[0] is not None and seen[0].rollout_id == created.rollout_id


def test_a_waiter_on_one_loop_is_woken_by_a_completion_from_another_thread() -> None:
    store = InMemoryLightningStore()
    started = asyncio.run(store.start_rollout("task"))

    def finish() -> None:
        asyncio.run(store.update_attempt(started.rollout_id, "latest", status="succeeded"))

    async def wait() -> list[Any]:
        timer = threading.Timer(0.1, finish)
        timer.start()
        try:
            return await store.wait_for_rollouts(rollout_ids=[started.rollout_id])
        finally:
            timer.join()

    done = asyncio.run(asyncio.wait_for(wait(), 10))
    assert [r.status for r in done] == ["succeeded"]


async def test_health_scans_are_skipped_until_a_deadline_can_have_passed() -> None:
    store = InMemoryLightningStore()
    await store.start_rollout("task")
    storage = store._storage
    assert not storage.health_scan_due(__import__("time").time())
    from agentlightning.types import RolloutConfig

    started = await store.start_rollout("task", config=RolloutConfig(timeout_seconds=100))
    deadline = storage.next_health_deadline()
    assert deadline is not None and abs(deadline - (started.attempt.start_time + 100)) < 1e-6


async def test_statistics_report_memory_figures() -> None:
    store = InMemoryLightningStore(eviction_memory_threshold=1000, safe_memory_threshold=500)
    stats = await store.statistics()
    assert stats["eviction_threshold_bytes"] == 1000
    assert stats["safe_threshold_bytes"] == 500
    assert stats["memory_capacity_bytes"] > 0
    assert stats["total_span_bytes"] == 0
