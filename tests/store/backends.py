"""The store backends the conformance suite runs against. Adding a backend is one entry in STORE_BACKENDS."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from agentlightning.store import InMemoryLightningStore, LightningStore, LightningStoreCapabilities
from agentlightning.store.threading import LightningStoreThreaded

from .http_backend import http_backend


class _SingleThreadedMemoryStore(InMemoryLightningStore):
    """A memory store that claims not to be thread-safe, so the threaded wrapper really serialises calls."""

    @property
    def capabilities(self) -> LightningStoreCapabilities:
        return LightningStoreCapabilities(thread_safe=False, async_safe=True, zero_copy=False, otlp_traces=False)


async def make_memory_store() -> LightningStore:
    return InMemoryLightningStore()


async def make_threaded_store() -> LightningStore:
    return LightningStoreThreaded(_SingleThreadedMemoryStore())


StoreFactory = Callable[[], Awaitable[LightningStore]]

STORE_BACKENDS: dict[str, StoreFactory] = {
    "memory": make_memory_store,
    "threaded": make_threaded_store,
    "http": http_backend(make_memory_store),
}
