"""`LightningSpanProcessor` used on its own, as in v0.2: added to an application's provider, it collects only sampled
spans with a span context, `with_context(store=, rollout_id=, attempt_id=)` writes them to the store before the block
returns, many threads may end spans at once, and a store write that hangs is bounded by a timeout."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Tracer

from agentlightning.store import InMemoryLightningStore
from agentlightning.tracer.processor import LightningSpanProcessor
from agentlightning.types import Span


class RecordOnlySampler(Sampler):
    """Spans are recorded (the processor sees them) but not sampled."""

    def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
        return SamplingResult(Decision.RECORD_ONLY)

    def get_description(self) -> str:
        return "record-only"


def provider_with(processor: LightningSpanProcessor, sampler: Any = None) -> tuple[TracerProvider, Tracer]:
    provider = TracerProvider(sampler=sampler) if sampler is not None else TracerProvider()
    provider.add_span_processor(processor)
    return provider, provider.get_tracer("app")


@pytest.fixture
def processor() -> Iterator[LightningSpanProcessor]:
    instance = LightningSpanProcessor(flush_timeout=30.0)
    yield instance
    instance.close_writer(timeout=5.0)


async def new_attempt(store: InMemoryLightningStore) -> tuple[str, str]:
    rollout = await store.start_rollout(input=None)
    return rollout.rollout_id, rollout.attempt.attempt_id


async def test_spans_of_with_context_are_in_the_store_when_the_block_returns(processor: LightningSpanProcessor) -> None:
    store = InMemoryLightningStore()
    _, tracer = provider_with(processor)
    rollout_id, attempt_id = await new_attempt(store)
    with processor.with_context(store=store, rollout_id=rollout_id, attempt_id=attempt_id) as same:
        assert same is processor
        with tracer.start_as_current_span("outer"), tracer.start_as_current_span("inner"):
            pass
    stored = await store.query_spans(rollout_id)
    assert sorted(span.name for span in stored) == ["inner", "outer"]
    assert [span.name for span in processor.spans()] == ["inner", "outer"]


async def test_only_sampled_spans_with_a_span_context_are_collected(processor: LightningSpanProcessor) -> None:
    store = InMemoryLightningStore()
    _, unsampled_tracer = provider_with(processor, RecordOnlySampler())
    rollout_id, attempt_id = await new_attempt(store)
    with processor.with_context(store, rollout_id, attempt_id):
        with unsampled_tracer.start_as_current_span("recorded but not sampled"):
            pass
        processor.on_end(ReadableSpan(name="no context", context=None))
    assert processor.spans() == [] and await store.query_spans(rollout_id) == []


async def test_concurrent_on_end_from_many_threads_stores_every_span(processor: LightningSpanProcessor) -> None:
    store = InMemoryLightningStore()
    _, tracer = provider_with(processor)
    rollout_id, attempt_id = await new_attempt(store)
    start = threading.Barrier(8)

    def burst(worker: int) -> None:
        start.wait()
        for index in range(50):
            with tracer.start_as_current_span(f"w{worker}-{index}"):
                pass

    with processor.with_context(store, rollout_id, attempt_id):
        threads = [threading.Thread(target=burst, args=(worker,)) for worker in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    stored = await store.query_spans(rollout_id)
    assert len(stored) == 400 and len({span.span_id for span in stored}) == 400
    assert len(processor.spans()) == 400


class HangingStore(InMemoryLightningStore):
    """A store whose first `hangs` span writes never answer (a lost connection without a timeout)."""

    def __init__(self, hangs: int) -> None:
        super().__init__()
        self.hangs = hangs
        self.calls = 0

    async def add_many_spans(self, spans: Sequence[Span]) -> Sequence[Span]:
        self.calls += 1
        if self.calls <= self.hangs:
            await asyncio.Event().wait()  # never set: only a timeout ends this call
        return await super().add_many_spans(spans)


async def test_a_store_write_that_hangs_times_out_and_is_retried() -> None:
    store = HangingStore(hangs=1)
    processor = LightningSpanProcessor(store_timeout=0.2, flush_timeout=30.0)
    try:
        _, tracer = provider_with(processor)
        rollout_id, attempt_id = await new_attempt(store)
        with processor.with_context(store, rollout_id, attempt_id), tracer.start_as_current_span("step"):
            pass
        assert [span.name for span in await store.query_spans(rollout_id)] == ["step"]
        assert store.calls == 2
    finally:
        processor.close_writer(timeout=5.0)


async def test_a_store_that_keeps_hanging_delays_the_caller_only_up_to_the_flush_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = HangingStore(hangs=1_000_000)
    processor = LightningSpanProcessor(store_timeout=0.1, flush_timeout=0.3)
    try:
        _, tracer = provider_with(processor)
        rollout_id, attempt_id = await new_attempt(store)
        with (
            caplog.at_level(logging.ERROR),
            processor.with_context(store, rollout_id, attempt_id),
            tracer.start_as_current_span("step"),
        ):
            pass
        assert "were not all stored within 0.3 s" in caplog.text
        assert [span.name for span in processor.spans()] == ["step"]  # collected even though not stored
    finally:
        processor.close_writer(timeout=0.5)
