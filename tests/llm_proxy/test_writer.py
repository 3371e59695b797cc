"""The proxy's span writer: batches, numbering, and records for rollouts the store does not know."""

from __future__ import annotations

from agentlightning.llm_proxy.record import CallRecord
from agentlightning.llm_proxy.writer import SpanWriter
from agentlightning.store import InMemoryLightningStore


def record(rollout_id: str, attempt_id: str) -> CallRecord:
    return CallRecord(
        rollout_id=rollout_id, attempt_id=attempt_id, kind="chat", request={"model": "m", "messages": []},
        upstream="http://127.0.0.1:1/v1", stream=False,
    )  # fmt: skip


async def test_a_batch_with_an_unknown_rollout_keeps_the_good_records() -> None:
    store = InMemoryLightningStore()
    started = await store.start_rollout("task")
    writer = SpanWriter(store)
    writer.start()
    good = record(started.rollout_id, started.attempt.attempt_id)
    writer.submit(good)
    writer.submit(record("ro-gone", "at-gone"))
    writer.submit(record(started.rollout_id, started.attempt.attempt_id))
    await writer.flush()
    await writer.stop()
    spans = await store.query_spans(started.rollout_id)
    assert [span.sequence_id for span in spans] == [1, 2]
    assert (writer.written, writer.dropped) == (2, 1)
