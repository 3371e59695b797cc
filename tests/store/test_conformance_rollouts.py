"""Store contract: creating, queuing, claiming, querying and updating rollouts (every backend)."""

from __future__ import annotations

import pytest

from agentlightning.store import LightningStore
from agentlightning.store.errors import InvalidArgumentError
from agentlightning.types import LLM, AttemptedRollout, EnqueueRolloutRequest, PromptTemplate, Rollout, RolloutConfig


async def test_enqueue_rollout_stores_a_queuing_rollout_with_its_fields(store: LightningStore) -> None:
    rollout = await store.enqueue_rollout(
        {"question": "2+2"}, mode="train", resources_id="rs-given", metadata={"source": "unit"}
    )
    assert rollout.rollout_id.startswith("ro-")
    assert rollout.input == {"question": "2+2"}
    assert rollout.mode == "train"
    assert rollout.resources_id == "rs-given"
    assert rollout.metadata == {"source": "unit"}
    assert rollout.status == "queuing"
    assert rollout.start_time > 0
    assert rollout.end_time is None


async def test_enqueue_rollout_without_metadata_stores_an_empty_dict(store: LightningStore) -> None:
    rollout = await store.enqueue_rollout("task")
    assert rollout.metadata == {}
    assert rollout.config == RolloutConfig()


async def test_enqueue_rollout_keeps_a_custom_config(store: LightningStore) -> None:
    config = RolloutConfig(timeout_seconds=30.0, max_attempts=3, retry_condition=["failed", "timeout"])
    rollout = await store.enqueue_rollout("task", config=config)
    assert rollout.config == config
    stored = await store.get_rollout_by_id(rollout.rollout_id)
    assert stored is not None and stored.config == config


async def test_enqueue_rollout_copies_the_config_it_was_given(store: LightningStore) -> None:
    config = RolloutConfig(max_attempts=2)
    rollout = await store.enqueue_rollout("task", config=config)
    config.max_attempts = 5
    stored = await store.get_rollout_by_id(rollout.rollout_id)
    assert stored is not None and stored.config.max_attempts == 2


async def test_start_rollout_creates_a_preparing_rollout_with_its_first_attempt(store: LightningStore) -> None:
    started = await store.start_rollout("task", mode="val", resources_id="rs-1")
    assert isinstance(started, AttemptedRollout)
    assert started.rollout_id.startswith("ro-")
    assert started.status == "preparing"
    assert started.attempt.attempt_id.startswith("at-")
    assert started.attempt.sequence_id == 1
    assert started.attempt.status == "preparing"
    assert started.attempt.start_time == started.start_time
    preparing = await store.query_rollouts(status_in=["preparing"])
    assert [r.rollout_id for r in preparing] == [started.rollout_id]
    assert preparing[0].resources_id == "rs-1"
    attempts = await store.query_attempts(started.rollout_id)
    latest = await store.get_latest_attempt(started.rollout_id)
    assert [a.attempt_id for a in attempts] == [started.attempt.attempt_id]
    assert latest is not None and latest.attempt_id == started.attempt.attempt_id


async def test_start_rollout_keeps_a_custom_config(store: LightningStore) -> None:
    config = RolloutConfig(unresponsive_seconds=60.0, max_attempts=2, retry_condition=["unresponsive"])
    started = await store.start_rollout("task", config=config)
    stored = await store.get_rollout_by_id(started.rollout_id)
    assert stored is not None and stored.config == config


async def test_start_rollout_bypasses_the_queue(store: LightningStore) -> None:
    await store.start_rollout("task")
    assert await store.dequeue_rollout() is None


