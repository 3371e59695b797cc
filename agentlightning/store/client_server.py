"""The store server and client (0.2 import path). See `agentlightning.store.http` and docs/http.md."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentlightning.store.http.client.client import LightningStoreClient
from agentlightning.store.http.client.retry import RetryPolicy
from agentlightning.store.http.errors import (
    RequestTooLargeError,
    StoreConnectionError,
    StoreHTTPError,
    StoreUnauthorizedError,
)
from agentlightning.store.http.models import (
    AddResourcesRequest,
    PydanticUnset,
    QueryRolloutsRequest,
    RolloutId,
    RolloutRequest,
    UpdateAttemptRequest,
    UpdateRolloutRequest,
    WaitForRolloutsRequest,
)
from agentlightning.types import Span

if TYPE_CHECKING:
    from agentlightning.store.http.server.server import LightningStoreServer

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

    from agentlightning.store.errors import InvalidArgumentError

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidArgumentError(f"Invalid store server URL {url!r}: use http://host:port")
    return LightningStoreClient(url)


def __getattr__(name: str) -> Any:
    # The server (starlette, fastapi) is imported on first use: a process that only runs a client never pays for it.
    if name == "LightningStoreServer":
        from agentlightning.store.http.server.server import LightningStoreServer

        return LightningStoreServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
