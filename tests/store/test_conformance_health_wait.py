"""Store contract: health rules (timeouts, unresponsiveness) and waiting for rollouts (every backend).

The health rules run on a fake clock (`agentlightning.store.core.clock.use_clock`) that the tests move forward
explicitly, so they do not depend on how fast a loaded machine runs them; the stores served over HTTP in these tests
live in this process and read the same clock. The waiting tests use short real timeouts; their upper bounds on
elapsed time only guard against hangs and are deliberately generous.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from agentlightning.store import InvalidArgumentError, LightningStore
from agentlightning.store.core.clock import use_clock
from agentlightning.types import RolloutConfig

from .helpers import make_span

HANG_GUARD = 10.0


class FakeClock:
    """A wall clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Iterator[FakeClock]:
    fake = FakeClock()
    with use_clock(fake):
        yield fake


async def test_timeout_marks_the_attempt_and_requeues_when_retry_allowed(
    store: LightningStore, clock: FakeClock
) -> None:
    config = RolloutConfig(timeout_seconds=10, max_attempts=2, retry_condition=["timeout"])
    queued = await store.enqueue_rollout("task", config=config)
    await store.dequeue_rollout()
    clock.advance(11)
    attempts = await store.query_attempts(queued.rollout_id)
    rollout = await store.get_rollout_by_id(queued.rollout_id)
    assert [a.status for a in attempts] == ["timeout"]
    assert rollout is not None and rollout.status == "requeuing"
    retry = await store.dequeue_rollout()
    assert retry is not None and retry.attempt.sequence_id == 2


async def test_a_timeout_fires_only_once_its_seconds_have_passed(store: LightningStore, clock: FakeClock) -> None:
    started = await store.start_rollout("task", config=RolloutConfig(timeout_seconds=10))
    clock.advance(10)
    attempt = await store.get_latest_attempt(started.rollout_id)
    assert attempt is not None and attempt.status == "preparing"
    clock.advance(0.01)
    attempt = await store.get_latest_attempt(started.rollout_id)
    assert attempt is not None and attempt.status == "timeout"


async def test_unresponsive_attempt_fails_the_rollout_without_retry(store: LightningStore, clock: FakeClock) -> None:
    config = RolloutConfig(unresponsive_seconds=10, retry_condition=["timeout"], max_attempts=3)
    started = await store.start_rollout("task", config=config)
    clock.advance(11)
    attempt = await store.get_latest_attempt(started.rollout_id)
    rollout = await store.get_rollout_by_id(started.rollout_id)
    assert attempt is not None and attempt.status == "unresponsive"
    assert rollout is not None and rollout.status == "failed"


async def test_unresponsiveness_counts_from_the_last_heartbeat(store: LightningStore, clock: FakeClock) -> None:
    started = await store.start_rollout("task", config=RolloutConfig(unresponsive_seconds=30))
    for sequence_id in range(1, 5):
        clock.advance(10)
        await store.add_span(make_span(started.rollout_id, started.attempt.attempt_id, sequence_id))
    attempt = await store.get_latest_attempt(started.rollout_id)
    assert attempt is not None and attempt.status == "running"  # 40 s since the start, 0 since the heartbeat
    clock.advance(29)
    attempt = await store.get_latest_attempt(started.rollout_id)
    assert attempt is not None and attempt.status == "running"
    clock.advance(2)
    attempt = await store.get_latest_attempt(started.rollout_id)
    assert attempt is not None and attempt.status == "unresponsive"


async def test_timeout_wins_over_unresponsiveness(store: LightningStore, clock: FakeClock) -> None:
    started = await store.start_rollout("task", config=RolloutConfig(timeout_seconds=10, unresponsive_seconds=10))
    clock.advance(11)
    attempt = await store.get_latest_attempt(started.rollout_id)
    assert attempt is not None and attempt.status == "timeout"


async def test_rollouts_without_health_rules_never_time_out(store: LightningStore, clock: FakeClock) -> None:
    started = await store.start_rollout("task")
    clock.advance(365 * 24 * 3600)
    attempt = await store.get_latest_attempt(started.rollout_id)
    assert attempt is not None and attempt.status == "preparing"


async def test_health_rules_apply_to_the_latest_attempt_only(store: LightningStore, clock: FakeClock) -> None:
    config = RolloutConfig(timeout_seconds=30, max_attempts=3, retry_condition=["timeout"])
    started = await store.start_rollout("task", config=config)
    clock.advance(20)
    await store.start_attempt(started.rollout_id)
    clock.advance(15)  # the first attempt is 35 s old, past the timeout, but no longer the latest
    attempts = await store.query_attempts(started.rollout_id)
    assert [a.status for a in attempts] == ["preparing", "preparing"]


async def test_timed_out_worker_becomes_unknown(store: LightningStore, clock: FakeClock) -> None:
    await store.enqueue_rollout("task", config=RolloutConfig(timeout_seconds=10))
    await store.dequeue_rollout(worker_id="worker-1")
    clock.advance(11)
    await store.query_rollouts()
    worker = await store.get_worker_by_id("worker-1")
    assert worker is not None and worker.status == "unknown" and worker.current_attempt_id is None


