"""Store contract: attempts, status propagation to rollouts, and retries (every backend)."""

from __future__ import annotations

import time

import pytest

from agentlightning.store import LightningStore
from agentlightning.types import RolloutConfig

from .helpers import make_span


async def test_query_attempts_is_empty_before_the_first_dequeue(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task")
    assert list(await store.query_attempts(queued.rollout_id)) == []
    assert await store.get_latest_attempt(queued.rollout_id) is None


async def test_query_attempts_lists_attempts_by_sequence(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task")
    await store.dequeue_rollout()
    attempts = await store.query_attempts(queued.rollout_id)
    assert [(a.sequence_id, a.status) for a in attempts] == [(1, "preparing")]
    await store.update_rollout(queued.rollout_id, status="requeuing")
    await store.dequeue_rollout()
    assert [a.sequence_id for a in await store.query_attempts(queued.rollout_id)] == [1, 2]


async def test_query_attempts_of_an_unknown_rollout_is_empty(store: LightningStore) -> None:
    assert list(await store.query_attempts("ro-unknown")) == []
    assert await store.get_latest_attempt("ro-unknown") is None


async def test_get_latest_attempt_follows_new_attempts(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task")
    await store.dequeue_rollout()
    first = await store.get_latest_attempt(queued.rollout_id)
    await store.update_rollout(queued.rollout_id, status="requeuing")
    await store.dequeue_rollout()
    second = await store.get_latest_attempt(queued.rollout_id)
    assert first is not None and first.sequence_id == 1
    assert second is not None and second.sequence_id == 2


async def test_query_attempts_sorts_and_paginates(store: LightningStore) -> None:
    started = await store.start_rollout("task")
    await store.start_attempt(started.rollout_id)
    await store.start_attempt(started.rollout_id)
    descending = await store.query_attempts(started.rollout_id, sort_by="sequence_id", sort_order="desc")
    assert [a.sequence_id for a in descending] == [3, 2, 1]
    page = await store.query_attempts(started.rollout_id, limit=1, offset=1)
    assert [a.sequence_id for a in page] == [2]
    assert (page.limit, page.offset, page.total) == (1, 1, 3)  # type: ignore[attr-defined]
    assert list(await store.query_attempts(started.rollout_id, offset=10)) == []
    empty = await store.query_attempts(started.rollout_id, limit=0)
    assert list(empty) == [] and empty.total == 3  # type: ignore[attr-defined]


async def test_update_attempt_sets_status_worker_heartbeat_and_metadata(store: LightningStore) -> None:
    started = await store.start_rollout("task")
    heartbeat = time.time()
    updated = await store.update_attempt(
        started.rollout_id,
        started.attempt.attempt_id,
        status="running",
        worker_id="worker-7",
        last_heartbeat_time=heartbeat,
        metadata={"step": 3},
    )
    assert updated.status == "running"
    assert updated.worker_id == "worker-7"
    assert updated.last_heartbeat_time == heartbeat
    assert updated.metadata == {"step": 3}
    stored = await store.get_latest_attempt(started.rollout_id)
    assert stored is not None
    assert (stored.status, stored.worker_id, stored.metadata) == ("running", "worker-7", {"step": 3})


async def test_update_attempt_distinguishes_none_from_omitted_fields(store: LightningStore) -> None:
    started = await store.start_rollout("task")
    await store.update_attempt(started.rollout_id, "latest", worker_id="w", metadata={"a": 1})
    replaced = await store.update_attempt(started.rollout_id, "latest", worker_id="", metadata={})
    assert (replaced.worker_id, replaced.metadata) == ("", {})
    await store.update_attempt(started.rollout_id, "latest", worker_id="w2", metadata={"b": 2})
    kept = await store.update_attempt(started.rollout_id, "latest", status="running")
    assert (kept.worker_id, kept.metadata, kept.status) == ("w2", {"b": 2}, "running")


async def test_update_attempt_latest_targets_the_highest_sequence(store: LightningStore) -> None:
    started = await store.start_rollout("task")
    await store.start_attempt(started.rollout_id)
    third = await store.start_attempt(started.rollout_id)
    updated = await store.update_attempt(started.rollout_id, "latest", status="succeeded")
    assert updated.attempt_id == third.attempt.attempt_id
    stored = await store.get_rollout_by_id(started.rollout_id)
    assert stored is not None and stored.status == "succeeded"


async def test_succeeded_attempt_sets_end_times_and_succeeds_the_rollout(store: LightningStore) -> None:
    started = await store.start_rollout("task")
    attempt = await store.update_attempt(started.rollout_id, "latest", status="succeeded")
    rollout = await store.get_rollout_by_id(started.rollout_id)
    assert attempt.end_time is not None and attempt.end_time >= attempt.start_time
    assert rollout is not None and rollout.status == "succeeded"
    assert rollout.end_time is not None and rollout.end_time >= attempt.end_time


async def test_running_attempt_has_no_end_time(store: LightningStore) -> None:
    started = await store.start_rollout("task")
    attempt = await store.update_attempt(started.rollout_id, "latest", status="running")
    assert attempt.end_time is None


async def test_failed_attempt_without_retry_fails_the_rollout(store: LightningStore) -> None:
    started = await store.start_rollout("task")
    attempt = await store.update_attempt(started.rollout_id, "latest", status="failed")
    rollout = await store.get_rollout_by_id(started.rollout_id)
    assert attempt.end_time is not None
    assert rollout is not None and rollout.status == "failed"
    assert rollout.end_time is not None and rollout.end_time >= attempt.end_time
    assert await store.dequeue_rollout() is None


async def test_failed_attempt_requeues_the_rollout_when_a_retry_is_allowed(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task", config=RolloutConfig(max_attempts=3, retry_condition=["failed"]))
    await store.dequeue_rollout()
    await store.update_attempt(queued.rollout_id, "latest", status="failed")
    rollout = await store.get_rollout_by_id(queued.rollout_id)
    assert rollout is not None and rollout.status == "requeuing"
    retry = await store.dequeue_rollout()
    assert retry is not None and retry.rollout_id == queued.rollout_id and retry.attempt.sequence_id == 2


async def test_retries_stop_after_max_attempts(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task", config=RolloutConfig(max_attempts=2, retry_condition=["failed"]))
    await store.dequeue_rollout()
    await store.update_attempt(queued.rollout_id, "latest", status="failed")
    await store.dequeue_rollout()
    await store.update_attempt(queued.rollout_id, "latest", status="failed")
    rollout = await store.get_rollout_by_id(queued.rollout_id)
    assert rollout is not None and rollout.status == "failed"
    assert await store.dequeue_rollout() is None


async def test_failure_not_listed_in_retry_condition_is_final(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task", config=RolloutConfig(max_attempts=3, retry_condition=["timeout"]))
    await store.dequeue_rollout()
    await store.update_attempt(queued.rollout_id, "latest", status="failed")
    rollout = await store.get_rollout_by_id(queued.rollout_id)
    assert rollout is not None and rollout.status == "failed"


async def test_only_the_latest_attempt_moves_the_rollout(store: LightningStore) -> None:
    started = await store.start_rollout("task")
    await store.start_attempt(started.rollout_id)
    await store.start_attempt(started.rollout_id)
    await store.update_attempt(started.rollout_id, started.attempt.attempt_id, status="succeeded")
    rollout = await store.get_rollout_by_id(started.rollout_id)
    assert rollout is not None and rollout.status == "preparing"
    await store.update_attempt(started.rollout_id, "latest", status="succeeded")
    rollout = await store.get_rollout_by_id(started.rollout_id)
    assert rollout is not None and rollout.status == "succeeded"


async def test_only_a_failing_latest_attempt_triggers_a_retry(store: LightningStore) -> None:
    config = RolloutConfig(max_attempts=3, retry_condition=["failed"])
    started = await store.start_rollout("task", config=config)
    second = await store.start_attempt(started.rollout_id)
    await store.update_attempt(started.rollout_id, started.attempt.attempt_id, status="failed")
    rollout = await store.get_rollout_by_id(started.rollout_id)
    assert rollout is not None and rollout.status == "preparing"
    await store.update_attempt(started.rollout_id, second.attempt.attempt_id, status="failed")
    rollout = await store.get_rollout_by_id(started.rollout_id)
    assert rollout is not None and rollout.status == "requeuing"


async def test_the_latest_attempt_changes_as_attempts_are_added(store: LightningStore) -> None:
    started = await store.start_rollout("task")
    await store.update_attempt(started.rollout_id, started.attempt.attempt_id, status="succeeded")
    second = await store.start_attempt(started.rollout_id)
    assert second.status == "preparing"
    await store.update_attempt(started.rollout_id, started.attempt.attempt_id, status="failed")
    rollout = await store.get_rollout_by_id(started.rollout_id)
    assert rollout is not None and rollout.status == "preparing"
    await store.update_attempt(started.rollout_id, second.attempt.attempt_id, status="failed")
    rollout = await store.get_rollout_by_id(started.rollout_id)
    assert rollout is not None and rollout.status == "failed"


async def test_metadata_only_update_does_not_move_the_rollout(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task", config=RolloutConfig(max_attempts=3, retry_condition=["failed"]))
    await store.dequeue_rollout()
    await store.update_attempt(queued.rollout_id, "latest", status="failed")
    await store.update_attempt(queued.rollout_id, "latest", metadata={"note": "post-mortem"})
    rollout = await store.get_rollout_by_id(queued.rollout_id)
    assert rollout is not None and rollout.status == "requeuing"
    assert await store.dequeue_rollout() is not None
    assert await store.dequeue_rollout() is None


async def test_cancelled_rollout_is_not_revived_by_its_attempt(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task", config=RolloutConfig(max_attempts=3, retry_condition=["failed"]))
    await store.dequeue_rollout()
    await store.update_rollout(queued.rollout_id, status="cancelled")
    await store.update_attempt(queued.rollout_id, "latest", status="failed")
    rollout = await store.get_rollout_by_id(queued.rollout_id)
    assert rollout is not None and rollout.status == "cancelled"
    assert await store.dequeue_rollout() is None


async def test_explicit_heartbeat_moves_a_preparing_attempt_to_running(store: LightningStore) -> None:
    started = await store.start_rollout("task")
    attempt = await store.update_attempt(started.rollout_id, "latest", last_heartbeat_time=time.time())
    rollout = await store.get_rollout_by_id(started.rollout_id)
    assert attempt.status == "running"
    assert rollout is not None and rollout.status == "running"


async def test_a_retry_lifecycle_from_failure_to_success(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task")
    first = await store.dequeue_rollout()
    assert first is not None
    await store.add_span(make_span(queued.rollout_id, first.attempt.attempt_id, 1))
    running = await store.get_rollout_by_id(queued.rollout_id)
    assert running is not None and running.status == "running"
    failed = await store.update_attempt(queued.rollout_id, first.attempt.attempt_id, status="failed")
    assert failed.end_time is not None
    await store.update_rollout(queued.rollout_id, status="requeuing")
    second = await store.dequeue_rollout()
    assert second is not None and second.attempt.sequence_id == 2 and second.attempt.status == "preparing"
    await store.add_span(make_span(queued.rollout_id, second.attempt.attempt_id, 2))
    latest = await store.get_latest_attempt(queued.rollout_id)
    assert latest is not None and latest.status == "running"
    await store.update_attempt(queued.rollout_id, second.attempt.attempt_id, status="succeeded")
    rollout = await store.get_rollout_by_id(queued.rollout_id)
    assert rollout is not None and rollout.status == "succeeded"
    assert [a.status for a in await store.query_attempts(queued.rollout_id)] == ["failed", "succeeded"]


async def test_full_success_lifecycle(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task")
    assert queued.status == "queuing"
    claimed = await store.dequeue_rollout()
    assert claimed is not None and claimed.status == "preparing" and claimed.attempt.status == "preparing"
    await store.add_span(make_span(queued.rollout_id, claimed.attempt.attempt_id, 1))
    attempt = await store.get_latest_attempt(queued.rollout_id)
    rollout = await store.get_rollout_by_id(queued.rollout_id)
    assert attempt is not None and attempt.status == "running" and attempt.last_heartbeat_time is not None
    assert rollout is not None and rollout.status == "running"
    await store.update_attempt(queued.rollout_id, "latest", status="succeeded")
    attempt = await store.get_latest_attempt(queued.rollout_id)
    rollout = await store.get_rollout_by_id(queued.rollout_id)
    assert attempt is not None and attempt.status == "succeeded" and attempt.end_time is not None
    assert rollout is not None and rollout.status == "succeeded" and rollout.end_time is not None


async def test_requeue_unacknowledged_claim_requeues_only_a_silent_claim(store: LightningStore) -> None:
    requeue = getattr(store, "requeue_unacknowledged_claim", None)
    if requeue is None:
        pytest.skip("a server-side operation of the core stores")
    silent = await store.enqueue_rollout("silent")
    alive = await store.enqueue_rollout("alive")
    first = await store.dequeue_rollout(worker_id="w1")
    second = await store.dequeue_rollout(worker_id="w2")
    assert first is not None and second is not None and first.rollout_id == silent.rollout_id
    await store.update_attempt(second.rollout_id, second.attempt.attempt_id, status="running")
    assert await requeue(first.rollout_id, first.attempt.attempt_id) is True
    assert await requeue(first.rollout_id, first.attempt.attempt_id) is False  # already requeued
    assert await requeue(second.rollout_id, second.attempt.attempt_id) is False  # acknowledged
    again = await store.dequeue_rollout(worker_id="w3")
    assert again is not None and again.rollout_id == silent.rollout_id and again.attempt.sequence_id == 2
    alive_now = await store.get_rollout_by_id(alive.rollout_id)
    assert alive_now is not None and alive_now.status == "running"
