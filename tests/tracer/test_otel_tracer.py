"""OtelTracer: trace contexts tie spans to a rollout attempt, write them to the store in batches, and never break
the agent."""

from __future__ import annotations

import asyncio
import logging
import pickle
import threading

import pytest
from opentelemetry import trace as trace_api

import agentlightning as agl
from agentlightning.emitter import emit_message, emit_reward, get_reward_value
from agentlightning.semconv import AGL_REWARD
from agentlightning.store import InMemoryLightningStore
from agentlightning.tracer import DummyTracer, get_active_tracer
from agentlightning.tracer.otel import OtelTracer

from .conftest import FlakyStore


async def new_attempt(store: InMemoryLightningStore) -> tuple[str, str]:
    rollout = await store.start_rollout(input={"task": 1})
    return rollout.rollout_id, rollout.attempt.attempt_id


def otel_span(name: str) -> None:
    with trace_api.get_tracer("test").start_as_current_span(name):
        pass


async def test_spans_in_a_trace_context_are_stored_under_the_attempt(tracer: OtelTracer, store: FlakyStore) -> None:
    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context("rollout", rollout_id=rollout_id, attempt_id=attempt_id):
        otel_span("step")
        emit_reward(1.0)
    stored = await store.query_spans(rollout_id)
    assert [span.name for span in stored] == ["step", AGL_REWARD]
    assert all(span.attempt_id == attempt_id for span in stored)
    assert [span.sequence_id for span in stored] == sorted({span.sequence_id for span in stored})


async def test_the_v02_form_with_the_store_in_the_context_works(store: FlakyStore) -> None:
    tracer = OtelTracer()
    tracer.init_worker(0)
    try:
        rollout_id, attempt_id = await new_attempt(store)
        async with tracer.trace_context(store=store, rollout_id=rollout_id, attempt_id=attempt_id):
            emit_reward(0.5)
        assert [get_reward_value(span) for span in await store.query_spans(rollout_id)] == [0.5]
    finally:
        tracer.teardown_worker(0)


async def test_get_last_trace_returns_the_stored_spans_with_their_sequence_ids(
    tracer: OtelTracer, store: FlakyStore
) -> None:
    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
        emit_message("a")
        emit_message("b")
    stored = await store.query_spans(rollout_id)
    assert [(span.span_id, span.sequence_id) for span in tracer.get_last_trace()] == [
        (span.span_id, span.sequence_id) for span in stored
    ]


async def test_without_ids_spans_are_collected_but_not_stored(tracer: OtelTracer, store: FlakyStore) -> None:
    async with tracer.trace_context("debug"):
        otel_span("local")
    assert [span.name for span in tracer.get_last_trace()] == ["local"]
    assert store.add_many_calls == 0


async def test_leaving_the_context_waits_until_the_spans_are_in_the_store(store: FlakyStore) -> None:
    tracer = OtelTracer(flush_interval=60.0)  # only the context exit can make the writer flush this early
    tracer.init_worker(0, store)
    try:
        rollout_id, attempt_id = await new_attempt(store)
        async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
            for index in range(20):
                otel_span(f"s{index}")
        assert len(await store.query_spans(rollout_id)) == 20
        assert store.add_many_calls == 1
    finally:
        tracer.teardown_worker(0)


async def test_spans_are_flushed_even_when_the_agent_raises(tracer: OtelTracer, store: FlakyStore) -> None:
    rollout_id, attempt_id = await new_attempt(store)
    with pytest.raises(RuntimeError, match="agent failed"):
        async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
            emit_reward(0.0)
            raise RuntimeError("agent failed")
    assert [span.name for span in await store.query_spans(rollout_id)] == [AGL_REWARD]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"rollout_id": "ro-1"}, "both rollout_id and attempt_id"),
        ({"attempt_id": "at-1"}, "both rollout_id and attempt_id"),
        ({"store": InMemoryLightningStore()}, "no rollout_id"),
    ],
)
async def test_incomplete_targets_are_rejected(tracer: OtelTracer, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        async with tracer.trace_context(**kwargs):  # type: ignore[arg-type]
            pass


async def test_a_context_before_init_worker_raises_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match="init_worker"):
        async with OtelTracer().trace_context():
            pass


