"""The shared retry policy and loop: waits, what is retried, how it gives up, and that cancellation stops it."""

from __future__ import annotations

import asyncio
import random

import pytest

from agentlightning.store.http.client.retry import FixedDelays as StoreFixedDelays
from agentlightning.store.http.client.retry import RetryPolicy as StoreRetryPolicy
from agentlightning.utils.retry import (
    FOREVER,
    FixedDelays,
    RetryAttempt,
    RetryError,
    RetryEvent,
    RetryPolicy,
    retry_async,
)


class Recorder:
    """An injected sleep that records its waits instead of waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


class Flaky:
    """An operation that fails with `errors` in turn, then returns "ok"."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.attempts: list[RetryAttempt] = []

    async def __call__(self, attempt: RetryAttempt) -> str:
        self.attempts.append(attempt)
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def test_exponential_delays_double_up_to_the_cap() -> None:
    policy = RetryPolicy(max_retries=5, initial_delay=0.5, max_delay=3.0, jitter=0.0)
    assert policy.delays() == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_jitter_scales_each_wait_by_a_draw_between_one_minus_jitter_and_one() -> None:
    policy = RetryPolicy(max_retries=3, initial_delay=1.0, max_delay=10.0, jitter=0.5)
    draws = random.Random(7)
    expected = [base * draws.uniform(0.5, 1.0) for base in (1.0, 2.0, 4.0)]
    assert policy.delays(random.Random(7)) == expected


def test_a_delay_far_past_the_cap_stays_at_the_cap() -> None:
    policy = RetryPolicy(initial_delay=0.25, max_delay=10.0, jitter=0.0)
    assert policy.delay(5000) == 10.0


def test_fixed_delays_are_followed_exactly() -> None:
    policy = RetryPolicy.fixed([0.05, 0.1])
    assert policy == FixedDelays((0.05, 0.1))
    assert policy.max_retries == 2 and policy.delays() == [0.05, 0.1]


@pytest.mark.parametrize(
    "arguments",
    [{"max_retries": -1}, {"initial_delay": -0.1}, {"multiplier": 0.5}, {"jitter": 1.5}],
)
def test_a_policy_with_impossible_values_is_refused(arguments: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**arguments)  # type: ignore[arg-type]


def test_negative_fixed_delays_are_refused() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        RetryPolicy.fixed([0.1, -1.0])


def test_the_store_client_path_exports_the_same_classes() -> None:
    assert StoreRetryPolicy is RetryPolicy and StoreFixedDelays is FixedDelays


async def test_retryable_errors_are_retried_after_the_policy_waits() -> None:
    sleep = Recorder()
    operation = Flaky(ConnectionError("a"), ConnectionError("b"))
    policy = RetryPolicy(max_retries=3, initial_delay=0.1, jitter=0.0)
    result = await retry_async(operation, policy, what="op", retry_on=lambda exc: True, sleep=sleep)
    assert result == "ok"
    assert sleep.waits == [0.1, 0.2]
    assert [(a.number, a.last) for a in operation.attempts] == [(1, False), (2, False), (3, False)]


async def test_the_operation_is_told_which_try_is_the_last() -> None:
    operation = Flaky(ConnectionError("a"))
    await retry_async(operation, FixedDelays((0.0,)), what="op", retry_on=lambda exc: True, sleep=Recorder())
    assert [(a.number, a.last) for a in operation.attempts] == [(1, False), (2, True)]


async def test_an_error_retry_on_refuses_propagates_unchanged_after_one_try() -> None:
    refused = ValueError("bad request")
    operation = Flaky(refused)
    with pytest.raises(ValueError) as caught:
        await retry_async(
            operation, RetryPolicy(), what="op", retry_on=lambda exc: isinstance(exc, OSError), sleep=Recorder()
        )
    assert caught.value is refused and len(operation.attempts) == 1


async def test_giving_up_names_the_operation_the_tries_and_the_last_cause() -> None:
    last = ConnectionError("refused")
    operation = Flaky(ConnectionError("first"), last)
    with pytest.raises(RetryError, match=r"enqueue_rollout failed after 2 tries: ConnectionError: refused") as caught:
        await retry_async(
            operation, FixedDelays((0.0,)), what="enqueue_rollout", retry_on=lambda exc: True, sleep=Recorder()
        )
    assert caught.value.cause is last and caught.value.attempts == 2 and caught.value.__cause__ is last


async def test_a_wait_hint_longer_than_the_policy_wait_wins() -> None:
    sleep = Recorder()
    operation = Flaky(ConnectionError("slow down"), ConnectionError("again"))
    await retry_async(
        operation,
        RetryPolicy(max_retries=2, initial_delay=1.0, jitter=0.0),
        what="op",
        retry_on=lambda exc: True,
        wait_hint=lambda exc: 3.0 if "slow" in str(exc) else 0.5,
        sleep=sleep,
    )
    assert sleep.waits == [3.0, 2.0]


async def test_on_retry_sees_each_failed_try_before_its_wait() -> None:
    events: list[RetryEvent] = []
    error = ConnectionError("a")
    await retry_async(
        Flaky(error),
        FixedDelays((0.25,)),
        what="op",
        retry_on=lambda exc: True,
        on_retry=events.append,
        sleep=Recorder(),
    )
    assert events == [RetryEvent("op", 1, 2, error, 0.25)]


async def test_ready_returning_false_gives_up_with_the_last_error() -> None:
    operation = Flaky(ConnectionError("a"), ConnectionError("b"))

    async def never_ready() -> bool:
        return False

    with pytest.raises(RetryError) as caught:
        await retry_async(
            operation,
            FixedDelays((0.0, 0.0)),
            what="op",
            retry_on=lambda exc: True,
            ready=never_ready,
            sleep=Recorder(),
        )
    assert len(operation.attempts) == 1 and caught.value.attempts == 1


async def test_cancellation_during_a_wait_stops_the_retries_at_once() -> None:
    operation = Flaky(*[ConnectionError(str(n)) for n in range(10)])
    waiting = asyncio.Event()

    async def sleep(seconds: float) -> None:
        waiting.set()
        await asyncio.Event().wait()  # until cancelled

    task = asyncio.create_task(
        retry_async(operation, RetryPolicy(max_retries=9), what="op", retry_on=lambda exc: True, sleep=sleep)
    )
    await waiting.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(operation.attempts) == 1


async def test_cancellation_raised_by_the_operation_is_not_retried() -> None:
    calls: list[int] = []

    async def cancelled(attempt: RetryAttempt) -> None:
        calls.append(attempt.number)
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await retry_async(cancelled, RetryPolicy(), what="op", retry_on=lambda exc: True, sleep=Recorder())
    assert calls == [1]


def test_an_endless_policy_gives_any_delay_but_no_list_of_them() -> None:
    policy = RetryPolicy(max_retries=FOREVER, initial_delay=0.2, max_delay=5.0, jitter=0.0)
    assert [policy.delay(n) for n in (0, 1, 10**6)] == [0.2, 0.4, 5.0]
    with pytest.raises(ValueError, match="no list of delays"):
        policy.delays()


async def test_an_endless_policy_stops_when_retry_on_says_no() -> None:
    operation = Flaky(*[ConnectionError(str(n)) for n in range(5)])
    policy = RetryPolicy(max_retries=FOREVER, jitter=0.0)
    with pytest.raises(ConnectionError, match="3"):
        await retry_async(
            operation, policy, what="op", retry_on=lambda exc: len(operation.attempts) < 4, sleep=Recorder()
        )
    assert len(operation.attempts) == 4
