"""LightningStore: the control plane shared by algorithms and runners, with its backends."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import LightningStore, LightningStoreCapabilities, LightningStoreStatistics
from .errors import (
    AttemptNotFoundError,
    InvalidArgumentError,
    NoAttemptsError,
    RolloutNotFoundError,
    SchemaVersionError,
    SpansEvictedError,
    StoreBusyError,
    StoreError,
    StoreOpenError,
)
from .memory import InMemoryLightningStore
from .threading import LightningStoreThreaded
from .url import store_from_url

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
    "StoreOpenError",
    "store_from_url",
]

if TYPE_CHECKING:
    from .client_server import LightningStoreClient, LightningStoreServer
    from .postgres import PostgresLightningStore
    from .retention import RetentionPolicy
    from .sqlite import SqliteLightningStore

__all__ += ["PostgresLightningStore", "RetentionPolicy", "SqliteLightningStore"]

# Backends with heavy dependencies (fastapi/uvicorn/aiohttp, sqlite3, psycopg) are imported on first use,
# keeping `import agentlightning` fast.
_LAZY_EXPORTS = {
    "LightningStoreClient": "agentlightning.store.http.client",  # not the server module: a client never needs it
    "LightningStoreServer": "agentlightning.store.http.server",
    "SqliteLightningStore": "agentlightning.store.sqlite",
    "PostgresLightningStore": "agentlightning.store.postgres",
    "RetentionPolicy": "agentlightning.store.retention",
}


def __getattr__(name: str) -> Any:
    module = _LAZY_EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(module), name)