async def test_the_tracer_is_active_only_inside_its_context(tracer: OtelTracer) -> None:
    assert get_active_tracer() is None
    async with tracer.trace_context():
        assert get_active_tracer() is tracer
    assert get_active_tracer() is None


async def test_a_second_tracer_cannot_open_a_context_while_another_is_active(tracer: OtelTracer) -> None:
    other = DummyTracer()
    async with tracer.trace_context():
        with pytest.raises(RuntimeError, match="already active"):
            async with other.trace_context():
                pass
    assert get_active_tracer() is None


async def test_concurrent_rollouts_in_one_process_keep_their_spans_apart(tracer: OtelTracer, store: FlakyStore) -> None:
    async def rollout(tag: str) -> tuple[str, str]:
        rollout_id, attempt_id = await new_attempt(store)
        async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
            for step in range(5):
                otel_span(f"{tag}-{step}")
                await asyncio.sleep(0)
            emit_reward(1.0 if tag == "a" else 0.0)
        return rollout_id, tag

    results = await asyncio.gather(rollout("a"), rollout("b"), rollout("c"))
    for rollout_id, tag in results:
        spans = await store.query_spans(rollout_id)
        names = [span.name for span in spans if span.name != AGL_REWARD]
        assert names == [f"{tag}-{step}" for step in range(5)]
        assert [get_reward_value(span) for span in spans if span.name == AGL_REWARD] == [1.0 if tag == "a" else 0.0]


async def test_spans_from_a_thread_without_context_go_to_the_only_open_context(
    tracer: OtelTracer, store: FlakyStore
) -> None:
    rollout_id, attempt_id = await new_attempt(store)
    async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
        worker = threading.Thread(target=otel_span, args=("from-thread",))
        worker.start()
        worker.join()
    assert [span.name for span in await store.query_spans(rollout_id)] == ["from-thread"]


async def test_spans_outside_any_context_are_ignored(tracer: OtelTracer, store: FlakyStore) -> None:
    otel_span("before")
    async with tracer.trace_context():
        otel_span("inside")
    otel_span("after")
    assert [span.name for span in tracer.get_last_trace()] == ["inside"]


