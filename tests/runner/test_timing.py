"""The runner's rules about time: polling delays, jitter, the store's clock, cache freshness."""

from __future__ import annotations

import random

from agentlightning.runner.timing import jittered, next_poll_delay, resources_cache_is_fresh, server_clock_offset


def test_cached_resources_serve_rollouts_enqueued_before_the_fetch() -> None:
    assert resources_cache_is_fresh(fetched_after=100.0, rollout_enqueued_at=99.0)
    assert resources_cache_is_fresh(fetched_after=100.0, rollout_enqueued_at=100.0)
    assert not resources_cache_is_fresh(fetched_after=100.0, rollout_enqueued_at=100.5)


def test_clock_offset_is_measured_from_the_middle_of_the_round_trip() -> None:
    assert server_clock_offset(1010.0, sent_at=999.0, received_at=1001.0) == 10.0


def test_poll_delay_starts_small_and_doubles_up_to_the_maximum() -> None:
    delays = []
    delay = None
    for _ in range(6):
        delay = next_poll_delay(delay, minimum=0.01, maximum=0.1)
        delays.append(delay)
    assert delays == [0.01, 0.02, 0.04, 0.08, 0.1, 0.1]


def test_jitter_stays_within_bounds() -> None:
    rng = random.Random(0)
    values = [jittered(10.0, 0.5, rng) for _ in range(100)]
    assert all(9.5 <= value <= 10.5 for value in values)
    assert jittered(10.0, 0.0) == 10.0
