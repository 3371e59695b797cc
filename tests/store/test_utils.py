"""Status propagation and health-check helpers (store.utils) and the pure state machine (store.lifecycle)."""

from __future__ import annotations

import time
from typing import Any, Optional
from unittest.mock import patch

import pytest

from agentlightning.store.core import lifecycle
from agentlightning.store.utils import (
    healthcheck,
    propagate_status,
    rollout_status_from_attempt,
    scan_unhealthy_rollouts,
)
from agentlightning.types import Attempt, AttemptedRollout, Rollout, RolloutConfig, Worker


def attempt(status: str = "preparing", sequence_id: int = 1, **fields: Any) -> Attempt:
    return Attempt(
        rollout_id="ro-1",
        attempt_id=f"at-{sequence_id}",
        sequence_id=sequence_id,
        start_time=fields.pop("start_time", time.time()),
        status=status,  # type: ignore[arg-type]
        **fields,
    )


def attempted(config: RolloutConfig, current: Optional[Attempt], rollout_id: str = "ro-1") -> AttemptedRollout:
    base = attempt() if current is None else current
    base.rollout_id = rollout_id
    rollout = AttemptedRollout(
        rollout_id=rollout_id, input=None, start_time=base.start_time, status="running", config=config, attempt=base
    )
    if current is None:
        rollout.attempt = None  # type: ignore[assignment]
    return rollout


class Recorder:
    def __init__(self) -> None:
        self.rollout_calls: list[tuple[str, str]] = []
        self.attempt_calls: list[tuple[str, str, str]] = []

    async def update_rollout(self, rollout_id: str, status: str) -> Rollout:
        self.rollout_calls.append((rollout_id, status))
        return Rollout(rollout_id=rollout_id, input=None, start_time=0.0, status=status)  # type: ignore[arg-type]

    async def update_attempt(self, rollout_id: str, attempt_id: str, status: str) -> Attempt:
        self.attempt_calls.append((rollout_id, attempt_id, status))
        return attempt(status, last_heartbeat_time=time.time())


@pytest.mark.parametrize("status", ["preparing", "running", "succeeded"])
async def test_propagate_status_passes_direct_statuses_through(status: str) -> None:
    recorder = Recorder()
    result = await propagate_status(recorder.update_rollout, attempt(status), RolloutConfig())
    assert recorder.rollout_calls == [("ro-1", status)]
    assert result.status == status


@pytest.mark.parametrize(
    "status, retry, sequence_id, max_attempts, expected",
    [
        ("failed", ["failed"], 1, 3, "requeuing"),
        ("failed", ["failed"], 3, 3, "failed"),
        ("failed", [], 1, 3, "failed"),
        ("timeout", ["timeout"], 2, 3, "requeuing"),
        ("timeout", [], 1, 3, "failed"),
        ("unresponsive", ["unresponsive"], 1, 2, "requeuing"),
        ("unresponsive", ["failed"], 1, 2, "failed"),
    ],
)
async def test_propagate_status_applies_the_retry_rules(
    status: str, retry: list[str], sequence_id: int, max_attempts: int, expected: str
) -> None:
    recorder = Recorder()
    config = RolloutConfig(max_attempts=max_attempts, retry_condition=retry)  # type: ignore[arg-type]
    await propagate_status(recorder.update_rollout, attempt(status, sequence_id), config)
    assert recorder.rollout_calls == [("ro-1", expected)]
    assert await rollout_status_from_attempt(attempt(status, sequence_id), config) == expected


async def test_propagate_status_rejects_an_unknown_attempt_status() -> None:
    recorder = Recorder()
    bad = attempt()
    bad.status = "invalid_status"  # type: ignore[assignment]
    with pytest.raises(ValueError, match="Invalid attempt status: invalid_status"):
        await propagate_status(recorder.update_rollout, bad, RolloutConfig())
    assert recorder.rollout_calls == []


async def test_healthcheck_of_no_rollouts_does_nothing() -> None:
    recorder = Recorder()
    await healthcheck([], recorder.update_rollout, recorder.update_attempt)
    assert recorder.rollout_calls == recorder.attempt_calls == []


async def test_healthcheck_times_out_only_expired_attempts() -> None:
    recorder = Recorder()
    two_seconds_ago = time.time() - 2
    rollouts = [
        attempted(RolloutConfig(timeout_seconds=1), attempt("running", start_time=two_seconds_ago), "ro-a"),
        attempted(RolloutConfig(timeout_seconds=10), attempt("running", start_time=two_seconds_ago), "ro-b"),
    ]
    await healthcheck(rollouts, recorder.update_rollout, recorder.update_attempt)
    assert recorder.attempt_calls == [("ro-a", "at-1", "timeout")]


