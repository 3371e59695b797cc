"""One database per test for the durable backends, which tests may open several times (as a restarted process
would) by URL or by constructor."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from agentlightning.store import LightningStore

from .postgres_support import drop_schema, fresh_schema_name, require_postgres


class DurableDatabase:
    """A fresh SQLite file or PostgreSQL schema; `open()` returns a new store object on it."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.stores: list[LightningStore] = []
        if backend == "sqlite":
            self.directory = tempfile.mkdtemp(prefix="agl-durable-")
            self.path = os.path.join(self.directory, "store.db")
            self.url = f"sqlite:///{self.path}"
        else:
            dsn = require_postgres()
            self.schema = fresh_schema_name()
            self.dsn = dsn
            self.url = f"{dsn}?schema={self.schema}"

    def open(self, **options: Any) -> LightningStore:
        if self.backend == "sqlite":
            from agentlightning.store.sqlite.store import SqliteLightningStore

            store: LightningStore = SqliteLightningStore(self.path, **options)
        else:
            from agentlightning.store.postgres.store import PostgresLightningStore

            store = PostgresLightningStore(self.dsn, schema=self.schema, pool_size=4, **options)
        self.stores.append(store)
        return store

    async def cleanup(self) -> None:
        for store in self.stores:
            await store.close()
        if self.backend == "sqlite":
            shutil.rmtree(self.directory, ignore_errors=True)
        else:
            drop_schema(self.schema)