async def test_query_rollouts_filters_by_status(store: LightningStore) -> None:
    first = await store.enqueue_rollout("a")
    second = await store.enqueue_rollout("b")
    third = await store.enqueue_rollout("c")
    await store.dequeue_rollout()
    await store.update_rollout(second.rollout_id, status="failed")
    assert [r.rollout_id for r in await store.query_rollouts(status_in=["preparing"])] == [first.rollout_id]
    assert [r.rollout_id for r in await store.query_rollouts(status_in=["failed"])] == [second.rollout_id]
    assert [r.rollout_id for r in await store.query_rollouts(status_in=["queuing"])] == [third.rollout_id]
    both = await store.query_rollouts(status_in=["preparing", "queuing"])
    assert {r.rollout_id for r in both} == {first.rollout_id, third.rollout_id}


async def test_query_rollouts_accepts_the_legacy_filter_names(store: LightningStore) -> None:
    first = await store.enqueue_rollout("a")
    await store.enqueue_rollout("b")
    by_status = await store.query_rollouts(status=["queuing"], rollout_ids=[first.rollout_id])
    assert [r.rollout_id for r in by_status] == [first.rollout_id]


async def test_query_rollouts_new_filter_names_win_over_legacy_ones(store: LightningStore) -> None:
    first = await store.enqueue_rollout("a")
    second = await store.enqueue_rollout("b")
    result = await store.query_rollouts(rollout_id_in=[second.rollout_id], rollout_ids=[first.rollout_id])
    assert [r.rollout_id for r in result] == [second.rollout_id]


async def test_query_rollouts_with_an_empty_status_list_matches_nothing(store: LightningStore) -> None:
    await store.enqueue_rollout("a")
    assert list(await store.query_rollouts(status_in=[])) == []


async def test_query_rollouts_filters_by_ids(store: LightningStore) -> None:
    rollouts = [await store.enqueue_rollout(i) for i in range(4)]
    ids = [r.rollout_id for r in rollouts]
    assert [r.rollout_id for r in await store.query_rollouts(rollout_id_in=ids[1:3])] == ids[1:3]
    assert [r.rollout_id for r in await store.query_rollouts(rollout_id_in=[ids[0]])] == [ids[0]]
    assert list(await store.query_rollouts(rollout_id_in=["ro-unknown"])) == []


async def test_query_rollouts_combines_status_and_id_filters_with_and(store: LightningStore) -> None:
    first = await store.enqueue_rollout("a")
    second = await store.enqueue_rollout("b")
    await store.update_rollout(second.rollout_id, status="succeeded")
    result = await store.query_rollouts(status_in=["queuing"], rollout_id_in=[first.rollout_id, second.rollout_id])
    assert [r.rollout_id for r in result] == [first.rollout_id]


async def test_query_rollouts_filters_by_mode_combined_with_other_filters(store: LightningStore) -> None:
    train = await store.enqueue_rollout("a", mode="train")
    val = await store.enqueue_rollout("b", mode="val")
    await store.enqueue_rollout("c")
    finished = await store.enqueue_rollout("d", mode="train")
    await store.update_rollout(finished.rollout_id, status="succeeded")
    assert [r.rollout_id for r in await store.query_rollouts(mode_in=["train"])] == [
        train.rollout_id,
        finished.rollout_id,
    ]
    page = await store.query_rollouts(mode_in=["train", "val"], status_in=["queuing"], limit=1)
    assert [r.rollout_id for r in page] == [train.rollout_id]
    assert page.total == 2  # type: ignore[attr-defined]
    assert [r.rollout_id for r in await store.query_rollouts(mode_in=["val"])] == [val.rollout_id]
    assert list(await store.query_rollouts(mode_in=[])) == []


async def test_query_rollouts_rejects_an_unknown_mode(store: LightningStore) -> None:
    with pytest.raises(InvalidArgumentError, match=r"mode_in.*'training'"):
        await store.query_rollouts(mode_in=["training"])


async def test_query_rollouts_returns_rollouts_in_creation_order(store: LightningStore) -> None:
    ids = [(await store.enqueue_rollout(i)).rollout_id for i in range(5)]
    assert [r.rollout_id for r in await store.query_rollouts()] == ids


