"""The store server and client (0.2 import path). See `agentlightning.store.http` and docs/http.md."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentlightning.types import Span

from .http.client import LightningStoreClient
from .http.errors import RequestTooLargeError, StoreConnectionError, StoreHTTPError, StoreUnauthorizedError
from .http.models import (
    AddResourcesRequest,
    PydanticUnset,
    QueryRolloutsRequest,
    RolloutId,
    RolloutRequest,
    UpdateAttemptRequest,
    UpdateRolloutRequest,
    WaitForRolloutsRequest,
)
from .http.retry import RetryPolicy

if TYPE_CHECKING:
    from .http.server import LightningStoreServer

__all__ = [
    "AddResourcesRequest",
    "LightningStoreClient",
    "LightningStoreServer",
    "PydanticUnset",
    "QueryRolloutsRequest",
    "RequestTooLargeError",
    "RetryPolicy",
    "RolloutId",
    "RolloutRequest",
    "Span",
    "StoreConnectionError",
    "StoreHTTPError",
    "StoreUnauthorizedError",
    "UpdateAttemptRequest",
    "UpdateRolloutRequest",
    "WaitForRolloutsRequest",
    "store_from_url",
]


def store_from_url(url: str) -> LightningStoreClient:
    """`http://host:port` or `https://host:port` opens a client of the store server there."""
    from urllib.parse import urlsplit

    from .errors import InvalidArgumentError

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidArgumentError(f"Invalid store server URL {url!r}: use http://host:port")
    return LightningStoreClient(url)


def __getattr__(name: str) -> Any:
    # The server (starlette, fastapi) is imported on first use: a process that only runs a client never pays for it.
    if name == "LightningStoreServer":
        from .http.server import LightningStoreServer

        return LightningStoreServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
