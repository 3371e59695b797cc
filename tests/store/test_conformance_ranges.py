"""Store contract: numbers a store cannot keep are refused with an error naming the field (every backend).

Integers beyond what the databases store (signed 64 bits) and span sequence ids beyond 2^53 - 1 (the largest
integer every JSON reader keeps exactly) are refused, so that allocation after them keeps working; NaN and Infinity,
which JSON cannot carry, are refused in the payloads a store keeps (rollout input, metadata, resources, worker
statistics) instead of being stored as null, and so are non-finite timeouts.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from agentlightning.store import InvalidArgumentError, LightningStore
from agentlightning.types import LLM, AttemptedRollout, EnqueueRolloutRequest, RolloutConfig, Span

BIGINT_MAX = 2**63 - 1
JSON_SAFE_MAX = 2**53 - 1


def _span(rollout: AttemptedRollout, sequence_id: int, span_id: str = "span-1") -> Span:
    return Span.from_attributes(
        attributes={},
        rollout_id=rollout.rollout_id,
        attempt_id=rollout.attempt.attempt_id,
        sequence_id=sequence_id,
        name="step",
    ).model_copy(update={"span_id": span_id})


# ------------------------------------------------------------------------------------------------ integer ranges
@pytest.mark.parametrize("sequence_id", [BIGINT_MAX, 2**64, -(2**63) - 1, JSON_SAFE_MAX + 1])
async def test_a_span_sequence_id_beyond_2_to_the_53_is_refused_naming_the_field(
    store: LightningStore, sequence_id: int
) -> None:
    rollout = await store.start_rollout("task")
    with pytest.raises(InvalidArgumentError, match="sequence_id"):
        await store.add_span(_span(rollout, sequence_id))
    with pytest.raises(InvalidArgumentError, match="sequence_id"):
        await store.add_many_spans([_span(rollout, 1, "span-ok"), _span(rollout, sequence_id)])
    assert list(await store.query_spans(rollout.rollout_id)) == []
    # Nothing was stored, so the allocator keeps counting from the start.
    assert await store.get_next_span_sequence_id(rollout.rollout_id, rollout.attempt.attempt_id) == 1


async def test_allocation_continues_after_the_largest_accepted_sequence_id(store: LightningStore) -> None:
    rollout = await store.start_rollout("task")
    assert await store.add_span(_span(rollout, JSON_SAFE_MAX)) is not None
    next_id = await store.get_next_span_sequence_id(rollout.rollout_id, rollout.attempt.attempt_id)
    assert next_id == JSON_SAFE_MAX + 1


async def test_query_limits_and_offsets_beyond_64_bits_are_refused_naming_the_field(store: LightningStore) -> None:
    await store.enqueue_rollout("task")
    with pytest.raises(InvalidArgumentError, match="limit"):
        await store.query_rollouts(limit=2**64)
    with pytest.raises(InvalidArgumentError, match="offset"):
        await store.query_rollouts(offset=2**63)
    with pytest.raises(InvalidArgumentError, match="limit"):
        await store.dequeue_many_rollouts(limit=2**64)
    assert len(await store.query_rollouts(limit=BIGINT_MAX)) == 1


# --------------------------------------------------------------------------------------------- non-finite numbers
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
async def test_nan_or_infinity_in_a_rollout_input_is_refused_naming_where(store: LightningStore, bad: float) -> None:
    with pytest.raises(InvalidArgumentError, match=r"input\.scores\[1\]"):
        await store.enqueue_rollout({"scores": [1.0, bad]})
    with pytest.raises(InvalidArgumentError, match=r"input\.x"):
        await store.start_rollout({"x": bad})
    requests = [EnqueueRolloutRequest(input="fine"), EnqueueRolloutRequest(input={"x": bad})]
    with pytest.raises(InvalidArgumentError, match=r"rollouts\[1\]\.input\.x"):
        await store.enqueue_many_rollouts(requests)
    assert list(await store.query_rollouts()) == []


async def test_nan_in_metadata_resources_or_worker_stats_is_refused_naming_the_field(store: LightningStore) -> None:
    rollout = await store.start_rollout("task")
    calls: list[tuple[str, Any]] = [
        ("metadata.score", store.enqueue_rollout("task", metadata={"score": math.nan})),
        ("metadata.loss", store.update_rollout(rollout.rollout_id, metadata={"loss": math.inf})),
        ("metadata.loss", store.update_attempt(rollout.rollout_id, "latest", metadata={"loss": math.nan})),
        ("heartbeat_stats.load", store.update_worker("worker-1", {"load": math.nan})),
    ]
    for field, call in calls:
        with pytest.raises(InvalidArgumentError, match=field.replace(".", r"\.")):
            await call
    llm = LLM(endpoint="http://llm", model="m", sampling_parameters={"temperature": math.inf})
    with pytest.raises(InvalidArgumentError, match=r"sampling_parameters\.temperature"):
        await store.add_resources({"llm": llm})
    stored = await store.get_rollout_by_id(rollout.rollout_id)
    assert stored is not None and stored.metadata == {}


@pytest.mark.parametrize("field", ["timeout_seconds", "unresponsive_seconds"])
async def test_a_non_finite_rollout_timeout_is_refused_naming_the_field(store: LightningStore, field: str) -> None:
    with pytest.raises(InvalidArgumentError, match=field):
        await store.enqueue_rollout("task", config={field: math.inf})  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match=field):
        await store.start_rollout("task", config={field: math.nan})  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match=field):
        await store.enqueue_rollout("task", config=RolloutConfig(**{field: math.inf}))
    assert list(await store.query_rollouts()) == []