async def test_query_rollouts_attaches_the_latest_attempt(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("a")
    await store.dequeue_rollout()
    second = await store.start_attempt(queued.rollout_id)
    never_dequeued = await store.enqueue_rollout("b")
    result = {r.rollout_id: r for r in await store.query_rollouts()}
    with_attempt = result[queued.rollout_id]
    assert isinstance(with_attempt, AttemptedRollout)
    assert with_attempt.attempt.attempt_id == second.attempt.attempt_id
    assert with_attempt.attempt.sequence_id == 2
    assert not isinstance(result[never_dequeued.rollout_id], AttemptedRollout)


async def test_get_rollout_by_id_returns_none_for_an_unknown_id(store: LightningStore) -> None:
    assert await store.get_rollout_by_id("ro-unknown") is None


async def test_get_rollout_by_id_returns_a_plain_rollout_before_any_attempt(store: LightningStore) -> None:
    queued = await store.enqueue_rollout({"x": 1}, mode="test", metadata={"m": 1})
    stored = await store.get_rollout_by_id(queued.rollout_id)
    assert type(stored) is Rollout
    assert stored.input == {"x": 1} and stored.mode == "test" and stored.metadata == {"m": 1}
    assert not hasattr(stored, "attempt")


async def test_get_rollout_by_id_attaches_the_latest_attempt(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task")
    claimed = await store.dequeue_rollout()
    assert claimed is not None
    stored = await store.get_rollout_by_id(queued.rollout_id)
    assert isinstance(stored, AttemptedRollout)
    assert stored.attempt.attempt_id == claimed.attempt.attempt_id


async def test_get_rollout_by_id_reflects_status_updates(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task")
    await store.update_rollout(queued.rollout_id, status="running")
    stored = await store.get_rollout_by_id(queued.rollout_id)
    assert stored is not None and stored.status == "running"


async def test_returned_rollouts_are_snapshots(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task")
    queued.status = "succeeded"
    stored = await store.get_rollout_by_id(queued.rollout_id)
    assert stored is not None and stored.status == "queuing"


async def test_update_rollout_changes_several_fields_together(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task")
    config = RolloutConfig(timeout_seconds=5.0, max_attempts=4)
    updated = await store.update_rollout(
        queued.rollout_id,
        input="new task",
        mode="val",
        resources_id="rs-9",
        status="running",
        config=config,
        metadata={"k": "v"},
    )
    assert updated.input == "new task"
    assert updated.mode == "val"
    assert updated.resources_id == "rs-9"
    assert updated.status == "running"
    assert updated.config == config
    assert updated.metadata == {"k": "v"}
    stored = await store.get_rollout_by_id(queued.rollout_id)
    assert stored is not None
    assert (stored.input, stored.mode, stored.resources_id, stored.status) == ("new task", "val", "rs-9", "running")


async def test_update_rollout_keeps_configs_of_rollouts_independent(store: LightningStore) -> None:
    first = await store.enqueue_rollout("a")
    second = await store.enqueue_rollout("b")
    await store.update_rollout(first.rollout_id, config=RolloutConfig(max_attempts=3))
    await store.update_rollout(second.rollout_id, config=RolloutConfig(max_attempts=7))
    first_stored = await store.get_rollout_by_id(first.rollout_id)
    second_stored = await store.get_rollout_by_id(second.rollout_id)
    assert first_stored is not None and first_stored.config.max_attempts == 3
    assert second_stored is not None and second_stored.config.max_attempts == 7


async def test_update_rollout_distinguishes_none_from_omitted_fields(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task", mode="train", metadata={"a": 1})
    cleared = await store.update_rollout(queued.rollout_id, mode=None, metadata={"b": 2})
    assert cleared.mode is None and cleared.metadata == {"b": 2}
    kept = await store.update_rollout(queued.rollout_id, status="running")
    assert kept.mode is None and kept.metadata == {"b": 2} and kept.status == "running"
    assert kept.input == "task"


async def test_update_rollout_to_a_terminal_status_sets_end_time(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task")
    finished = await store.update_rollout(queued.rollout_id, status="succeeded")
    assert finished.end_time is not None and finished.end_time >= finished.start_time


async def test_cancelled_rollout_leaves_the_queue(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task")
    await store.update_rollout(queued.rollout_id, status="cancelled")
    assert await store.dequeue_rollout() is None


async def test_update_rollout_to_requeuing_puts_the_rollout_back_in_the_queue(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task")
    await store.dequeue_rollout()
    assert await store.dequeue_rollout() is None
    await store.update_rollout(queued.rollout_id, status="requeuing")
    again = await store.dequeue_rollout()
    assert again is not None and again.rollout_id == queued.rollout_id
    assert again.status == "preparing"
    assert again.attempt.sequence_id == 2
    assert again.attempt.status == "preparing"
    assert [a.sequence_id for a in await store.query_attempts(queued.rollout_id)] == [1, 2]


async def test_requeuing_twice_enqueues_the_rollout_once(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task")
    await store.dequeue_rollout()
    await store.update_rollout(queued.rollout_id, status="requeuing")
    await store.update_rollout(queued.rollout_id, status="queuing")
    assert await store.dequeue_rollout() is not None
    assert await store.dequeue_rollout() is None


async def test_dequeue_skips_rollouts_finished_while_queued(store: LightningStore) -> None:
    done = await store.enqueue_rollout("a")
    failed = await store.enqueue_rollout("b")
    waiting = await store.enqueue_rollout("c")
    await store.update_rollout(done.rollout_id, status="succeeded")
    await store.update_rollout(failed.rollout_id, status="failed")
    claimed = await store.dequeue_rollout()
    assert claimed is not None and claimed.rollout_id == waiting.rollout_id
    assert await store.dequeue_rollout() is None
    done_stored = await store.get_rollout_by_id(done.rollout_id)
    failed_stored = await store.get_rollout_by_id(failed.rollout_id)
    assert done_stored is not None and done_stored.status == "succeeded"
    assert failed_stored is not None and failed_stored.status == "failed"


async def test_dequeue_hands_out_rollouts_in_fifo_order(store: LightningStore) -> None:
    ids = [(await store.enqueue_rollout(i)).rollout_id for i in range(5)]
    claimed = [await store.dequeue_rollout() for _ in ids]
    assert [c.rollout_id for c in claimed if c is not None] == ids
    assert all(c is not None and c.status == "preparing" for c in claimed)


async def test_dequeue_on_an_empty_queue_returns_none_repeatedly(store: LightningStore) -> None:
    for _ in range(3):
        assert await store.dequeue_rollout() is None


async def test_dequeued_rollout_is_stored_as_preparing_with_its_attempt(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task")
    claimed = await store.dequeue_rollout()
    assert claimed is not None and claimed.attempt.sequence_id == 1
    stored = await store.get_rollout_by_id(queued.rollout_id)
    assert stored is not None and stored.status == "preparing"


async def test_enqueue_many_rollouts_keeps_order_and_fields(store: LightningStore) -> None:
    requests = [
        EnqueueRolloutRequest(input={"i": i}, mode="train", metadata={"i": i}, config=RolloutConfig(max_attempts=i + 1))
        for i in range(4)
    ]
    rollouts = await store.enqueue_many_rollouts(requests)
    assert [r.input for r in rollouts] == [{"i": i} for i in range(4)]
    assert [r.metadata for r in rollouts] == [{"i": i} for i in range(4)]
    assert [r.config.max_attempts for r in rollouts] == [1, 2, 3, 4]
    assert all(r.status == "queuing" and r.mode == "train" for r in rollouts)
    claimed = [await store.dequeue_rollout() for _ in range(4)]
    assert [c.rollout_id for c in claimed if c is not None] == [r.rollout_id for r in rollouts]


async def test_enqueue_many_rollouts_with_no_requests_returns_nothing(store: LightningStore) -> None:
    assert list(await store.enqueue_many_rollouts([])) == []


async def test_dequeue_many_rollouts_claims_up_to_the_limit_for_a_worker(store: LightningStore) -> None:
    ids = [(await store.enqueue_rollout(i)).rollout_id for i in range(4)]
    first = await store.dequeue_many_rollouts(limit=2, worker_id="worker-1")
    assert [r.rollout_id for r in first] == ids[:2]
    assert all(r.attempt.worker_id == "worker-1" for r in first)
    rest = await store.dequeue_many_rollouts(limit=5, worker_id="worker-1")
    assert [r.rollout_id for r in rest] == ids[2:]
    assert list(await store.dequeue_many_rollouts(limit=2)) == []


async def test_dequeue_many_rollouts_with_a_non_positive_limit_claims_nothing(store: LightningStore) -> None:
    await store.enqueue_rollout("task")
    assert list(await store.dequeue_many_rollouts(limit=0)) == []
    assert list(await store.dequeue_many_rollouts(limit=-3)) == []
    assert await store.dequeue_rollout() is not None


async def test_new_rollouts_inherit_the_latest_resources_id(store: LightningStore) -> None:
    prompt = PromptTemplate(template="Solve {x}", engine="f-string")
    first = await store.update_resources("v1", {"prompt": prompt})
    inherited = await store.enqueue_rollout("a")
    started = await store.start_rollout("b")
    explicit = await store.enqueue_rollout("c", resources_id="custom")
    assert inherited.resources_id == first.resources_id == "v1"
    assert started.resources_id == "v1"
    assert explicit.resources_id == "custom"
    await store.update_resources("v2", {"llm": LLM(endpoint="http://127.0.0.1:1/v1", model="m")})
    later = await store.enqueue_rollout("d")
    assert later.resources_id == "v2"


async def test_rollouts_have_no_resources_id_when_no_resources_exist(store: LightningStore) -> None:
    assert (await store.enqueue_rollout("task")).resources_id is None


async def test_start_attempt_on_a_queued_rollout_creates_its_first_attempt(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task")
    started = await store.start_attempt(queued.rollout_id)
    assert started.attempt.sequence_id == 1
    assert started.attempt.status == "preparing"
    assert started.attempt.attempt_id.startswith("at-")
    assert started.status == "preparing"
    assert [a.attempt_id for a in await store.query_attempts(queued.rollout_id)] == [started.attempt.attempt_id]
    assert await store.dequeue_rollout() is None


async def test_start_attempt_after_a_dequeue_increments_the_sequence(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task")
    await store.dequeue_rollout()
    second = await store.start_attempt(queued.rollout_id)
    third = await store.start_attempt(queued.rollout_id)
    assert (second.attempt.sequence_id, third.attempt.sequence_id) == (2, 3)
    assert [a.sequence_id for a in await store.query_attempts(queued.rollout_id)] == [1, 2, 3]


async def test_start_attempt_ignores_max_attempts(store: LightningStore) -> None:
    started = await store.start_rollout("task", config=RolloutConfig(max_attempts=2))
    await store.start_attempt(started.rollout_id)
    third = await store.start_attempt(started.rollout_id)
    assert third.attempt.sequence_id == 3


async def test_start_attempt_reopens_a_finished_rollout(store: LightningStore) -> None:
    started = await store.start_rollout("task")
    await store.update_attempt(started.rollout_id, "latest", status="succeeded")
    reopened = await store.start_attempt(started.rollout_id)
    assert reopened.status == "preparing"
    assert reopened.end_time is None
    stored = await store.get_rollout_by_id(started.rollout_id)
    assert stored is not None and stored.status == "preparing"
