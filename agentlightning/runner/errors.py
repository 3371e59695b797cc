"""Which store errors a runner rides out (the store is restarting or unreachable) and which end it."""

from __future__ import annotations

import asyncio
from typing import Any

from agentlightning.store.errors import StoreBusyError, StoreClosedError, StoreOpenError

__all__ = [
    "OUTAGE_STATUSES",
    "StoreUnreachableError",
    "describe_store",
    "is_retryable_store_error",
    "is_server_error",
    "is_transient_store_error",
]


class StoreUnreachableError(ConnectionError):
    """The runner could not reach its store within the configured time."""


OUTAGE_STATUSES = frozenset({502, 503, 504})
"""HTTP answers of a store server (or of a proxy in front of it) that is restarting, overloaded or unreachable."""


def is_transient_store_error(exc: BaseException) -> bool:
    """True for an outage, which goes away by itself: connection errors, timeouts, 502/503/504, a database that is
    busy, (re)opening or closed for a restart. Everything else (500, 4xx, bad arguments, authentication, other OS
    errors) says something is wrong with the request or the store and would fail the same way again."""
    if isinstance(exc, (ConnectionError, TimeoutError, asyncio.TimeoutError)):
        return True
    if isinstance(exc, (StoreBusyError, StoreOpenError, StoreClosedError)):
        return True
    status = getattr(exc, "status", None)
    return isinstance(status, int) and status in OUTAGE_STATUSES


def is_server_error(exc: BaseException) -> bool:
    """True for an error answer of the server itself (HTTP 5xx other than an outage: a 500, a 507 for a full disk).
    It may go away (a transient fault, space freed) or not (a bug): worth a few more tries, never an endless wait."""
    status = getattr(exc, "status", None)
    return isinstance(status, int) and not isinstance(status, bool) and status >= 500 and status not in OUTAGE_STATUSES


def is_retryable_store_error(exc: BaseException) -> bool:
    """An outage or a server error: what a runner retries instead of failing an attempt or ending."""
    return is_transient_store_error(exc) or is_server_error(exc)


def describe_store(store: Any) -> str:
    """A short description of where a store lives, for messages (its URL when it has one)."""
    for attribute in ("server_address_root", "server_address", "endpoint", "url", "path"):
        value = getattr(store, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(store).__name__
