"""LightningStore: the control plane shared by algorithms and runners, with its backends."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentlightning.store.base import LightningStore, LightningStoreCapabilities, LightningStoreStatistics
from agentlightning.store.errors import (
    AttemptNotFoundError,
    InvalidArgumentError,
    NoAttemptsError,
    RolloutNotFoundError,
    SchemaVersionError,
    SpansEvictedError,
    StoreBusyError,
    StoreError,
    StoreFullError,
    StoreOpenError,
    StoreUnavailableError,
)
from agentlightning.store.memory.store import InMemoryLightningStore
from agentlightning.store.threading import LightningStoreThreaded
from agentlightning.store.url import store_from_url

__all__ = [
    "AttemptNotFoundError",
    "InMemoryLightningStore",
    "InvalidArgumentError",
    "LightningStore",
    "LightningStoreCapabilities",
    "LightningStoreClient",
    "LightningStoreServer",
    "LightningStoreStatistics",
    "LightningStoreThreaded",
    "NoAttemptsError",
    "RolloutNotFoundError",
    "SchemaVersionError",
    "SpansEvictedError",
    "StoreBusyError",
    "StoreError",
    "StoreFullError",
    "StoreOpenError",
    "StoreUnavailableError",
    "store_from_url",
]

if TYPE_CHECKING:
    from agentlightning.store.client_server import LightningStoreClient, LightningStoreServer
    from agentlightning.store.postgres.store import PostgresLightningStore
    from agentlightning.store.sql.retention import RetentionPolicy
    from agentlightning.store.sqlite.store import SqliteLightningStore

__all__ += ["PostgresLightningStore", "RetentionPolicy", "SqliteLightningStore"]

# Backends with heavy dependencies (fastapi/uvicorn/aiohttp, sqlite3, psycopg) are imported on first use,
# keeping `import agentlightning` fast.
_LAZY_EXPORTS = {
    "LightningStoreClient": "agentlightning.store.http.client.client",  # not the server module: a client never needs it
    "LightningStoreServer": "agentlightning.store.http.server.server",
    "SqliteLightningStore": "agentlightning.store.sqlite.store",
    "PostgresLightningStore": "agentlightning.store.postgres.store",
    "RetentionPolicy": "agentlightning.store.sql.retention",
}


def __getattr__(name: str) -> Any:
    module = _LAZY_EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(module), name)
