"""What the idempotency cache's answers cost in memory (found by benchmarks/soak.py: a server remembering answers
in its process grew by about 8 KB per rollout, twice what it counted, because every answer kept an asyncio.Event and
only the bodies were counted against `max_bytes`)."""

from __future__ import annotations

import asyncio
import tracemalloc

from agentlightning.store.http.server.idempotency import ENTRY_OVERHEAD_BYTES, CachedResponse, IdempotencyCache

ANSWERS = 2000


def fingerprint(index: int) -> tuple[str, str, str]:
    # Fresh strings per request, as the server builds them (path and body digest).
    return ("add_many_spans", f"/v1/agl/spans/{index:08d}", f"{index:032x}")


async def test_the_counted_bytes_cover_the_memory_the_answers_occupy() -> None:
    cache = IdempotencyCache(max_entries=ANSWERS)
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for index in range(ANSWERS):
            key = f"key-{index:028d}"
            assert await cache.begin(key, fingerprint(index)) is None
            cache.finish(key, CachedResponse(201, bytes(1000)))
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(cache) == ANSWERS
    assert after - before <= cache.counted_bytes


async def test_max_bytes_bounds_a_cache_of_empty_answers() -> None:
    cache = IdempotencyCache(max_bytes=100 * ENTRY_OVERHEAD_BYTES)
    for index in range(1000):
        assert await cache.begin(f"k{index}", fingerprint(index)) is None
        cache.finish(f"k{index}", CachedResponse(200, b""))
    assert len(cache) < 100
    assert cache.counted_bytes <= cache.max_bytes


async def test_a_retry_arriving_while_the_first_request_runs_gets_its_answer() -> None:
    cache = IdempotencyCache()
    assert await cache.begin("k", fingerprint(0)) is None
    retry = asyncio.ensure_future(cache.begin("k", fingerprint(0)))
    await asyncio.sleep(0)  # the retry is now waiting for the first request
    assert not retry.done()
    cache.finish("k", CachedResponse(201, b"{}"))
    assert await retry == CachedResponse(201, b"{}")


async def test_a_retry_waiting_for_an_abandoned_request_runs_it_itself() -> None:
    cache = IdempotencyCache()
    assert await cache.begin("k", fingerprint(0)) is None
    retry = asyncio.ensure_future(cache.begin("k", fingerprint(0)))
    await asyncio.sleep(0)
    cache.abandon("k")
    assert await retry is None  # runs the request; its answer is remembered as usual
    cache.finish("k", CachedResponse(201, b"[]"))
    assert await cache.begin("k", fingerprint(0)) == CachedResponse(201, b"[]")