async def test_many_threads_emitting_at_once_lose_no_span(tracer: OtelTracer, store: FlakyStore) -> None:
    rollout_id, attempt_id = await new_attempt(store)

    def burst(index: int) -> None:
        for step in range(25):
            otel_span(f"t{index}-{step}")

    async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
        threads = [threading.Thread(target=burst, args=(index,)) for index in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    stored = await store.query_spans(rollout_id)
    assert len(stored) == 200
    assert len({span.sequence_id for span in stored}) == 200


async def test_operation_context_makes_spans_inside_its_children(tracer: OtelTracer) -> None:
    async with tracer.trace_context():
        with tracer.operation_context("agent-step", {"step": 1}) as recording:
            otel_span("llm")
            recording.record_attributes({"result": "ok"})
    spans = {span.name: span for span in tracer.get_last_trace()}
    assert spans["llm"].parent_id == spans["agent-step"].span_id
    assert spans["agent-step"].attributes == {"step": 1, "result": "ok"}


async def test_create_span_records_a_zero_length_span_with_sanitised_attributes(tracer: OtelTracer) -> None:
    async with tracer.trace_context():
        fields = tracer.create_span("note", {"nested": {"k": [1, 2]}, "obj": object}, timestamp=1_700_000_000.0)
    [span] = tracer.get_last_trace()
    assert fields.attributes["nested.k"] == [1, 2] and span.attributes["nested.k"] == [1, 2]
    assert isinstance(span.attributes["obj"], str)
    assert span.start_time == span.end_time == 1_700_000_000.0


def test_the_sync_context_and_deprecated_trace_run_work(store: FlakyStore) -> None:
    tracer = OtelTracer()
    with tracer.lifespan(store):

        def agent() -> str:
            otel_span("sync-step")
            return "done"

        with pytest.warns(DeprecationWarning):
            assert tracer.trace_run(agent) == "done"
        assert [span.name for span in tracer.get_last_trace()] == ["sync-step"]
    with pytest.raises(RuntimeError, match="init_worker"):
        tracer.get_last_trace()


async def test_teardown_stops_collecting_and_a_tracer_can_be_initialised_again(store: FlakyStore) -> None:
    tracer = OtelTracer()
    tracer.init_worker(0, store)
    tracer.teardown_worker(0)
    tracer.init_worker(1, store)
    try:
        async with tracer.trace_context():
            otel_span("again")
        assert [span.name for span in tracer.get_last_trace()] == ["again"]
    finally:
        tracer.teardown_worker(1)


def test_a_tracer_pickles_into_an_uninitialised_copy(tracer: OtelTracer) -> None:
    clone = pickle.loads(pickle.dumps(tracer))
    assert isinstance(clone, OtelTracer)
    with pytest.raises(RuntimeError, match="init_worker"):
        clone.get_last_trace()


def test_otel_tracer_is_exported_lazily_from_the_package() -> None:
    assert agl.OtelTracer is OtelTracer


async def test_emitted_reward_survives_a_store_outage_and_is_retried(
    tracer: OtelTracer, store: FlakyStore, caplog: pytest.LogCaptureFixture
) -> None:
    tracer.flush_timeout = 0.3
    rollout_id, attempt_id = await new_attempt(store)
    store.down = True
    with caplog.at_level(logging.ERROR):
        async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
            otel_span("work")
            emit_reward(1.0)
        # The agent got control back despite the outage, with a clear error in the log.
    assert "Store unavailable" in caplog.text
    assert "retried in the background" in caplog.text
    store.down = False
    assert tracer.flush(timeout=10.0)
    stored = await store.query_spans(rollout_id)
    assert [span.name for span in stored] == ["work", AGL_REWARD]
    stats = tracer.writer_stats()
    assert stats is not None and stats.retries >= 1 and stats.written == 2 and stats.dropped == 0


async def test_a_span_without_valid_ids_is_stored_under_generated_ids_with_an_error(
    tracer: OtelTracer, store: FlakyStore, caplog: pytest.LogCaptureFixture
) -> None:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import SpanContext, TraceFlags

    broken = ReadableSpan(
        name="broken", context=SpanContext(0, 0, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    )
    rollout_id, attempt_id = await new_attempt(store)
    with caplog.at_level(logging.ERROR):
        async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
            tracer.processor.on_start(broken)  # type: ignore[arg-type]
            tracer.processor.on_end(broken)
    [stored] = await store.query_spans(rollout_id)
    assert stored.name == "broken" and stored.span_id != "0" * 16 and stored.trace_id != "0" * 32
    assert "no valid span/trace id" in caplog.text


async def test_unsampled_spans_are_not_collected(tracer: OtelTracer) -> None:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import SpanContext, TraceFlags

    unsampled = ReadableSpan(name="unsampled", context=SpanContext(1, 2, is_remote=False, trace_flags=TraceFlags(0)))
    async with tracer.trace_context():
        tracer.processor.on_start(unsampled)  # type: ignore[arg-type]
        tracer.processor.on_end(unsampled)
    assert tracer.get_last_trace() == []


async def test_the_v02_processor_interface_collects_spans(tracer: OtelTracer, store: FlakyStore) -> None:
    processor = tracer.processor
    with processor:
        otel_span("plain")
        assert [span.name for span in processor.spans()] == ["plain"]
    rollout_id, attempt_id = await new_attempt(store)
    with processor.with_context(store, rollout_id, attempt_id) as same:
        assert same is processor
        otel_span("stored")
    assert processor.force_flush()
    assert [span.name for span in await store.query_spans(rollout_id)] == ["stored"]


async def test_a_span_from_a_contextless_thread_during_concurrent_contexts_is_reported_not_misfiled(
    tracer: OtelTracer, store: FlakyStore, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = await new_attempt(store), await new_attempt(store)
    both_open, done = asyncio.Event(), asyncio.Event()

    async def rollout(ids: tuple[str, str], emit_from_thread: bool) -> None:
        async with tracer.trace_context(rollout_id=ids[0], attempt_id=ids[1]):
            if emit_from_thread:
                await both_open.wait()
                worker = threading.Thread(target=otel_span, args=("orphan",))
                worker.start()
                worker.join()
                done.set()
            else:
                both_open.set()
                await done.wait()

    with caplog.at_level(logging.WARNING):
        await asyncio.gather(rollout(first, True), rollout(second, False))
    assert await store.query_spans(first[0]) == [] and await store.query_spans(second[0]) == []
    assert "cannot be tied to a rollout" in caplog.text
