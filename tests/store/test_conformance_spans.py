"""Store contract: span ingest, heartbeats, sequence ids and span queries (every backend)."""

from __future__ import annotations

import pytest

from agentlightning.store import AttemptNotFoundError, LightningStore, RolloutNotFoundError
from agentlightning.types import RolloutConfig, Span

from .helpers import make_readable_span, make_rich_span, make_span


async def _running(store: LightningStore, **config: object) -> tuple[str, str]:
    started = await store.start_rollout("task", config=RolloutConfig(**config))  # type: ignore[arg-type]
    return started.rollout_id, started.attempt.attempt_id


async def test_first_span_moves_attempt_and_rollout_to_running(store: LightningStore) -> None:
    rollout_id, attempt_id = await _running(store)
    await store.add_span(make_span(rollout_id, attempt_id, 1))
    attempt = await store.get_latest_attempt(rollout_id)
    rollout = await store.get_rollout_by_id(rollout_id)
    assert attempt is not None and attempt.status == "running" and attempt.last_heartbeat_time is not None
    assert rollout is not None and rollout.status == "running"


async def test_each_span_advances_the_heartbeat(store: LightningStore) -> None:
    rollout_id, attempt_id = await _running(store)
    await store.add_span(make_span(rollout_id, attempt_id, 1))
    first = await store.get_latest_attempt(rollout_id)
    await store.add_span(make_span(rollout_id, attempt_id, 2))
    second = await store.get_latest_attempt(rollout_id)
    assert first is not None and second is not None
    assert second.last_heartbeat_time is not None and first.last_heartbeat_time is not None
    assert second.last_heartbeat_time >= first.last_heartbeat_time


async def test_span_on_a_timed_out_attempt_keeps_its_status_but_records_a_heartbeat(store: LightningStore) -> None:
    rollout_id, attempt_id = await _running(store)
    await store.update_attempt(rollout_id, attempt_id, status="timeout")
    before = await store.get_rollout_by_id(rollout_id)
    await store.add_span(make_span(rollout_id, attempt_id, 1))
    attempt = await store.get_latest_attempt(rollout_id)
    after = await store.get_rollout_by_id(rollout_id)
    assert attempt is not None and attempt.status == "timeout" and attempt.last_heartbeat_time is not None
    assert before is not None and after is not None and after.status == before.status == "failed"


async def test_span_revives_an_unresponsive_attempt(store: LightningStore) -> None:
    rollout_id, attempt_id = await _running(store)
    await store.update_attempt(rollout_id, attempt_id, status="unresponsive")
    await store.add_span(make_span(rollout_id, attempt_id, 1))
    attempt = await store.get_latest_attempt(rollout_id)
    assert attempt is not None and attempt.status == "running"


