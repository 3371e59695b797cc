"""LightningStore: the control plane shared by algorithms and runners, with its backends."""

from __future__ import annotations

from typing import Any

from .base import LightningStore, LightningStoreCapabilities, LightningStoreStatistics
from .errors import (
    AttemptNotFoundError,
    InvalidArgumentError,
    NoAttemptsError,
    RolloutNotFoundError,
    SpansEvictedError,
    StoreError,
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
    "SpansEvictedError",
    "StoreError",
    "store_from_url",
]


_HTTP_NAMES = {"LightningStoreClient", "LightningStoreServer"}


def __getattr__(name: str) -> Any:
    # The HTTP server and client pull in fastapi/uvicorn/aiohttp; load them on first use to keep imports fast.
    if name in _HTTP_NAMES:
        from . import client_server

        return getattr(client_server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
