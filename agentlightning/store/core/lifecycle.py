"""The rollout/attempt/worker state machine as plain functions over the models.

Every store backend calls these functions; backends only decide how the results are stored atomically. Functions
named `set_*`/`record_*` mutate the model they are given (callers pass their own copies) and report the side effects
the backend must carry out (queue changes, completion notifications).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from agentlightning.store.base import FINISHED_STATUSES, QUEUING_STATUSES
from agentlightning.types import Attempt, AttemptStatus, Rollout, RolloutConfig, RolloutStatus, Worker

ROLLOUT_STATUSES: tuple[RolloutStatus, ...] = (
    "queuing",
    "preparing",
    "running",
    "failed",
    "succeeded",
    "cancelled",
    "requeuing",
)
ATTEMPT_STATUSES: tuple[AttemptStatus, ...] = ("preparing", "running", "failed", "succeeded", "unresponsive", "timeout")
RETRYABLE_ATTEMPT_STATUSES: tuple[AttemptStatus, ...] = ("failed", "timeout", "unresponsive")
ATTEMPT_END_STATUSES: tuple[AttemptStatus, ...] = ("failed", "succeeded")
ATTEMPT_REVIVABLE_STATUSES: tuple[AttemptStatus, ...] = ("preparing", "unresponsive")
ROLLOUT_STATUSES_PROMOTED_BY_SPAN: tuple[RolloutStatus, ...] = ("preparing", "queuing", "requeuing")

QueueAction = Literal["push", "remove"]


@dataclass(frozen=True)
class RolloutStatusEffects:
    """What a rollout status assignment requires beyond the row itself."""

    queue: QueueAction
    finished: bool


def derive_rollout_status(attempt: Attempt, config: RolloutConfig) -> RolloutStatus:
    """The rollout status implied by its latest attempt.

    preparing/running/succeeded carry over; failed, timeout and unresponsive give "requeuing" when the status is in
    `config.retry_condition` and `attempt.sequence_id < config.max_attempts`, otherwise "failed".
    """
    status = attempt.status
    if status in ("preparing", "running", "succeeded"):
        return status
    if status in RETRYABLE_ATTEMPT_STATUSES:
        if status in config.retry_condition and attempt.sequence_id < config.max_attempts:
            return "requeuing"
        return "failed"
    raise ValueError(f"Invalid attempt status: {status}")


def unhealthy_attempt_status(attempt: Attempt, config: RolloutConfig, now: float) -> Optional[AttemptStatus]:
    """ "timeout" or "unresponsive" when the attempt broke a health rule at `now`, else None.

    Timeout is measured from the attempt start and wins over unresponsiveness, which is measured from the last
    heartbeat (or from the start when no heartbeat arrived).
    """
    if config.timeout_seconds is not None and now - attempt.start_time > config.timeout_seconds:
        return "timeout"
    if config.unresponsive_seconds is not None:
        reference = attempt.last_heartbeat_time if attempt.last_heartbeat_time else attempt.start_time
        if now - reference > config.unresponsive_seconds:
            return "unresponsive"
    return None


def health_deadline(attempt: Attempt, config: RolloutConfig) -> Optional[float]:
    """The earliest time at which `unhealthy_attempt_status` could report a problem, or None if never."""
    deadlines: list[float] = []
    if config.timeout_seconds is not None:
        deadlines.append(attempt.start_time + config.timeout_seconds)
    if config.unresponsive_seconds is not None:
        reference = attempt.last_heartbeat_time if attempt.last_heartbeat_time else attempt.start_time
        deadlines.append(reference + config.unresponsive_seconds)
    return min(deadlines) if deadlines else None


def has_health_rules(config: RolloutConfig) -> bool:
    return config.timeout_seconds is not None or config.unresponsive_seconds is not None


def set_rollout_status(rollout: Rollout, status: RolloutStatus, now: float) -> RolloutStatusEffects:
    """Assign a rollout status: terminal statuses stamp `end_time`, leaving a terminal status clears it.

    Queuing statuses put the rollout in the queue (the queue ignores rollouts already in it); every other status
    takes it out.
    """
    previous = rollout.status
    rollout.status = status
    if status in FINISHED_STATUSES:
        rollout.end_time = now
        return RolloutStatusEffects(queue="remove", finished=True)
    if previous in FINISHED_STATUSES:
        rollout.end_time = None
    if status in QUEUING_STATUSES:
        return RolloutStatusEffects(queue="push", finished=False)
    return RolloutStatusEffects(queue="remove", finished=False)


def set_attempt_status(attempt: Attempt, status: AttemptStatus, now: float) -> None:
    """Assign an attempt status: failed/succeeded stamp `end_time`; back to preparing/running clears it."""
    attempt.status = status
    if status in ATTEMPT_END_STATUSES:
        attempt.end_time = now
    elif status in ("preparing", "running"):
        attempt.end_time = None


def record_heartbeat(attempt: Attempt, now: float) -> bool:
    """A span or heartbeat arrived for the attempt. Revives preparing/unresponsive attempts; True if status changed."""
    attempt.last_heartbeat_time = now
    if attempt.status in ATTEMPT_REVIVABLE_STATUSES:
        attempt.status = "running"
        return True
    return False


def rollout_status_after_span(rollout: Rollout) -> Optional[RolloutStatus]:
    """The status a rollout moves to when its latest attempt emits a span, or None to keep it."""
    if rollout.status in ROLLOUT_STATUSES_PROMOTED_BY_SPAN:
        return "running"
    return None


def worker_status_for_attempt(status: AttemptStatus) -> Literal["idle", "busy", "unknown"]:
    if status in ATTEMPT_END_STATUSES:
        return "idle"
    if status in ("timeout", "unresponsive"):
        return "unknown"
    return "busy"


def sync_worker_with_attempt(worker: Worker, attempt: Attempt, now: float) -> None:
    """Reflect the attempt a worker runs: busy while it runs, idle after it ends, unknown when it went silent."""
    status = worker_status_for_attempt(attempt.status)
    worker.status = status
    if status == "busy":
        worker.last_busy_time = now
        worker.current_rollout_id = attempt.rollout_id
        worker.current_attempt_id = attempt.attempt_id
        return
    if status == "idle":
        worker.last_idle_time = now
    worker.current_rollout_id = None
    worker.current_attempt_id = None


def release_worker(worker: Worker, now: float) -> None:
    """The worker no longer runs the attempt it was assigned."""
    worker.status = "idle"
    worker.last_idle_time = now
    worker.current_rollout_id = None
    worker.current_attempt_id = None


def record_empty_dequeue(worker: Worker, now: float) -> None:
    """The worker asked for work and got none: it is idle unless it still runs an attempt."""
    worker.last_dequeue_time = now
    if worker.status != "busy":
        release_worker(worker, now)
