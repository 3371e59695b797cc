"""The runner's store calls that must survive an outage or a stop: registering with a store that is not up yet,
writes retried until the store is back, the claim lost to an interruption, and sleeping until stopped.

A store that cannot be reached at start is waited for (`connect_timeout`); a store that goes away later is ridden
out: calls are retried until they succeed, their time limit passes (the whole call, retries and waits included, ends
by then), or the runner is asked to stop (then it gives up within `INTERRUPTED_WRITE_TIMEOUT` seconds). An outage is
retried that way (`errors.is_transient_store_error`); an error answer of the server itself (a 500, a 507) for at most
`SERVER_ERROR_RETRY_SECONDS` (it may be a passing fault, or a bug that repeating will not fix); any other store
error (a 4xx) is raised at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Optional, TypeVar

from agentlightning.utils.retry import FOREVER, RetryAttempt, RetryError, RetryEvent, RetryPolicy, retry_async

from .errors import (
    StoreUnreachableError,
    describe_store,
    is_retryable_store_error,
    is_server_error,
    is_transient_store_error,
)
from .results import RunnerInterrupted, attempt_metadata, outcome_of_exception

if TYPE_CHECKING:
    from agentlightning.execution.events import ExecutionEvent
    from agentlightning.store.base import LightningStore

    from .heartbeat import Heartbeat

__all__ = [
    "INTERRUPTED_WRITE_TIMEOUT",
    "SERVER_ERROR_RETRY_SECONDS",
    "is_set",
    "register_worker",
    "release_lost_claim",
    "retry_store_call",
    "sleep_unless_stopped",
]

logger = logging.getLogger(__name__)

R = TypeVar("R")

STOP_CHECK = 0.1
"""Seconds between checks of the stop event while sleeping."""
INTERRUPTED_WRITE_TIMEOUT = 5.0
"""How long a stopping runner keeps trying to record its last attempt."""
CONNECT_RETRY = RetryPolicy(max_retries=FOREVER, initial_delay=0.1, max_delay=2.0, jitter=0.0)
"""Registering waits for a store that is not up yet, until `connect_timeout` passes or the runner stops."""
SERVER_ERROR_RETRY_SECONDS = 30.0
"""How long a store call answered with a server error (5xx other than 502/503/504) keeps being retried."""
STORE_RETRY = RetryPolicy(max_retries=FOREVER, initial_delay=0.2, max_delay=5.0, jitter=0.0)
"""Store calls ride out an outage: retried until they succeed, their time limit passes or the runner stops."""


def is_set(event: Optional[ExecutionEvent]) -> bool:
    return event is not None and event.is_set()


async def sleep_unless_stopped(seconds: float, event: Optional[ExecutionEvent]) -> None:
    """Sleep, waking early when `event` is set."""
    if event is None:
        await asyncio.sleep(seconds)
        return
    deadline = time.monotonic() + seconds
    while not event.is_set():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        await asyncio.sleep(min(remaining, STOP_CHECK))


async def retry_store_call(
    operation: Callable[[], Awaitable[R]],
    what: str,
    *,
    worker_id: str,
    event: Optional[ExecutionEvent],
    limit: Optional[float] = None,
) -> R:
    """Run a store operation, riding out an outage (an unreachable or restarting store) and a passing server error.

    Retries until it succeeds; after `limit` seconds (the retries and the waits between them included; the first try
    is bounded by the store client's own request timeout), `SERVER_ERROR_RETRY_SECONDS` of server errors, or a few
    seconds after the runner is asked to stop, it gives up and raises the last error (TimeoutError for a retry cut
    short by the limit). Other errors (4xx) are raised at once.
    """
    started = time.monotonic()
    deadline = None if limit is None else started + limit

    def remaining() -> Optional[float]:
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    server_errors_since: Optional[float] = None

    def worth_retrying(exc: Exception) -> bool:
        nonlocal server_errors_since
        now = time.monotonic()
        if is_server_error(exc):
            server_errors_since = now if server_errors_since is None else server_errors_since
            if now - server_errors_since >= SERVER_ERROR_RETRY_SECONDS:
                return False
        elif not is_transient_store_error(exc):
            return False
        left = remaining()
        out_of_time = left is not None and left <= 0
        return not out_of_time and not (is_set(event) and now - started >= INTERRUPTED_WRITE_TIMEOUT)

    warned = False

    def warn_once(retry: RetryEvent) -> None:
        nonlocal warned
        if not warned:
            logger.warning("%s: cannot %s yet (%r); retrying", worker_id, what, retry.error)
            warned = True

    async def attempt(try_: RetryAttempt) -> R:
        left = remaining()
        if left is None or try_.number == 1:  # the first try is bounded by the store client's own timeouts
            return await operation()
        return await asyncio.wait_for(operation(), max(left, STOP_CHECK))

    async def sleep_within_limit(seconds: float) -> None:
        left = remaining()
        await asyncio.sleep(seconds if left is None else min(seconds, left))

    result = await retry_async(
        attempt,
        STORE_RETRY,
        what=what,
        retry_on=worth_retrying,  # once it says no, the last error propagates
        on_retry=warn_once,
        sleep=sleep_within_limit,
    )
    if warned:
        logger.info("%s: %s succeeded after %.1f s", worker_id, what, time.monotonic() - started)
    return result


async def register_worker(
    heartbeat: Heartbeat, *, worker_id: str, connect_timeout: float, event: Optional[ExecutionEvent]
) -> bool:
    """Register the worker (its first heartbeat), waiting for a store that is not reachable yet. False if stopped
    meanwhile.

    Raises:
        StoreUnreachableError: the store could not be reached within `connect_timeout` seconds.
    """
    deadline = time.monotonic() + connect_timeout
    timed_out = False
    warned = False

    def worth_retrying(exc: Exception) -> bool:
        nonlocal timed_out
        timed_out = time.monotonic() >= deadline
        return is_retryable_store_error(exc) and not timed_out

    def note(retry: RetryEvent) -> None:
        nonlocal warned
        if not warned:
            logger.info("%s: waiting for the store at %s (%r)", worker_id, describe_store(heartbeat.store), retry.error)
            warned = True

    async def beat(_: RetryAttempt) -> None:
        await heartbeat.beat_worker()

    async def not_stopped() -> bool:
        return not is_set(event)

    async def sleep_until_deadline(seconds: float) -> None:
        await sleep_unless_stopped(min(seconds, max(0.0, deadline - time.monotonic())), event)

    try:
        await retry_async(
            beat,
            CONNECT_RETRY,
            what=f"{worker_id} registering with the store",
            retry_on=worth_retrying,
            on_retry=note,
            ready=not_stopped,
            sleep=sleep_until_deadline,
        )
    except RetryError:  # asked to stop while waiting
        return False
    except Exception as exc:
        if timed_out and is_retryable_store_error(exc):
            failed = "register with" if is_server_error(exc) else "reach"
            raise StoreUnreachableError(
                f"{worker_id} could not {failed} the store at {describe_store(heartbeat.store)} "
                f"within {connect_timeout:g} s (connect_timeout): {exc}"
            ) from exc
        raise
    if warned:
        logger.info("%s reached the store at %s", worker_id, describe_store(heartbeat.store))
    return True


async def release_lost_claim(store: LightningStore, worker_id: str) -> None:
    """Interrupted while claiming: the store may have handed us a rollout whose answer never arrived. Fail that
    attempt so the rollout does not stay "preparing" (the worker record names it). Best effort, bounded in time."""

    async def release() -> None:
        worker = await store.get_worker_by_id(worker_id)
        if worker is None or not worker.current_rollout_id or not worker.current_attempt_id:
            return
        attempt = await store.get_latest_attempt(worker.current_rollout_id)
        if attempt is None or attempt.attempt_id != worker.current_attempt_id or attempt.status != "preparing":
            return
        outcome = outcome_of_exception(RunnerInterrupted("the runner stopped while claiming this rollout"))
        metadata = attempt_metadata(attempt.metadata, outcome, final_reward=None, duration_seconds=0.0)
        await store.update_attempt(attempt.rollout_id, attempt.attempt_id, status=outcome.status, metadata=metadata)

    try:
        await asyncio.wait_for(release(), INTERRUPTED_WRITE_TIMEOUT)
    except BaseException as exc:  # best effort while stopping
        logger.debug("Could not release a claim interrupted in flight: %r", exc)
