"""The runner's rules about time, as plain functions: how long to wait before polling an empty queue again, how to
spread heartbeats, how far the store's clock is from ours, and whether cached resources are recent enough.

No I/O here; the runner loop, its heartbeat and its resources cache call these.
"""

from __future__ import annotations

import random
from typing import Optional

__all__ = ["jittered", "next_poll_delay", "resources_cache_is_fresh", "server_clock_offset"]


def resources_cache_is_fresh(fetched_after: float, rollout_enqueued_at: float) -> bool:
    """Whether resources fetched after the store time `fetched_after` are those a rollout enqueued at
    `rollout_enqueued_at` was meant to use.

    Both times are on the store's clock: `fetched_after` is the start time of the attempt whose claim triggered the
    fetch (the fetch happened later). Any change made to the snapshot before the rollout was enqueued happened
    before that fetch, so the cached copy reflects it.
    """
    return rollout_enqueued_at <= fetched_after


def server_clock_offset(server_time: float, sent_at: float, received_at: float) -> float:
    """Estimated (server clock - local clock), from a server timestamp taken between `sent_at` and `received_at`."""
    return server_time - (sent_at + received_at) / 2.0


def next_poll_delay(previous: Optional[float], *, minimum: float, maximum: float) -> float:
    """The wait before the next poll of an empty queue: `minimum` first, then doubling up to `maximum`."""
    if maximum <= minimum:
        return max(maximum, 0.0)
    if previous is None:
        return minimum
    return min(maximum, max(minimum, previous * 2.0))


def jittered(interval: float, jitter: float, rng: Optional[random.Random] = None) -> float:
    """`interval` moved by up to `jitter` seconds either way (never below a tenth of the interval)."""
    if jitter <= 0:
        return interval
    value = interval + (rng or random).uniform(-jitter, jitter)
    return max(interval / 10.0, value)