async def test_wait_returns_rollouts_finished_during_the_wait(store: LightningStore) -> None:
    first = await store.start_rollout("a")
    second = await store.start_rollout("b")

    async def finish() -> None:
        await asyncio.sleep(0.1)
        await store.update_attempt(first.rollout_id, "latest", status="succeeded")
        await store.update_attempt(second.rollout_id, "latest", status="failed")

    task = asyncio.create_task(finish())
    done = await store.wait_for_rollouts(rollout_ids=[first.rollout_id, second.rollout_id], timeout=HANG_GUARD)
    await task
    assert [(r.rollout_id, r.status) for r in done] == [(first.rollout_id, "succeeded"), (second.rollout_id, "failed")]


async def test_wait_returns_only_finished_rollouts_when_the_timeout_expires(store: LightningStore) -> None:
    rollouts = [await store.start_rollout(i) for i in range(3)]
    await store.update_attempt(rollouts[1].rollout_id, "latest", status="succeeded")
    start = time.monotonic()
    done = await store.wait_for_rollouts(rollout_ids=[r.rollout_id for r in rollouts], timeout=0.2)
    elapsed = time.monotonic() - start
    assert [r.rollout_id for r in done] == [rollouts[1].rollout_id]
    assert 0.15 <= elapsed < HANG_GUARD


async def test_wait_with_zero_timeout_returns_at_once(store: LightningStore) -> None:
    pending = await store.start_rollout("a")
    finished = await store.start_rollout("b")
    await store.update_attempt(finished.rollout_id, "latest", status="succeeded")
    done = await store.wait_for_rollouts(rollout_ids=[pending.rollout_id, finished.rollout_id], timeout=0)
    assert [r.rollout_id for r in done] == [finished.rollout_id]


async def test_wait_without_timeout_returns_when_the_rollout_finishes(store: LightningStore) -> None:
    started = await store.start_rollout("task")

    async def finish() -> None:
        await asyncio.sleep(0.3)
        await store.update_attempt(started.rollout_id, "latest", status="succeeded")

    task = asyncio.create_task(finish())
    done = await asyncio.wait_for(store.wait_for_rollouts(rollout_ids=[started.rollout_id]), HANG_GUARD)
    await task
    assert [r.status for r in done] == ["succeeded"]


async def test_wait_without_timeout_can_be_cancelled(store: LightningStore) -> None:
    started = await store.start_rollout("task")
    task = asyncio.create_task(store.wait_for_rollouts(rollout_ids=[started.rollout_id]))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


async def test_wait_on_finished_rollouts_returns_them(store: LightningStore) -> None:
    started = await store.start_rollout("task")
    await store.update_rollout(started.rollout_id, status="cancelled")
    done = await store.wait_for_rollouts(rollout_ids=[started.rollout_id], timeout=HANG_GUARD)
    assert [r.status for r in done] == ["cancelled"]


async def test_wait_collects_rollouts_finishing_at_different_times(store: LightningStore) -> None:
    rollouts = [await store.start_rollout(i) for i in range(3)]

    async def finish() -> None:
        for rollout in reversed(rollouts):
            await asyncio.sleep(0.05)
            await store.update_attempt(rollout.rollout_id, "latest", status="succeeded")

    task = asyncio.create_task(finish())
    done = await store.wait_for_rollouts(rollout_ids=[r.rollout_id for r in rollouts], timeout=HANG_GUARD)
    await task
    assert [r.rollout_id for r in done] == [r.rollout_id for r in rollouts]


async def test_concurrent_waiters_all_see_the_completion(store: LightningStore) -> None:
    started = await store.start_rollout("task")
    waiters = [
        asyncio.create_task(store.wait_for_rollouts(rollout_ids=[started.rollout_id], timeout=HANG_GUARD))
        for _ in range(5)
    ]
    await asyncio.sleep(0.05)
    await store.update_attempt(started.rollout_id, "latest", status="succeeded")
    results = await asyncio.gather(*waiters)
    assert all([r.rollout_id for r in result] == [started.rollout_id] for result in results)


async def test_wait_ignores_unknown_rollouts(store: LightningStore) -> None:
    finished = await store.start_rollout("task")
    await store.update_attempt(finished.rollout_id, "latest", status="succeeded")
    start = time.monotonic()
    done = await store.wait_for_rollouts(rollout_ids=["ro-unknown", finished.rollout_id], timeout=HANG_GUARD)
    assert [r.rollout_id for r in done] == [finished.rollout_id]
    assert time.monotonic() - start < HANG_GUARD / 2


async def test_wait_sees_timeouts_without_other_store_calls(store: LightningStore) -> None:
    started = await store.start_rollout("task", config=RolloutConfig(timeout_seconds=0.2))
    done = await store.wait_for_rollouts(rollout_ids=[started.rollout_id], timeout=HANG_GUARD)
    assert [r.status for r in done] == ["failed"]


async def test_wait_rejects_a_negative_timeout(store: LightningStore) -> None:
    with pytest.raises(InvalidArgumentError, match="timeout"):
        await store.wait_for_rollouts(rollout_ids=[], timeout=-1)
