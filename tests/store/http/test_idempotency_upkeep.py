"""The idempotency cache stays cheap to maintain when it is full (found by benchmarks/soak.py: once the cache held
its maximum of entries, every write listed all of them to drop one, and the server stalled)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from agentlightning.store.http.server.idempotency import CachedResponse, IdempotencyCache


class CountingEntries(OrderedDict):  # type: ignore[type-arg]
    """Counts the entries that iterating `items()` walks over."""

    walked = 0

    def items(self) -> Any:  # type: ignore[override]
        for item in super().items():
            CountingEntries.walked += 1
            yield item


def response() -> CachedResponse:
    return CachedResponse(status=200, body=b"{}")


async def test_a_write_to_a_full_cache_drops_the_oldest_entry_without_walking_all_of_them() -> None:
    cache = IdempotencyCache(max_entries=1000)
    cache._entries = CountingEntries()  # pyright: ignore[reportPrivateUsage]
    for index in range(1000):
        assert await cache.begin(f"k{index}", ("POST", "/x", str(index))) is None
        cache.finish(f"k{index}", response())
    CountingEntries.walked = 0
    for index in range(1000, 1100):
        assert await cache.begin(f"k{index}", ("POST", "/x", str(index))) is None
        cache.finish(f"k{index}", response())
    assert len(cache) == 1000
    assert CountingEntries.walked < 100 * 5  # a few entries per write, not the 1,000 in the cache
    assert await cache.begin("k0", ("POST", "/x", "0")) is None  # the oldest went first
