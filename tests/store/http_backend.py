"""Conformance backends served over HTTP: one LightningStoreServer per inner backend for the whole test session.

Each test gets a fresh inner store: the server wraps a `SwitchableStore` whose target is replaced per test (the
test-only hook), so the suite does not pay a server start per test. `http_backend(factory)` works for any inner
store factory (memory now; SQLite and PostgreSQL can be added the same way).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Optional

from agentlightning.store import LightningStore, LightningStoreCapabilities
from agentlightning.store.client_server import LightningStoreClient, LightningStoreServer

StoreFactory = Callable[[], Awaitable[LightningStore]]


class SwitchableStore(LightningStore):
    """Forwards every store method to `target`, which the tests replace between tests."""

    def __init__(self, target: LightningStore) -> None:
        self.target = target

    @property
    def capabilities(self) -> LightningStoreCapabilities:
        return self.target.capabilities


def _forward(name: str) -> Callable[..., Awaitable[Any]]:
    async def method(self: SwitchableStore, *args: Any, **kwargs: Any) -> Any:
        return await getattr(self.target, name)(*args, **kwargs)

    method.__name__ = name
    return method


for _name, _member in vars(LightningStore).items():
    if not _name.startswith("_") and inspect.iscoroutinefunction(_member) and _name != "close":
        setattr(SwitchableStore, _name, _forward(_name))


class ServedStoreClient(LightningStoreClient):
    """A client whose close() also closes the inner store of its test."""

    def __init__(self, endpoint: str, inner: LightningStore) -> None:
        super().__init__(endpoint)
        self._inner = inner

    async def close(self) -> None:
        await super().close()
        await self._inner.close()


class _SharedServer:
    def __init__(self) -> None:
        self.server: Optional[LightningStoreServer] = None
        self.switch: Optional[SwitchableStore] = None

    async def serve(self, inner: LightningStore) -> str:
        if self.server is None or self.switch is None:
            self.switch = SwitchableStore(inner)
            self.server = LightningStoreServer(self.switch, host="127.0.0.1", port=0)
            await self.server.start()
        self.switch.target = inner
        return self.server.endpoint


def http_backend(inner_factory: StoreFactory) -> StoreFactory:
    """A factory of clients talking to a session-wide server that serves a fresh `inner_factory()` store."""
    shared = _SharedServer()

    async def make() -> LightningStore:
        inner = await inner_factory()
        endpoint = await shared.serve(inner)
        return ServedStoreClient(endpoint, inner)

    return make
