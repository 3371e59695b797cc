"""Status propagation and health checking helpers (public, backend-independent).

`propagate_status`/`healthcheck` are the 0.2 callback-style helpers; `rollout_status_from_attempt` and
`scan_unhealthy_rollouts` are the 0.3 forms that return decisions instead of calling back. All of them apply the
rules in `agentlightning.store.core.lifecycle`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from agentlightning.store.core import clock
from agentlightning.store.core.lifecycle import derive_rollout_status, unhealthy_attempt_status
from agentlightning.types import Attempt, AttemptedRollout, AttemptStatus, Rollout, RolloutConfig, RolloutStatus

__all__ = [
    "LATENCY_BUCKETS",
    "UpdateAttemptStatus",
    "UpdateRolloutStatus",
    "healthcheck",
    "propagate_status",
    "rollout_status_from_attempt",
    "scan_unhealthy_rollouts",
]

UpdateRolloutStatus = Callable[[str, RolloutStatus], Awaitable[Rollout]]
UpdateAttemptStatus = Callable[[str, str, AttemptStatus], Awaitable[Attempt]]

LATENCY_BUCKETS: tuple[float, ...] = (
    1e-6, 5e-6, 1e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
)  # fmt: skip


async def propagate_status(
    update_rollout_status: UpdateRolloutStatus, attempt: Attempt, config: RolloutConfig
) -> Rollout:
    """Move the attempt's rollout to the status its attempt implies, through `update_rollout_status`.

    Raises ValueError("Invalid attempt status: ...") without calling back for a status outside AttemptStatus.
    """
    status = derive_rollout_status(attempt, config)
    return await update_rollout_status(attempt.rollout_id, status)


async def rollout_status_from_attempt(attempt: Attempt, config: RolloutConfig) -> RolloutStatus:
    """The rollout status implied by `attempt` (same rules as `propagate_status`)."""
    return derive_rollout_status(attempt, config)


async def healthcheck(
    rollouts: list[AttemptedRollout],
    update_rollout_status: UpdateRolloutStatus,
    update_attempt_status: UpdateAttemptStatus,
) -> None:
    """Apply the health rules to running rollouts (each given with its latest attempt).

    For each rollout: a finished latest attempt re-propagates its status; an attempt past `timeout_seconds` (from its
    start) becomes "timeout"; a preparing attempt with a heartbeat becomes "running"; an attempt silent for longer
    than `unresponsive_seconds` (since its last heartbeat, or its start) becomes "unresponsive".
    """
    now = clock.now()
    for rollout in rollouts:
        attempt = rollout.attempt
        if not attempt:
            continue
        config = rollout.config
        if attempt.status in ("failed", "succeeded"):
            await propagate_status(update_rollout_status, attempt, config)
            continue
        if config.timeout_seconds is not None and now - attempt.start_time > config.timeout_seconds:
            await update_attempt_status(rollout.rollout_id, attempt.attempt_id, "timeout")
            continue
        heartbeat = attempt.last_heartbeat_time
        if heartbeat:
            if attempt.status == "preparing":
                attempt = await update_attempt_status(rollout.rollout_id, attempt.attempt_id, "running")
            if config.unresponsive_seconds is not None and now - heartbeat > config.unresponsive_seconds:
                await update_attempt_status(rollout.rollout_id, attempt.attempt_id, "unresponsive")
            continue
        if config.unresponsive_seconds is not None and now - attempt.start_time > config.unresponsive_seconds:
            await update_attempt_status(rollout.rollout_id, attempt.attempt_id, "unresponsive")


async def scan_unhealthy_rollouts(rollouts: Sequence[AttemptedRollout]) -> dict[tuple[str, str], AttemptStatus]:
    """The attempts that broke a health rule now, keyed by (rollout_id, attempt_id)."""
    now = clock.now()
    found: dict[tuple[str, str], AttemptStatus] = {}
    for rollout in rollouts:
        attempt = rollout.attempt
        if not attempt:
            continue
        status = unhealthy_attempt_status(attempt, rollout.config, now)
        if status is not None:
            found[(rollout.rollout_id, attempt.attempt_id)] = status
    return found
