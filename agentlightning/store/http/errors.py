"""Errors on the wire: the server turns each store error into a 4xx JSON answer naming its type, and the client
raises the same typed exception with the same message.

| error                                              | status |
|----------------------------------------------------|--------|
| RolloutNotFoundError, AttemptNotFoundError         | 404    |
| NoAttemptsError                                    | 409    |
| SpansEvictedError                                  | 410    |
| InvalidArgumentError (and its Type variant)        | 400    |
| a request body that does not match its schema      | 422    |
| ValueError / TypeError / KeyError of other stores  | 400    |
| NotImplementedError (the store lacks the method)   | 501    |
| StoreFullError (the database's disk is full)       | 507    |
| StoreUnavailableError, StoreBusyError, StoreOpenError, StoreClosedError | 503 |
| anything else (a bug)                              | 500    |
"""

from __future__ import annotations

import builtins
from typing import Any, Optional

from pydantic import ValidationError

from agentlightning.store import errors as store_errors
from agentlightning.store.errors import (
    AttemptNotFoundError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    NoAttemptsError,
    RolloutNotFoundError,
    SpansEvictedError,
    StoreBusyError,
    StoreClosedError,
    StoreError,
    StoreFullError,
    StoreOpenError,
    StoreUnavailableError,
)

__all__ = [
    "RequestTooLargeError",
    "StoreConnectionError",
    "StoreHTTPError",
    "StoreUnauthorizedError",
    "error_from_response",
    "error_status",
    "retry_after_seconds",
    "validation_error_to_store_error",
]


class StoreHTTPError(StoreError, RuntimeError):
    """The server answered with an error that is not a store error (for example 500 or 404 for a bad route)."""

    def __init__(self, status: int, detail: str, error_type: str = "HTTPError") -> None:
        super().__init__(f"HTTP {status} ({error_type}): {detail}")
        self.status = status
        self.detail = detail
        self.error_type = error_type


class StoreUnauthorizedError(StoreHTTPError):
    """The server requires an API key and the request had none, or a wrong one (HTTP 401)."""


class RequestTooLargeError(InvalidArgumentError):
    """The request body exceeds the server's size limit (HTTP 413)."""


class StoreConnectionError(StoreError, ConnectionError):
    """The store server could not be reached, even after the configured retries."""


_STATUS_BY_TYPE: tuple[tuple[type[BaseException], int], ...] = (
    (RolloutNotFoundError, 404),
    (AttemptNotFoundError, 404),
    (NoAttemptsError, 409),
    (SpansEvictedError, 410),
    (InvalidArgumentError, 400),
    (StoreFullError, 507),
    (StoreUnavailableError, 503),
    (StoreBusyError, 503),
    (StoreClosedError, 503),
    (StoreOpenError, 503),
    (NotImplementedError, 501),
    (ValueError, 400),
    (TypeError, 400),
    (KeyError, 400),
)

# Builtin exceptions a store may raise on bad input; the client re-raises them by name.
_BUILTIN_ERRORS: dict[str, type[Exception]] = {
    name: getattr(builtins, name) for name in ("ValueError", "TypeError", "KeyError", "NotImplementedError")
}


def error_status(exc: BaseException) -> Optional[int]:
    """The HTTP status for an exception raised by a store, or None for an unexpected one."""
    for kind, status in _STATUS_BY_TYPE:
        if isinstance(exc, kind):
            return status
    return None


_RETRY_AFTER_SECONDS = {503: 1, 507: 5}


def retry_after_seconds(status: int) -> Optional[int]:
    """The `Retry-After` an answer with `status` carries: 503 (the database is unavailable, busy or reopening) and
    507 (its disk is full) are worth repeating later; None for the others."""
    return _RETRY_AFTER_SECONDS.get(status)


def error_context(exc: BaseException) -> Optional[dict[str, Any]]:
    """Simple attributes of a store error (ids) that the client restores on the re-raised exception."""
    if not isinstance(exc, StoreError):
        return None
    context = {
        key: value
        for key, value in vars(exc).items()
        if not key.startswith("_") and isinstance(value, (str, int, float, bool, type(None)))
    }
    return context or None


_TYPE_ERROR_KINDS = ("_type", "model_attributes_type", "dataclass_type", "is_instance_of", "is_subclass_of")


def _format_location(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc) or "body"


def _short_repr(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def validation_error_to_store_error(exc: ValidationError, prefix: tuple[Any, ...] = ()) -> InvalidArgumentError:
    """A typed error naming every field that failed (InvalidArgumentTypeError when all failures are type errors)."""
    problems: list[str] = []
    all_type_errors = True
    for error in exc.errors(include_url=False):
        loc = prefix + tuple(error.get("loc", ()))
        kind = str(error.get("type", ""))
        if not kind.endswith(_TYPE_ERROR_KINDS):
            all_type_errors = False
        message = f"{_format_location(loc)}: {error.get('msg', 'invalid')}"
        if kind not in ("missing", "json_invalid", "extra_forbidden"):
            message += f", got {_short_repr(error.get('input'))}"
        problems.append(message)
    text = "Invalid request: " + "; ".join(problems[:20])
    if len(problems) > 20:
        text += f"; and {len(problems) - 20} more"
    cls = InvalidArgumentTypeError if all_type_errors and problems else InvalidArgumentError
    return cls(text)


def _known_error_type(name: str) -> Optional[type[BaseException]]:
    candidate = getattr(store_errors, name, None)
    if isinstance(candidate, type) and issubclass(candidate, StoreError):
        return candidate
    from agentlightning.store.http import errors as http_errors

    candidate = getattr(http_errors, name, None)
    if isinstance(candidate, type) and issubclass(candidate, StoreError):
        return candidate
    return _BUILTIN_ERRORS.get(name)


def error_from_response(status: int, body: Any) -> BaseException:
    """The exception a client raises for an error answer (`body` is the decoded JSON, or anything else)."""
    detail = f"HTTP {status}"
    error_type = ""
    context: dict[str, Any] = {}
    if isinstance(body, dict):
        detail = str(body.get("detail", detail))
        error_type = str(body.get("error_type", ""))
        raw_context = body.get("context")
        if isinstance(raw_context, dict):
            context = raw_context
    if status == 401:
        return StoreUnauthorizedError(status, detail, error_type or "Unauthorized")
    cls = _known_error_type(error_type) if error_type else None
    if cls is None:
        return StoreHTTPError(status, detail, error_type or "HTTPError")
    if issubclass(cls, StoreHTTPError):
        return cls(status, detail, error_type)
    # Bypass custom constructors (RolloutNotFoundError(rollout_id) formats its own message): keep the server's text.
    exc = cls.__new__(cls)
    BaseException.__init__(exc, detail)
    for key, value in context.items():
        if isinstance(key, str) and not key.startswith("_"):
            setattr(exc, key, value)
    return exc
