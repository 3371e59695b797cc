"""The proxy's side of the shared span writer: numbering, fixed ids, and records the store refuses."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import pytest

from agentlightning.llm_proxy.record import CallRecord
from agentlightning.llm_proxy.writer import CallRecordWriter
from agentlightning.store import InMemoryLightningStore
from agentlightning.store.http.errors import StoreUnauthorizedError
from agentlightning.tracer.writer import SpanWriter
from agentlightning.types import Span


def record(rollout_id: str, attempt_id: str) -> CallRecord:
    return CallRecord(
        rollout_id=rollout_id, attempt_id=attempt_id, kind="chat", request={"model": "m", "messages": []},
        upstream="http://127.0.0.1:1/v1", stream=False,
    )  # fmt: skip


async def test_the_proxy_writes_through_the_shared_span_writer() -> None:
    writer = CallRecordWriter(InMemoryLightningStore())
    try:
        assert isinstance(writer.writer, SpanWriter)
    finally:
        await writer.stop()


async def test_a_batch_with_an_unknown_rollout_keeps_the_good_records() -> None:
    store = InMemoryLightningStore()
    started = await store.start_rollout("task")
    writer = CallRecordWriter(store)
    good = record(started.rollout_id, started.attempt.attempt_id)
    writer.submit(good)
    writer.submit(record("ro-gone", "at-gone"))
    writer.submit(record(started.rollout_id, started.attempt.attempt_id))
    assert await writer.flush_async(timeout=30)
    await writer.stop()
    spans = await store.query_spans(started.rollout_id)
    assert [span.sequence_id for span in spans] == [1, 2]
    assert spans[0].span_id == good.span_id and spans[0].trace_id == good.trace_id
    stats = writer.stats()
    assert (stats.written, stats.rejected) == (2, 1)


class LosesFirstAnswer(InMemoryLightningStore):
    """Commits the first add_many_spans and then fails as if the answer was lost on the way back."""

    def __init__(self) -> None:
        super().__init__()
        self.adds = 0

    async def add_many_spans(self, spans: Sequence[Span]) -> Sequence[Span]:
        self.adds += 1
        added = await super().add_many_spans(spans)
        if self.adds == 1:
            raise ConnectionError("connection reset while reading the answer")
        return added


async def test_a_retried_record_whose_first_write_committed_is_stored_once() -> None:
    store = LosesFirstAnswer()
    started = await store.start_rollout("task")
    writer = CallRecordWriter(store, retry_initial_delay=0.01, retry_max_delay=0.02)
    writer.submit(record(started.rollout_id, started.attempt.attempt_id))
    assert await writer.flush_async(timeout=30)
    await writer.stop()
    assert store.adds == 2
    assert len(await store.query_spans(started.rollout_id)) == 1
    assert writer.stats().duplicates == 1


class Refuses(InMemoryLightningStore):
    async def get_many_span_sequence_ids(self, rollout_attempt_ids: Sequence[tuple[str, str]]) -> Sequence[int]:
        raise StoreUnauthorizedError(401, "A valid API key is required", "Unauthorized")


async def test_a_store_refusing_the_key_is_not_retried_and_is_counted() -> None:
    writer = CallRecordWriter(Refuses(), retry_initial_delay=0.01, retry_max_delay=0.02)
    for _ in range(3):
        writer.submit(record("ro-1", "at-1"))
    assert await writer.flush_async(timeout=30)
    await writer.stop()
    stats = writer.stats()
    assert (stats.auth_failures, stats.dropped, stats.written) == (1, 3, 0)


def test_a_proxy_whose_store_server_refuses_its_key_says_so_and_does_not_retry(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Real processes where the behaviour lives: a store server that requires a key, a proxy whose client has
    the wrong one. The proxy answers the agent, logs the refusal once at ERROR and counts it; nothing piles up."""
    from agentlightning.store.http.client.client import LightningStoreClient
    from agentlightning.store.http.server.server import LightningStoreServer

    from .conftest import MESSAGES, client_for, start_proxy
    from .fake_upstream import FakeUpstream

    server = LightningStoreServer(InMemoryLightningStore(), host="127.0.0.1", port=0, api_key="right-key")
    asyncio.run(server.start())
    try:
        owner = LightningStoreClient(server.endpoint, api_key="right-key")
        attempted = asyncio.run(owner.start_rollout("task"))
        wrong = LightningStoreClient(server.endpoint, api_key="wrong-key")
        with FakeUpstream() as upstream, caplog.at_level(logging.ERROR):
            proxy = start_proxy(upstream, wrong, writer_options={"retry_initial_delay": 0.01})
            try:
                client = client_for(proxy, attempted)
                for _ in range(3):
                    client.chat.completions.create(model="fake", messages=MESSAGES, max_tokens=4)
                proxy.flush(timeout=30)
                stats = proxy.writer_stats()
            finally:
                proxy.stop()
        assert stats is not None
        assert stats.auth_failures == 1 and stats.written == 0 and stats.pending == 0
        assert stats.dropped == 3
        assert caplog.text.count("refused the span writer's credentials") == 1
        assert asyncio.run(owner.query_spans(attempted.rollout_id)) == []
    finally:
        asyncio.run(server.stop())
