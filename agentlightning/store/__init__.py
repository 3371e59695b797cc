"""LightningStore: the control plane shared by algorithms and runners, with its backends."""

from __future__ import annotations

from typing import TYPE_CHECKING

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
    from .postgres import PostgresLightningStore
    from .retention import RetentionPolicy
    from .sqlite import SqliteLightningStore

__all__ += ["PostgresLightningStore", "RetentionPolicy", "SqliteLightningStore"]

# Durable backends are imported on first use (sqlite3, psycopg), keeping `import agentlightning` fast.
_LAZY_EXPORTS = {
    "SqliteLightningStore": "agentlightning.store.sqlite",
    "PostgresLightningStore": "agentlightning.store.postgres",
    "RetentionPolicy": "agentlightning.store.retention",
}


def __getattr__(name: str) -> object:
    module = _LAZY_EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(module), name)
