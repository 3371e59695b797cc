"""The server's idempotency cache: replays, conflicts and expiry (with an injected clock)."""

from __future__ import annotations

import pytest

from agentlightning.store.http.server.idempotency import CachedResponse, IdempotencyCache, IdempotencyConflict


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


FP = ("op", "/path", "digest-1")


async def test_a_finished_key_replays_its_answer() -> None:
    cache = IdempotencyCache()
    assert await cache.begin("k", FP) is None
    cache.finish("k", CachedResponse(201, b"{}"))
    assert await cache.begin("k", FP) == CachedResponse(201, b"{}")


async def test_a_key_reused_for_another_request_is_a_conflict() -> None:
    cache = IdempotencyCache()
    await cache.begin("k", FP)
    cache.finish("k", CachedResponse(201, b"{}"))
    with pytest.raises(IdempotencyConflict):
        await cache.begin("k", ("op", "/other", "digest-2"))


async def test_answers_expire_behind_a_request_still_in_flight() -> None:
    clock = Clock()
    cache = IdempotencyCache(ttl_seconds=10, clock=clock)
    assert await cache.begin("slow", FP) is None  # stays in flight
    for index in range(3):
        assert await cache.begin(f"done-{index}", FP) is None
        cache.finish(f"done-{index}", CachedResponse(200, b"x"))
    clock.now += 11
    assert await cache.begin("trigger", FP) is None
    assert len(cache) == 2  # the in-flight request and the new one; the three old answers are gone
    assert cache._bytes == 0  # type: ignore[attr-defined]


async def test_an_answer_expires_a_ttl_after_it_was_given_not_after_the_request_started() -> None:
    clock = Clock()
    cache = IdempotencyCache(ttl_seconds=10, clock=clock)
    assert await cache.begin("long", FP) is None
    clock.now += 9
    cache.finish("long", CachedResponse(200, b"x"))
    clock.now += 9  # 18 s after the start, 9 s after the answer
    assert await cache.begin("long", FP) == CachedResponse(200, b"x")
    clock.now += 2
    assert await cache.begin("other", FP) is None
    assert await cache.begin("long", FP) is None  # expired: runs again
