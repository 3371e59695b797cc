"""The store server and client (0.2 import path). See `agentlightning.store.http` and docs/http.md."""

from __future__ import annotations

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
