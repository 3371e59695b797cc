"""The store backends the conformance suite runs against. Adding a backend is one entry in STORE_BACKENDS."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable

import pytest

from agentlightning.store import InMemoryLightningStore, LightningStore, LightningStoreCapabilities
from agentlightning.store.sqlite.store import SqliteLightningStore
from agentlightning.store.threading import LightningStoreThreaded

from .http_backend import http_backend
from .postgres_support import drop_schema, fresh_schema_name, require_postgres


class _SingleThreadedMemoryStore(InMemoryLightningStore):
    """A memory store that claims not to be thread-safe, so the threaded wrapper really serialises calls."""

    @property
    def capabilities(self) -> LightningStoreCapabilities:
        return LightningStoreCapabilities(thread_safe=False, async_safe=True, zero_copy=False, otlp_traces=False)


async def make_memory_store() -> LightningStore:
    return InMemoryLightningStore()


async def make_threaded_store() -> LightningStore:
    return LightningStoreThreaded(_SingleThreadedMemoryStore())


class _TemporarySqliteStore(SqliteLightningStore):
    """An SQLite store in a fresh directory that is removed on close."""

    async def close(self) -> None:
        await super().close()
        shutil.rmtree(os.path.dirname(self.path), ignore_errors=True)


async def make_sqlite_store() -> LightningStore:
    return _TemporarySqliteStore(os.path.join(tempfile.mkdtemp(prefix="agl-sqlite-"), "store.db"))


async def make_postgres_store() -> LightningStore:
    dsn = require_postgres()
    from agentlightning.store.postgres.store import PostgresLightningStore

    class _TemporaryPostgresStore(PostgresLightningStore):
        """A store in a fresh schema that is dropped on close."""

        async def close(self) -> None:
            await super().close()
            await asyncio.to_thread(drop_schema, self.schema)

    return _TemporaryPostgresStore(dsn, schema=fresh_schema_name(), pool_size=8)


StoreFactory = Callable[[], Awaitable[LightningStore]]

STORE_BACKENDS: dict[str, StoreFactory] = {
    "memory": make_memory_store,
    "threaded": make_threaded_store,
    "http": http_backend(make_memory_store),
    "sqlite": make_sqlite_store,
    "postgres": make_postgres_store,
    "http-sqlite": http_backend(make_sqlite_store),
    "http-postgres": http_backend(make_postgres_store),
}

#: pytest marks of the backends that need a server.
BACKEND_MARKS = {"postgres": pytest.mark.postgres, "http-postgres": pytest.mark.postgres}
