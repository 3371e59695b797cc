"""Leaving a trace context waits (at most `late_span_timeout`) for spans that started inside it and end late, as
when a framework closes its message stream lazily; spans still open after the bound are stored when they end."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
from opentelemetry import trace as trace_api

from agentlightning.store import InMemoryLightningStore
from agentlightning.tracer.otel import OtelTracer

from .conftest import FlakyStore


async def new_attempt(store: InMemoryLightningStore) -> tuple[str, str]:
    rollout = await store.start_rollout(input=None)
    return rollout.rollout_id, rollout.attempt.attempt_id


async def names(store: InMemoryLightningStore, rollout_id: str) -> list[str]:
    return sorted(span.name for span in await store.query_spans(rollout_id))


async def test_a_span_ended_by_a_callback_after_the_block_is_stored_before_the_context_returns(
    tracer: OtelTracer, store: FlakyStore
) -> None:
    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
        span = trace_api.get_tracer("framework").start_span("lazy")
        asyncio.get_running_loop().call_soon(span.end)
    assert await names(store, rollout_id) == ["lazy"]


async def test_a_message_stream_closed_by_the_loops_finalizer_is_stored_before_the_context_returns(
    tracer: OtelTracer, store: FlakyStore
) -> None:
    otel = trace_api.get_tracer("framework")

    async def on_messages_stream() -> AsyncIterator[int]:
        with otel.start_as_current_span("solver.on_messages_stream"):
            yield 1
            yield 2

    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
        stream = on_messages_stream()
        async for _ in stream:
            break  # the consumer stops early; the generator is closed later by the event loop
        del stream
    assert await names(store, rollout_id) == ["solver.on_messages_stream"]


def test_the_sync_context_waits_for_a_span_ended_by_another_thread(store: FlakyStore) -> None:
    import threading

    tracer = OtelTracer(flush_interval=0.05)
    tracer.init_worker(0, store)
    try:
        rollout_id, attempt_id = asyncio.run(new_attempt(store))
        with tracer._trace_context_sync(rollout_id=rollout_id, attempt_id=attempt_id):
            span = trace_api.get_tracer("framework").start_span("worker")
            threading.Timer(0.05, span.end).start()
        assert asyncio.run(names(store, rollout_id)) == ["worker"]
    finally:
        tracer.teardown_worker(0)


async def test_a_span_that_never_ends_in_time_is_reported_and_stored_when_it_ends(
    store: FlakyStore, caplog: pytest.LogCaptureFixture
) -> None:
    tracer = OtelTracer(late_span_timeout=0.05, flush_interval=0.05)
    tracer.init_worker(0, store)
    try:
        rollout_id, attempt_id = await new_attempt(store)
        with caplog.at_level(logging.WARNING):
            async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
                forever = trace_api.get_tracer("framework").start_span("background job")
        assert "still open (background job)" in caplog.text
        assert await names(store, rollout_id) == []
        forever.end()
        assert tracer.flush(timeout=10)
        assert await names(store, rollout_id) == ["background job"]
    finally:
        tracer.teardown_worker(0)


def test_runner_threads_of_one_process_each_wait_for_their_own_late_spans(store: FlakyStore) -> None:
    import threading

    tracer = OtelTracer(flush_interval=0.05)
    tracer.init_worker(0, store)
    results: dict[int, list[str]] = {}

    def runner(index: int) -> None:
        async def one_rollout() -> None:
            rollout_id, attempt_id = await new_attempt(store)
            async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
                otel = trace_api.get_tracer("framework")
                with otel.start_as_current_span(f"step-{index}"):
                    pass
                late = otel.start_span(f"late-{index}")
                asyncio.get_running_loop().call_soon(late.end)
            results[index] = await names(store, rollout_id)

        asyncio.run(one_rollout())

    try:
        threads = [threading.Thread(target=runner, args=(index,)) for index in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert results == {index: [f"late-{index}", f"step-{index}"] for index in range(4)}
    finally:
        tracer.teardown_worker(0)
