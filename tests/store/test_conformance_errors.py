"""Store contract: bad input gets a typed error naming the offending value and changes nothing (every backend)."""

from __future__ import annotations

from typing import Any

import pytest

from agentlightning.store import (
    AttemptNotFoundError,
    InvalidArgumentError,
    LightningStore,
    NoAttemptsError,
    RolloutNotFoundError,
)
from agentlightning.store.errors import InvalidArgumentTypeError


async def test_update_rollout_of_an_unknown_id_raises(store: LightningStore) -> None:
    with pytest.raises(RolloutNotFoundError, match="Rollout nonexistent not found"):
        await store.update_rollout("nonexistent", status="failed")


async def test_update_rollout_with_an_illegal_status_changes_nothing(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task", metadata={"a": 1})
    with pytest.raises(InvalidArgumentError, match="bogus"):
        await store.update_rollout(queued.rollout_id, status="bogus", metadata={"b": 2})  # type: ignore[arg-type]
    stored = await store.get_rollout_by_id(queued.rollout_id)
    assert stored is not None and stored.status == "queuing" and stored.metadata == {"a": 1}


async def test_update_rollout_with_an_illegal_mode_raises(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task")
    with pytest.raises(InvalidArgumentError, match="fit"):
        await store.update_rollout(queued.rollout_id, mode="fit")  # type: ignore[arg-type]


async def test_update_rollout_with_a_bad_config_raises(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task")
    with pytest.raises(InvalidArgumentError, match="max_attempts"):
        await store.update_rollout(queued.rollout_id, config={"max_attempts": 0})  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentTypeError, match="config"):
        await store.update_rollout(queued.rollout_id, config="fast")  # type: ignore[arg-type]


async def test_enqueue_rollout_with_a_negative_timeout_config_raises(store: LightningStore) -> None:
    with pytest.raises(InvalidArgumentError, match="timeout_seconds"):
        await store.enqueue_rollout("task", config={"timeout_seconds": -1})  # type: ignore[arg-type]
    assert list(await store.query_rollouts()) == []


async def test_enqueue_rollout_with_non_dict_metadata_raises(store: LightningStore) -> None:
    with pytest.raises(InvalidArgumentTypeError, match="metadata"):
        await store.enqueue_rollout("task", metadata=["not", "a", "dict"])  # type: ignore[arg-type]


async def test_enqueue_many_with_one_bad_request_enqueues_nothing(store: LightningStore) -> None:
    with pytest.raises(InvalidArgumentError, match="mode"):
        await store.enqueue_many_rollouts([{"input": 1}, {"input": 2, "mode": "bogus"}])  # type: ignore[list-item]
    assert list(await store.query_rollouts()) == []


async def test_start_attempt_of_an_unknown_rollout_raises(store: LightningStore) -> None:
    with pytest.raises(RolloutNotFoundError, match="Rollout nonexistent not found"):
        await store.start_attempt("nonexistent")


async def test_update_attempt_of_an_unknown_rollout_raises(store: LightningStore) -> None:
    with pytest.raises(RolloutNotFoundError, match="nonexistent"):
        await store.update_attempt("nonexistent", "latest", status="failed")


async def test_update_attempt_of_a_rollout_without_attempts_raises(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task")
    with pytest.raises(NoAttemptsError, match="No attempts found"):
        await store.update_attempt(queued.rollout_id, "at-bogus", status="failed")


async def test_update_attempt_of_an_unknown_attempt_raises(store: LightningStore) -> None:
    started = await store.start_rollout("task")
    with pytest.raises(AttemptNotFoundError, match="Attempt at-bogus not found"):
        await store.update_attempt(started.rollout_id, "at-bogus", status="failed")


async def test_update_attempt_with_an_illegal_status_changes_nothing(store: LightningStore) -> None:
    started = await store.start_rollout("task")
    with pytest.raises(InvalidArgumentError, match="done"):
        await store.update_attempt(started.rollout_id, "latest", status="done", metadata={"x": 1})  # type: ignore[arg-type]
    attempt = await store.get_latest_attempt(started.rollout_id)
    assert attempt is not None and attempt.status == "preparing" and attempt.metadata is None


async def test_update_attempt_with_a_bad_heartbeat_raises(store: LightningStore) -> None:
    started = await store.start_rollout("task")
    with pytest.raises(InvalidArgumentError, match="last_heartbeat_time"):
        await store.update_attempt(started.rollout_id, "latest", last_heartbeat_time="now")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"sort_by": "input"}, "Invalid sort_by: input"),
        ({"sort_order": "up"}, "sort_order"),
        ({"limit": -2}, "limit"),
        ({"offset": -1}, "offset"),
        ({"filter_logic": "xor"}, "filter_logic"),
        ({"status_in": ["unknown-status"]}, "unknown-status"),
        ({"status_in": "queuing"}, "status_in"),
    ],
)
async def test_query_rollouts_rejects_bad_query_arguments(
    store: LightningStore, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        await store.query_rollouts(**kwargs)


async def test_query_spans_rejects_an_unknown_sort_field(store: LightningStore) -> None:
    started = await store.start_rollout("task")
    with pytest.raises(InvalidArgumentError, match="Invalid sort_by: attributes"):
        await store.query_spans(started.rollout_id, sort_by="attributes")


async def test_ids_must_be_strings(store: LightningStore) -> None:
    with pytest.raises(InvalidArgumentTypeError, match="rollout_id"):
        await store.get_rollout_by_id(123)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentTypeError, match="rollout_id"):
        await store.start_attempt(None)  # type: ignore[arg-type]


async def test_add_span_rejects_something_that_is_not_a_span(store: LightningStore) -> None:
    with pytest.raises(InvalidArgumentTypeError, match="span"):
        await store.add_span("not a span")  # type: ignore[arg-type]


async def test_dequeue_rejects_a_non_integer_limit(store: LightningStore) -> None:
    with pytest.raises(InvalidArgumentTypeError, match="limit"):
        await store.dequeue_many_rollouts(limit="2")  # type: ignore[arg-type]
