"""`SqliteLightningStore`: a durable store in one SQLite file, shared by the threads and processes that open it.

Use it for a single machine: the main job's default store is a SQLite file in the working directory, so a run can be
inspected and resumed afterwards. Several processes may open the same file; each dequeue hands a rollout to exactly
one caller. See docs/stores.md for durability guarantees, retention and multi-process use.
"""

from __future__ import annotations

import os
from typing import Any, Optional, Union
from urllib.parse import parse_qsl, unquote, urlsplit

from agentlightning.store.errors import InvalidArgumentError
from agentlightning.store.sql.durable import DurableLightningStore
from agentlightning.store.sql.retention import RetentionPolicy
from agentlightning.store.sqlite.storage import SqliteStorage, SynchronousMode

__all__ = ["SqliteLightningStore", "parse_sqlite_url", "store_from_url"]


def _path_from(location: Union[str, os.PathLike[str]]) -> str:
    """A filesystem path (or ':memory:') from a path or a `sqlite:///` URL."""
    text = os.fspath(location)
    if not isinstance(text, str) or not text:
        raise InvalidArgumentError(f"SQLite store path must be a non-empty path, got {location!r}")
    if text.startswith("sqlite:"):
        return parse_sqlite_url(text)[0]
    return text


class SqliteLightningStore(DurableLightningStore):
    """A LightningStore kept in an SQLite database file (WAL mode).

    Args:
        path: the database file (created if missing; its directory must exist), a `sqlite:///path` URL, or
            ":memory:" for a private in-memory database (shared by this process's threads only).
        synchronous: "normal" (default) keeps every acknowledged write across a crash of the process; "full" also
            across a power loss or OS crash, with an fsync per commit.
        busy_timeout: seconds to wait for other processes' write transactions before raising StoreBusyError.
        retention: limits on stored spans (see `RetentionPolicy`); None keeps every span.
        scan_debounce_seconds: minimum interval between health scans. The default 0 checks on every call: the check
            is one indexed MIN() lookup, and a scan only runs when a deadline has passed.

    Raises:
        StoreOpenError: the file cannot be opened or created, is not a database, or belongs to another application.
        SchemaVersionError: the file was written by a newer agentlightning.
    """

    def __init__(
        self,
        path: Union[str, os.PathLike[str]] = "agentlightning.db",
        *,
        synchronous: SynchronousMode = "normal",
        busy_timeout: float = 30.0,
        retention: Optional[RetentionPolicy] = None,
        scan_debounce_seconds: float = 0.0,
    ) -> None:
        options: dict[str, Any] = {
            "path": _path_from(path),
            "synchronous": synchronous,
            "busy_timeout": busy_timeout,
            "retention": retention,
            "scan_debounce_seconds": scan_debounce_seconds,
        }
        self._sqlite = SqliteStorage(
            options["path"], synchronous=synchronous, busy_timeout=busy_timeout, retention=retention
        )
        super().__init__(self._sqlite, options, scan_debounce_seconds=scan_debounce_seconds)

    @property
    def path(self) -> str:
        return self._sqlite.path

    def __getstate__(self) -> dict[str, Any]:
        if self._sqlite.in_memory:
            raise TypeError("An in-memory SQLite store cannot be pickled; use a database file")
        return super().__getstate__()

    def __repr__(self) -> str:
        return f"SqliteLightningStore({self.path!r})"


_URL_OPTIONS = {
    "synchronous": str,
    "busy_timeout": float,
    "retention_max_age_seconds": float,
    "retention_max_spans": int,
    "retention_max_bytes": int,
}


def parse_sqlite_url(url: str) -> tuple[str, dict[str, Any]]:
    """`sqlite:///relative.db`, `sqlite:////absolute/path.db` or `sqlite:///:memory:`, with optional query
    options synchronous, busy_timeout, retention_max_age_seconds, retention_max_spans, retention_max_bytes.
    Returns the path and the options."""
    parts = urlsplit(url)
    if parts.scheme != "sqlite" or parts.netloc or not parts.path.startswith("/") or parts.path == "/":
        raise InvalidArgumentError(
            f"Invalid SQLite store URL {url!r}: use sqlite:///relative/path.db, sqlite:////absolute/path.db "
            "or sqlite:///:memory:"
        )
    path = unquote(parts.path[1:])
    options: dict[str, Any] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        converter = _URL_OPTIONS.get(key)
        if converter is None:
            raise InvalidArgumentError(
                f"Unknown option {key!r} in SQLite store URL {url!r}; known: {', '.join(sorted(_URL_OPTIONS))}"
            )
        try:
            options[key] = converter(value)
        except ValueError:
            raise InvalidArgumentError(f"Invalid value {value!r} for {key} in SQLite store URL {url!r}") from None
    return path, options


def store_from_url(url: str) -> SqliteLightningStore:
    """Open the SQLite store a `sqlite:///...` URL names (see `parse_sqlite_url`)."""
    path, options = parse_sqlite_url(url)
    retention_limits = {
        name: options.pop(f"retention_{name}")
        for name in ("max_age_seconds", "max_spans", "max_bytes")
        if f"retention_{name}" in options
    }
    retention = RetentionPolicy(**retention_limits) if retention_limits else None
    return SqliteLightningStore(path, retention=retention, **options)
