"""Typed errors raised by LightningStore implementations.

Each error subclasses the builtin exception the contract historically documents (ValueError for unknown ids and
invalid arguments, RuntimeError for evicted spans), so `except ValueError` keeps working while callers that care can
catch the precise type.
"""

from __future__ import annotations

__all__ = [
    "AttemptNotFoundError",
    "InvalidArgumentError",
    "InvalidArgumentTypeError",
    "NoAttemptsError",
    "RolloutNotFoundError",
    "SchemaVersionError",
    "SpansEvictedError",
    "StoreBusyError",
    "StoreClosedError",
    "StoreError",
    "StoreFullError",
    "StoreOpenError",
    "StoreUnavailableError",
]


class StoreError(Exception):
    """Base class of every error a LightningStore raises on purpose."""


class InvalidArgumentError(StoreError, ValueError):
    """An argument has an illegal value (unknown status, negative timeout, bad sort field, ...)."""


class InvalidArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument has the wrong type (for example `heartbeat_stats=None`)."""


class RolloutNotFoundError(StoreError, ValueError):
    """The rollout id is not known to the store."""

    def __init__(self, rollout_id: str) -> None:
        super().__init__(f"Rollout {rollout_id} not found")
        self.rollout_id = rollout_id


class AttemptNotFoundError(StoreError, ValueError):
    """The attempt id is not known for the given rollout."""

    def __init__(self, rollout_id: str, attempt_id: str) -> None:
        super().__init__(f"Attempt {attempt_id} not found for rollout {rollout_id}")
        self.rollout_id = rollout_id
        self.attempt_id = attempt_id


class NoAttemptsError(StoreError, ValueError):
    """The rollout exists but has no attempt yet (it was never dequeued or started)."""

    def __init__(self, rollout_id: str) -> None:
        super().__init__(f"No attempts found for rollout {rollout_id}")
        self.rollout_id = rollout_id


class SpansEvictedError(StoreError, RuntimeError):
    """The spans of this rollout were removed by memory eviction or a retention policy."""

    def __init__(self, rollout_id: str) -> None:
        super().__init__(f"Spans for rollout {rollout_id} have been evicted")
        self.rollout_id = rollout_id


class StoreClosedError(StoreError, RuntimeError):
    """The store was closed and cannot serve requests any more."""


class StoreOpenError(StoreError, RuntimeError):
    """A durable store could not be opened: unreachable server, wrong credentials, unwritable or corrupt file."""


class SchemaVersionError(StoreOpenError):
    """The database was created by a newer version of agentlightning (its schema version is unknown here)."""

    def __init__(self, location: str, found: int, supported: int) -> None:
        super().__init__(
            f"The store at {location} has schema version {found}, but this agentlightning supports versions up to "
            f"{supported}; upgrade agentlightning to open it"
        )
        self.found = found
        self.supported = supported


class StoreBusyError(StoreError, RuntimeError):
    """The database stayed locked by other writers for longer than the store's busy timeout."""


class StoreUnavailableError(StoreError, ConnectionError):
    """The database cannot serve now (its server is down, restarting or unreachable); make the call again later. A
    write cut off during its commit may have been applied (over HTTP its Idempotency-Key makes the repeat safe). A
    `ConnectionError`, like a store server that cannot be reached."""


class StoreFullError(StoreUnavailableError):
    """The database has no room left (its disk is full): writes are refused until space is freed, reads still
    work."""