async def test_span_on_a_requeued_rollout_recovers_it(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task", config=RolloutConfig(max_attempts=2, retry_condition=["unresponsive"]))
    claimed = await store.dequeue_rollout()
    assert claimed is not None
    await store.update_attempt(queued.rollout_id, "latest", status="unresponsive")
    requeued = await store.get_rollout_by_id(queued.rollout_id)
    assert requeued is not None and requeued.status == "requeuing"
    await store.add_span(make_span(queued.rollout_id, claimed.attempt.attempt_id, 1))
    attempt = await store.get_latest_attempt(queued.rollout_id)
    rollout = await store.get_rollout_by_id(queued.rollout_id)
    assert attempt is not None and attempt.status == "running"
    assert rollout is not None and rollout.status == "running"
    assert await store.dequeue_rollout() is None


async def test_recovered_attempt_can_still_succeed(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task", config=RolloutConfig(max_attempts=2, retry_condition=["unresponsive"]))
    claimed = await store.dequeue_rollout()
    assert claimed is not None
    await store.update_attempt(queued.rollout_id, "latest", status="unresponsive")
    await store.add_span(make_span(queued.rollout_id, claimed.attempt.attempt_id, 1))
    attempt = await store.update_attempt(queued.rollout_id, claimed.attempt.attempt_id, status="succeeded")
    rollout = await store.get_rollout_by_id(queued.rollout_id)
    assert attempt.end_time is not None
    assert rollout is not None and rollout.status == "succeeded"
    assert await store.dequeue_rollout() is None


async def test_recovered_attempt_can_still_fail_for_good(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task", config=RolloutConfig(max_attempts=2, retry_condition=["unresponsive"]))
    claimed = await store.dequeue_rollout()
    assert claimed is not None
    await store.update_attempt(queued.rollout_id, "latest", status="unresponsive")
    await store.add_span(make_span(queued.rollout_id, claimed.attempt.attempt_id, 1))
    await store.update_attempt(queued.rollout_id, claimed.attempt.attempt_id, status="failed")
    rollout = await store.get_rollout_by_id(queued.rollout_id)
    assert rollout is not None and rollout.status == "failed"
    assert await store.dequeue_rollout() is None


async def test_late_span_from_a_replaced_attempt_only_revives_that_attempt(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task", config=RolloutConfig(max_attempts=2, retry_condition=["unresponsive"]))
    first = await store.dequeue_rollout()
    assert first is not None
    await store.update_attempt(queued.rollout_id, "latest", status="unresponsive")
    second = await store.dequeue_rollout()
    assert second is not None and second.attempt.sequence_id == 2
    await store.add_span(make_span(queued.rollout_id, first.attempt.attempt_id, 1))
    attempts = await store.query_attempts(queued.rollout_id)
    rollout = await store.get_rollout_by_id(queued.rollout_id)
    latest = await store.get_latest_attempt(queued.rollout_id)
    assert attempts[0].status == "running"
    assert latest is not None and latest.attempt_id == second.attempt.attempt_id
    assert rollout is not None and rollout.status == "preparing"
    assert await store.dequeue_rollout() is None


async def test_add_span_returns_the_span_and_none_for_a_duplicate(store: LightningStore) -> None:
    rollout_id, attempt_id = await _running(store)
    span = make_span(rollout_id, attempt_id, 1)
    first = await store.add_span(span)
    assert first is not None and first.span_id == span.span_id
    assert await store.add_span(span) is None
    assert len(await store.query_spans(rollout_id)) == 1


async def test_the_same_span_id_in_another_attempt_is_not_a_duplicate(store: LightningStore) -> None:
    rollout_id, attempt_id = await _running(store)
    second = await store.start_attempt(rollout_id)
    await store.add_span(make_span(rollout_id, attempt_id, 1, span_id="00000000000000ab"))
    added = await store.add_span(make_span(rollout_id, second.attempt.attempt_id, 2, span_id="00000000000000ab"))
    assert added is not None
    assert len(await store.query_spans(rollout_id)) == 2


async def test_stored_span_keeps_every_field(store: LightningStore) -> None:
    rollout_id, attempt_id = await _running(store)
    span = make_rich_span(rollout_id, attempt_id, 1)
    await store.add_span(span)
    stored = (await store.query_spans(rollout_id))[0]
    assert stored.model_dump() == span.model_dump()


async def test_add_many_spans_stores_a_mixed_batch_and_skips_duplicates(store: LightningStore) -> None:
    first_id, first_attempt = await _running(store)
    second_id, second_attempt = await _running(store)
    repeated = make_span(first_id, first_attempt, 1)
    await store.add_span(repeated)
    batch = [
        repeated,
        make_span(first_id, first_attempt, 2),
        make_span(second_id, second_attempt, 1),
        make_span(second_id, second_attempt, 2),
    ]
    batch.append(batch[2])  # repeated inside the batch too
    added = await store.add_many_spans(batch)
    assert [s.span_id for s in added] == [batch[1].span_id, batch[2].span_id, batch[3].span_id]
    assert [s.sequence_id for s in await store.query_spans(first_id)] == [1, 2]
    assert [s.sequence_id for s in await store.query_spans(second_id)] == [1, 2]


async def test_add_many_spans_moves_every_touched_rollout_to_running(store: LightningStore) -> None:
    first_id, first_attempt = await _running(store)
    second_id, second_attempt = await _running(store)
    await store.add_many_spans([make_span(first_id, first_attempt, 1), make_span(second_id, second_attempt, 1)])
    for rollout_id in (first_id, second_id):
        rollout = await store.get_rollout_by_id(rollout_id)
        assert rollout is not None and rollout.status == "running"


async def test_add_many_spans_with_an_unknown_attempt_stores_nothing(store: LightningStore) -> None:
    rollout_id, attempt_id = await _running(store)
    batch = [make_span(rollout_id, attempt_id, 1), make_span(rollout_id, "at-missing", 2)]
    with pytest.raises(AttemptNotFoundError, match="at-missing"):
        await store.add_many_spans(batch)
    assert list(await store.query_spans(rollout_id)) == []
    attempt = await store.get_latest_attempt(rollout_id)
    assert attempt is not None and attempt.status == "preparing"


async def test_add_many_spans_with_no_spans_returns_nothing(store: LightningStore) -> None:
    assert list(await store.add_many_spans([])) == []


async def test_add_span_for_an_unknown_rollout_raises(store: LightningStore) -> None:
    with pytest.raises(RolloutNotFoundError, match="Rollout ro-nonexistent not found"):
        await store.add_span(make_span("ro-nonexistent", "at-x", 1))


async def test_add_span_for_an_unknown_attempt_raises(store: LightningStore) -> None:
    rollout_id, _ = await _running(store)
    with pytest.raises(AttemptNotFoundError, match="Attempt attempt-missing not found"):
        await store.add_span(make_span(rollout_id, "attempt-missing", 1))


async def test_add_otel_span_for_an_unknown_rollout_raises(store: LightningStore) -> None:
    with pytest.raises(RolloutNotFoundError, match="Rollout nonexistent not found"):
        await store.add_otel_span("nonexistent", "at-x", make_readable_span())


async def test_add_otel_span_converts_the_span(store: LightningStore) -> None:
    rollout_id, attempt_id = await _running(store)
    readable = make_readable_span("llm.call", attributes={"gen_ai.request.model": "m"})
    span = await store.add_otel_span(rollout_id, attempt_id, readable)
    assert span is not None
    assert span.name == "llm.call"
    assert span.attributes == {"gen_ai.request.model": "m"}
    assert span.span_id == format(readable.context.span_id, "016x")  # type: ignore[union-attr]
    assert span.resource.attributes["service.name"] == "test"
    stored = await store.query_spans(rollout_id)
    assert [s.span_id for s in stored] == [span.span_id]


async def test_add_otel_span_allocates_sequence_ids_shared_with_get_next(store: LightningStore) -> None:
    rollout_id, attempt_id = await _running(store)
    assert await store.get_next_span_sequence_id(rollout_id, attempt_id) == 1
    first = await store.add_otel_span(rollout_id, attempt_id, make_readable_span())
    assert first is not None and first.sequence_id == 2
    assert await store.get_next_span_sequence_id(rollout_id, attempt_id) == 3
    second = await store.add_otel_span(rollout_id, attempt_id, make_readable_span())
    assert second is not None and second.sequence_id == 4
    assert await store.get_next_span_sequence_id(rollout_id, "at-other") == 5


async def test_explicit_sequence_id_raises_the_counter(store: LightningStore) -> None:
    rollout_id, attempt_id = await _running(store)
    span = await store.add_otel_span(rollout_id, attempt_id, make_readable_span(), sequence_id=100)
    assert span is not None and span.sequence_id == 100
    assert await store.get_next_span_sequence_id(rollout_id, attempt_id) == 101


async def test_add_span_with_a_sequence_id_raises_the_counter(store: LightningStore) -> None:
    rollout_id, attempt_id = await _running(store)
    await store.add_span(make_span(rollout_id, attempt_id, 101))
    assert await store.get_next_span_sequence_id(rollout_id, attempt_id) == 102


async def test_add_otel_span_with_a_duplicate_span_returns_none(store: LightningStore) -> None:
    rollout_id, attempt_id = await _running(store)
    readable = make_readable_span()
    assert await store.add_otel_span(rollout_id, attempt_id, readable) is not None
    assert await store.add_otel_span(rollout_id, attempt_id, readable) is None


async def test_sequence_ids_are_counted_per_rollout(store: LightningStore) -> None:
    first_id, first_attempt = await _running(store)
    second_id, second_attempt = await _running(store)
    ids = await store.get_many_span_sequence_ids(
        [(first_id, first_attempt), (second_id, second_attempt), (first_id, "at-other"), (first_id, first_attempt)]
    )
    assert list(ids) == [1, 1, 2, 3]
    assert await store.get_next_span_sequence_id(first_id, first_attempt) == 4
    assert await store.get_next_span_sequence_id(second_id, second_attempt) == 2


async def test_sequence_ids_are_python_ints(store: LightningStore) -> None:
    rollout_id, attempt_id = await _running(store)
    value = await store.get_next_span_sequence_id(rollout_id, attempt_id)
    assert type(value) is int


async def test_sequence_id_for_an_unknown_rollout_raises(store: LightningStore) -> None:
    with pytest.raises(RolloutNotFoundError, match="ro-unknown"):
        await store.get_next_span_sequence_id("ro-unknown", "at-1")


async def test_query_spans_by_attempt_and_latest(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task")
    first = await store.dequeue_rollout()
    assert first is not None
    for seq in (1, 2):
        await store.add_span(make_span(queued.rollout_id, first.attempt.attempt_id, seq))
    await store.update_rollout(queued.rollout_id, status="requeuing")
    second = await store.dequeue_rollout()
    assert second is not None
    for seq in (3, 4, 5):
        await store.add_span(make_span(queued.rollout_id, second.attempt.attempt_id, seq))
    assert len(await store.query_spans(queued.rollout_id)) == 5
    assert [s.sequence_id for s in await store.query_spans(queued.rollout_id, first.attempt.attempt_id)] == [1, 2]
    assert [s.sequence_id for s in await store.query_spans(queued.rollout_id, "latest")] == [3, 4, 5]
    assert list(await store.query_spans(queued.rollout_id, "at-unknown")) == []


async def test_query_spans_latest_follows_the_latest_attempt(store: LightningStore) -> None:
    rollout_id, attempt_id = await _running(store)
    await store.add_span(make_span(rollout_id, attempt_id, 1))
    await store.start_attempt(rollout_id)
    assert list(await store.query_spans(rollout_id, "latest")) == []


async def test_query_spans_of_an_unknown_rollout_is_empty(store: LightningStore) -> None:
    assert list(await store.query_spans("ro-nonexistent")) == []
    assert list(await store.query_spans("ro-nonexistent", "at-1")) == []
    assert list(await store.query_spans("ro-nonexistent", "latest")) == []


async def test_query_spans_latest_without_spans_is_empty(store: LightningStore) -> None:
    rollout_id, _ = await _running(store)
    assert list(await store.query_spans(rollout_id, "latest")) == []


async def test_query_spans_orders_by_sequence_id(store: LightningStore) -> None:
    rollout_id, attempt_id = await _running(store)
    for seq in (3, 1, 2):
        await store.add_span(make_span(rollout_id, attempt_id, seq))
    assert [s.sequence_id for s in await store.query_spans(rollout_id)] == [1, 2, 3]


async def _tree(store: LightningStore) -> tuple[str, list[Span]]:
    rollout_id, attempt_id = await _running(store)
    spans = [
        make_span(rollout_id, attempt_id, 1, name="agent.run", span_id="1000000000000001", trace_id="a" * 32),
        make_span(
            rollout_id, attempt_id, 2, name="llm.call", span_id="2000000000000002", trace_id="a" * 32,
            parent_id="1000000000000001",
        ),
        make_span(
            rollout_id, attempt_id, 3, name="tool.call", span_id="3000000000000003", trace_id="b" * 32,
            parent_id="1000000000000001",
        ),
        make_span(rollout_id, attempt_id, 4, name="llm.call", span_id="4000000000000004", trace_id="b" * 32),
    ]  # fmt: skip
    await store.add_many_spans(spans)
    return rollout_id, spans


async def test_query_spans_filters_by_exact_trace_id(store: LightningStore) -> None:
    rollout_id, _ = await _tree(store)
    result = await store.query_spans(rollout_id, trace_id="a" * 32)
    assert [s.sequence_id for s in result] == [1, 2]


async def test_query_spans_or_logic_unions_the_filters(store: LightningStore) -> None:
    rollout_id, _ = await _tree(store)
    result = await store.query_spans(rollout_id, span_id="1000000000000001", trace_id_contains="bbb", filter_logic="or")
    assert [s.sequence_id for s in result] == [1, 3, 4]


async def test_query_spans_and_logic_narrows_the_filters(store: LightningStore) -> None:
    rollout_id, _ = await _tree(store)
    result = await store.query_spans(rollout_id, name="llm.call", trace_id="b" * 32)
    assert [s.sequence_id for s in result] == [4]


async def test_query_spans_filters_by_parent_id_substring(store: LightningStore) -> None:
    rollout_id, _ = await _tree(store)
    result = await store.query_spans(rollout_id, parent_id_contains="0000001")
    assert [s.sequence_id for s in result] == [2, 3]


async def test_query_spans_sorts_and_offsets(store: LightningStore) -> None:
    rollout_id, _ = await _tree(store)
    result = await store.query_spans(rollout_id, sort_by="span_id", sort_order="desc", offset=1)
    assert [s.sequence_id for s in result] == [3, 2, 1]


async def test_query_spans_filters_before_paginating(store: LightningStore) -> None:
    rollout_id, _ = await _tree(store)
    page = await store.query_spans(rollout_id, name_contains="llm", limit=1, offset=1)
    assert [s.sequence_id for s in page] == [4]
    assert (page.limit, page.offset, page.total) == (1, 1, 2)  # type: ignore[attr-defined]


async def test_query_spans_or_logic_never_returns_other_rollouts(store: LightningStore) -> None:
    rollout_id, _ = await _tree(store)
    other_id, other_attempt = await _running(store)
    await store.add_span(make_span(other_id, other_attempt, 1, name="llm.call", trace_id="a" * 32))
    result = await store.query_spans(rollout_id, trace_id="a" * 32, name_contains="llm", filter_logic="or")
    assert {s.rollout_id for s in result} == {rollout_id}
    assert [s.sequence_id for s in result] == [1, 2, 4]
