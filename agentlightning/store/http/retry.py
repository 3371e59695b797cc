"""When the client retries: connection failures and 502/503/504, with capped exponential backoff and jitter.

Client errors (4xx) are never retried: the same request would fail the same way. Writes carry an Idempotency-Key,
so repeating one whose response was lost cannot apply it twice.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

__all__ = ["RETRYABLE_STATUSES", "RetryPolicy"]

RETRYABLE_STATUSES = frozenset({502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """`max_retries` more tries after the first, waiting `initial_delay * multiplier**n` seconds (at most
    `max_delay`) before retry n, each wait scaled by a random factor in [1 - jitter, 1]."""

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
        """The 0.2 client behaviour: exactly these waits, no jitter."""
        return FixedDelays(tuple(float(delay) for delay in delays))

    def delays(self, rng: Optional[random.Random] = None) -> list[float]:
        """The waits before each retry (a new random draw on every call)."""
        draw = (rng or random).uniform
        waits = []
        for attempt in range(self.max_retries):
            base = min(self.max_delay, self.initial_delay * self.multiplier**attempt)
            waits.append(base * draw(1.0 - self.jitter, 1.0))
        return waits


@dataclass(frozen=True)
class FixedDelays:
    """An explicit retry schedule (the `retry_delays` argument of the 0.2 client)."""

    values: tuple[float, ...]

    def __post_init__(self) -> None:
        if any(delay < 0 for delay in self.values):
            raise ValueError(f"retry delays must not be negative, got {self.values}")

    def delays(self, rng: Optional[random.Random] = None) -> list[float]:
        return list(self.values)
