"""Retrying: one backoff policy and one retry loop for every caller that talks to something that may fail for a while.

The policy (`RetryPolicy`, or `FixedDelays` for an explicit schedule) says how many retries follow a failed try and
how long to wait before each. `retry_async` runs an operation under a policy; the caller decides what is worth
retrying (`retry_on`), what happens between tries (`on_retry`: log, count; `ready`: probe, or give up early) and
whether a failure asks for a longer wait (`wait_hint`: Retry-After). Non-retryable errors and cancellation stop the
loop at once, unchanged; running out of retries raises `RetryError` naming the operation and the last cause.

Code that schedules its retries itself (the span writer's background thread) uses the policy's `delay(n)` only, so
every backoff in the package is computed in one place.
"""

from __future__ import annotations

import asyncio
import random
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Optional, TypeVar, Union

__all__ = [
    "FOREVER",
    "Backoff",
    "FixedDelays",
    "RetryAttempt",
    "RetryError",
    "RetryEvent",
    "RetryPolicy",
    "retry_async",
]

T = TypeVar("T")

FOREVER = sys.maxsize
"""`max_retries` of a policy that retries as long as `retry_on` accepts the error (it decides when to stop)."""


@dataclass(frozen=True)
class RetryPolicy:
    """`max_retries` more tries after the first, waiting `initial_delay * multiplier**n` seconds (at most
    `max_delay`) before retry n (counted from 0), each wait scaled by a random factor in [1 - jitter, 1]."""

    max_retries: int = 6
    initial_delay: float = 0.1
    max_delay: float = 5.0
    multiplier: float = 2.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must not be negative, got {self.max_retries}")
        if self.initial_delay < 0 or self.max_delay < 0 or self.multiplier < 1:
            raise ValueError("delays must not be negative and multiplier must be at least 1")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter must be between 0 and 1, got {self.jitter}")

    @classmethod
    def fixed(cls, delays: Sequence[float]) -> FixedDelays:
        """Exactly these waits, no jitter (the `retry_delays` of the 0.2 store client)."""
        return FixedDelays(tuple(float(delay) for delay in delays))

    def delay(self, retry: int, rng: Optional[random.Random] = None) -> float:
        """The wait before retry `retry` (0 for the first retry); any `retry` is allowed, past `max_retries` too."""
        if retry < 0:
            raise ValueError(f"retry must not be negative, got {retry}")
        try:
            base = min(self.max_delay, self.initial_delay * self.multiplier**retry)
        except OverflowError:  # a very long outage: the cap has been reached long ago
            base = self.max_delay
        if self.jitter == 0:
            return base
        return base * (rng or random).uniform(1.0 - self.jitter, 1.0)

    def delays(self, rng: Optional[random.Random] = None) -> list[float]:
        """The waits before each retry (a new random draw on every call)."""
        if self.max_retries == FOREVER:
            raise ValueError("a policy that retries forever has no list of delays; use delay(n)")
        return [self.delay(retry, rng) for retry in range(self.max_retries)]


@dataclass(frozen=True)
class FixedDelays:
    """An explicit retry schedule: one retry per value, waiting that many seconds before it."""

    values: tuple[float, ...]

    def __post_init__(self) -> None:
        if any(delay < 0 for delay in self.values):
            raise ValueError(f"retry delays must not be negative, got {self.values}")

    @property
    def max_retries(self) -> int:
        return len(self.values)

    def delay(self, retry: int, rng: Optional[random.Random] = None) -> float:
        """The wait before retry `retry`; past the schedule, its last value (0 for an empty schedule)."""
        if retry < 0:
            raise ValueError(f"retry must not be negative, got {retry}")
        if not self.values:
            return 0.0
        return self.values[min(retry, len(self.values) - 1)]

    def delays(self, rng: Optional[random.Random] = None) -> list[float]:
        return list(self.values)


Backoff = Union[RetryPolicy, FixedDelays]
"""Either kind of policy: both have `max_retries`, `delay(n)` and `delays()`."""


@dataclass(frozen=True)
class RetryAttempt:
    """What the operation is told about the try it is making."""

    number: int
    """1 for the first try."""
    last: bool
    """No retry follows this try, whatever happens (the operation may then keep an answer it would retry)."""


@dataclass(frozen=True)
class RetryEvent:
    """A try failed with a retryable error and another one follows after `delay` seconds."""

    what: str
    attempt: int
    """The number of the try that failed (1 for the first)."""
    max_attempts: int
    error: Exception
    delay: float


class RetryError(Exception):
    """Every try of `what` failed (or `ready` gave up); `cause` is the last error."""

    def __init__(self, what: str, attempts: int, cause: Exception) -> None:
        tries = "try" if attempts == 1 else "tries"
        super().__init__(f"{what} failed after {attempts} {tries}: {type(cause).__name__}: {cause}")
        self.what = what
        self.attempts = attempts
        self.cause = cause


async def retry_async(
    operation: Callable[[RetryAttempt], Awaitable[T]],
    policy: Backoff,
    *,
    what: str,
    retry_on: Callable[[Exception], bool],
    wait_hint: Optional[Callable[[Exception], Optional[float]]] = None,
    on_retry: Optional[Callable[[RetryEvent], None]] = None,
    ready: Optional[Callable[[], Awaitable[bool]]] = None,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    rng: Optional[random.Random] = None,
) -> T:
    """Run `operation` until it succeeds, retrying the errors `retry_on` accepts as `policy` allows.

    Args:
        operation: makes one try; called with the try's `RetryAttempt`.
        policy: how many retries and the wait before each.
        what: names the operation in `RetryError` and in `RetryEvent`.
        retry_on: whether an error is worth another try. Others propagate at once, unchanged.
        wait_hint: the least wait an error asks for (for example a Retry-After header); the longer wait wins.
        on_retry: called before each wait (logging, counters).
        ready: awaited after each wait; False gives up at once (`RetryError` with the last error).
        sleep / rng: injectable for tests.

    Raises:
        RetryError: every try failed with a retryable error, or `ready` gave up.
    """
    max_attempts = policy.max_retries + 1
    attempt = 0
    while True:
        attempt += 1
        try:
            return await operation(RetryAttempt(attempt, attempt >= max_attempts))
        except Exception as exc:  # CancelledError and KeyboardInterrupt are not Exceptions: they stop at once
            if not retry_on(exc):
                raise
            if attempt >= max_attempts:
                raise RetryError(what, attempt, exc) from exc
            delay = policy.delay(attempt - 1, rng)
            hint = wait_hint(exc) if wait_hint is not None else None
            if hint is not None and hint > delay:
                delay = hint
            if on_retry is not None:
                on_retry(RetryEvent(what, attempt, max_attempts, exc, delay))
            await sleep(delay)
            if ready is not None and not await ready():
                raise RetryError(what, attempt, exc) from exc