@pytest.mark.parametrize(
    "timeout, unresponsive, expected",
    [(None, None, None), (None, 1.0, "unresponsive"), (1.0, None, "timeout"), (0.5, 1.0, "timeout"), (2.0, 0.5, "unresponsive")],
)  # fmt: skip
async def test_healthcheck_configuration_matrix(
    timeout: Optional[float], unresponsive: Optional[float], expected: Optional[str]
) -> None:
    recorder = Recorder()
    config = RolloutConfig(timeout_seconds=timeout, unresponsive_seconds=unresponsive)
    rollouts = [attempted(config, attempt("running", start_time=time.time() - 1.5))]
    await healthcheck(rollouts, recorder.update_rollout, recorder.update_attempt)
    assert recorder.attempt_calls == ([] if expected is None else [("ro-1", "at-1", expected)])
    found = await scan_unhealthy_rollouts(rollouts)
    assert found == ({} if expected is None else {("ro-1", "at-1"): expected})


@pytest.mark.parametrize("heartbeat_age, expected", [(0.5, None), (2.0, "unresponsive")])
async def test_healthcheck_measures_unresponsiveness_from_the_last_heartbeat(
    heartbeat_age: float, expected: Optional[str]
) -> None:
    recorder = Recorder()
    now = time.time()
    current = attempt("running", start_time=now - 10, last_heartbeat_time=now - heartbeat_age)
    await healthcheck(
        [attempted(RolloutConfig(unresponsive_seconds=1), current)], recorder.update_rollout, recorder.update_attempt
    )
    assert recorder.attempt_calls == ([] if expected is None else [("ro-1", "at-1", expected)])


async def test_healthcheck_promotes_a_preparing_attempt_with_a_heartbeat() -> None:
    recorder = Recorder()
    current = attempt("preparing", last_heartbeat_time=time.time())
    await healthcheck([attempted(RolloutConfig(), current)], recorder.update_rollout, recorder.update_attempt)
    assert recorder.attempt_calls == [("ro-1", "at-1", "running")]


async def test_healthcheck_repropagates_a_finished_latest_attempt() -> None:
    recorder = Recorder()
    await healthcheck(
        [attempted(RolloutConfig(), attempt("succeeded"))], recorder.update_rollout, recorder.update_attempt
    )
    assert recorder.rollout_calls == [("ro-1", "succeeded")]


async def test_healthcheck_skips_rollouts_without_an_attempt() -> None:
    recorder = Recorder()
    await healthcheck(
        [attempted(RolloutConfig(timeout_seconds=0), None)], recorder.update_rollout, recorder.update_attempt
    )
    assert recorder.attempt_calls == [] and recorder.rollout_calls == []
    assert await scan_unhealthy_rollouts([attempted(RolloutConfig(timeout_seconds=0), None)]) == {}


async def test_healthcheck_reads_the_clock_through_the_time_module() -> None:
    recorder = Recorder()
    current = attempt("running", start_time=1000.0)
    with patch("time.time", return_value=1000.5):
        await healthcheck(
            [attempted(RolloutConfig(timeout_seconds=1), current)], recorder.update_rollout, recorder.update_attempt
        )
    assert recorder.attempt_calls == []
    with patch("time.time", return_value=1001.5):
        await healthcheck(
            [attempted(RolloutConfig(timeout_seconds=1), current)], recorder.update_rollout, recorder.update_attempt
        )
    assert recorder.attempt_calls == [("ro-1", "at-1", "timeout")]


def test_health_deadline_is_the_earliest_rule() -> None:
    current = attempt("running", start_time=100.0, last_heartbeat_time=150.0)
    assert lifecycle.health_deadline(current, RolloutConfig(timeout_seconds=100, unresponsive_seconds=20)) == 170.0
    assert lifecycle.health_deadline(current, RolloutConfig(timeout_seconds=60, unresponsive_seconds=20)) == 160.0
    assert lifecycle.health_deadline(current, RolloutConfig()) is None


def test_terminal_rollout_status_stamps_end_time_and_leaving_it_clears_it() -> None:
    rollout = Rollout(rollout_id="ro-1", input=None, start_time=1.0, status="running")
    effects = lifecycle.set_rollout_status(rollout, "succeeded", 5.0)
    assert effects.finished and effects.queue == "remove" and rollout.end_time == 5.0
    effects = lifecycle.set_rollout_status(rollout, "requeuing", 6.0)
    assert not effects.finished and effects.queue == "push" and rollout.end_time is None


def test_attempt_end_time_is_stamped_only_for_failed_and_succeeded() -> None:
    current = attempt("running")
    lifecycle.set_attempt_status(current, "timeout", 9.0)
    assert current.end_time is None
    lifecycle.set_attempt_status(current, "failed", 10.0)
    assert current.end_time == 10.0


def test_heartbeat_revives_only_preparing_and_unresponsive_attempts() -> None:
    for status, revived in [("preparing", True), ("unresponsive", True), ("timeout", False), ("failed", False)]:
        current = attempt(status)
        assert lifecycle.record_heartbeat(current, 3.0) is revived
        assert current.last_heartbeat_time == 3.0
        assert current.status == ("running" if revived else status)


def test_worker_follows_the_status_of_its_attempt() -> None:
    worker = Worker(worker_id="w")
    for status, expected in [("running", "busy"), ("succeeded", "idle"), ("timeout", "unknown"), ("preparing", "busy")]:
        lifecycle.sync_worker_with_attempt(worker, attempt(status), 1.0)
        assert worker.status == expected
        assert (worker.current_attempt_id is not None) is (expected == "busy")
