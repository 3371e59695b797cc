"""Records a store returns belong to the caller: changing them changes nothing in the store (every backend), and
`owned_copy`, the copy the core makes of each returned record, behaves as pydantic's `model_copy()`."""

from __future__ import annotations

from agentlightning.store import LightningStore
from agentlightning.store.core.records import owned_copy, with_attempt
from agentlightning.types import Attempt, AttemptedRollout, Rollout, Worker


async def test_changing_a_queried_rollout_leaves_the_stored_one_unchanged(store: LightningStore) -> None:
    await store.enqueue_rollout(input={"task": 1})
    claimed = await store.dequeue_rollout(worker_id="worker-1")
    assert claimed is not None
    (queried,) = await store.query_rollouts()
    assert isinstance(queried, AttemptedRollout)
    queried.status = "succeeded"
    queried.attempt.status = "failed"
    (again,) = await store.query_rollouts()
    assert again.status == "preparing"
    assert isinstance(again, AttemptedRollout) and again.attempt.status == "preparing"


async def test_changing_a_dequeued_rollout_leaves_the_stored_one_unchanged(store: LightningStore) -> None:
    await store.enqueue_rollout(input={"task": 1})
    claimed = await store.dequeue_rollout()
    assert claimed is not None
    claimed.attempt.status = "succeeded"
    latest = await store.get_latest_attempt(claimed.rollout_id)
    assert latest is not None and latest.status == "preparing"


async def test_changing_a_queried_worker_leaves_the_stored_one_unchanged(store: LightningStore) -> None:
    returned = await store.update_worker("worker-1", {"beat": 1})
    returned.status = "busy"
    (queried,) = await store.query_workers()
    queried.heartbeat_stats = {"beat": 99}
    stored = await store.get_worker_by_id("worker-1")
    assert stored is not None and stored.status == "unknown" and stored.heartbeat_stats == {"beat": 1}


def test_owned_copy_is_an_equal_distinct_record_with_the_same_fields_set() -> None:
    rollout = Rollout(rollout_id="ro-000000000001", input={"task": 1}, start_time=1.0)
    copy = owned_copy(rollout)
    assert copy == rollout and copy is not rollout
    assert copy.model_fields_set == rollout.model_fields_set
    assert copy.model_dump(exclude_unset=True) == rollout.model_dump(exclude_unset=True)


def test_assigning_a_field_of_an_owned_copy_leaves_the_original_unchanged() -> None:
    worker = Worker(worker_id="worker-1")
    copy = owned_copy(worker)
    copy.status = "busy"
    copy.current_rollout_id = "ro-000000000001"
    assert worker.status == "unknown" and worker.current_rollout_id is None
    assert "status" not in worker.model_fields_set and "status" in copy.model_fields_set


def test_owned_copy_keeps_extra_fields_of_models_that_allow_them() -> None:
    from pydantic import BaseModel, ConfigDict

    class Open(BaseModel):
        model_config = ConfigDict(extra="allow")
        name: str

    original = Open(name="a", colour="red")  # type: ignore[call-arg]
    copy = owned_copy(original)
    assert copy == original and copy.model_extra == {"colour": "red"}
    assert copy.model_extra is not original.model_extra


def test_with_attempt_builds_the_same_record_as_model_construct() -> None:
    rollout = Rollout(rollout_id="ro-000000000001", input={"task": 1}, start_time=1.0, status="running")
    attempt = Attempt(rollout_id=rollout.rollout_id, attempt_id="at-00000001", sequence_id=1, start_time=1.0)
    built = with_attempt(rollout, attempt)
    expected = AttemptedRollout.model_construct(**rollout.__dict__, attempt=attempt.model_copy())
    assert isinstance(built, AttemptedRollout)
    assert built == expected
    assert built.model_fields_set == expected.model_fields_set
    assert built.attempt is not attempt and built.attempt == attempt


def test_with_attempt_without_an_attempt_is_a_plain_rollout_copy() -> None:
    rollout = Rollout(rollout_id="ro-000000000001", input={"task": 1}, start_time=1.0)
    built = with_attempt(rollout, None)
    assert type(built) is Rollout and built == rollout and built is not rollout
