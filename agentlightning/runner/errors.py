"""Which store errors a runner rides out (the store is restarting or unreachable) and which end it."""

from __future__ import annotations

import asyncio
from typing import Any

from agentlightning.store.errors import StoreBusyError, StoreClosedError, StoreOpenError

__all__ = ["StoreUnreachableError", "describe_store", "is_transient_store_error"]


class StoreUnreachableError(ConnectionError):
    """The runner could not reach its store within the configured time."""


def is_transient_store_error(exc: BaseException) -> bool:
    """True for failures that may go away by themselves: connection errors, timeouts, a server that answers 5xx,
    a database that is busy or (re)opening. Client errors (bad arguments, authentication) are not transient."""
    if isinstance(exc, (ConnectionError, TimeoutError, asyncio.TimeoutError, StoreBusyError, StoreOpenError)):
        return True
    if isinstance(exc, StoreClosedError):
        return True
    status = getattr(exc, "status", None)
    if isinstance(status, int):  # an HTTP error of the store server
        return status >= 500
    return isinstance(exc, OSError)


def describe_store(store: Any) -> str:
    """A short description of where a store lives, for messages (its URL when it has one)."""
    for attribute in ("server_address_root", "server_address", "endpoint", "url", "path"):
        value = getattr(store, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(store).__name__
