"""`PostgresLightningStore`: a durable store in PostgreSQL, shared by many processes and store servers.

Needs the `postgres` extra (psycopg 3): `pip install 'agentlightning[postgres]'`. Each store lives in its own
PostgreSQL schema (`agentlightning` by default), so several stores can share one database. See docs/stores.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Optional
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

try:
    import psycopg  # noqa: F401
    from psycopg.conninfo import conninfo_to_dict
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "The PostgreSQL store needs psycopg 3; install it with: pip install 'agentlightning[postgres]'"
    ) from exc

from agentlightning.store.errors import InvalidArgumentError
from agentlightning.store.postgres.schema import check_schema_name
from agentlightning.store.postgres.storage import PostgresStorage
from agentlightning.store.sql.durable import DurableLightningStore
from agentlightning.store.sql.retention import RetentionPolicy

__all__ = ["PostgresLightningStore", "describe_dsn", "store_from_url"]

DEFAULT_SCHEMA = "agentlightning"


def describe_dsn(dsn: str) -> str:
    """The server, database and user of a DSN, without its password (for messages)."""
    try:
        params = conninfo_to_dict(dsn)
    except Exception as exc:
        raise InvalidArgumentError(f"Invalid PostgreSQL DSN: {exc}") from None
    host = params.get("host") or params.get("hostaddr") or "localhost"
    port = params.get("port") or "5432"
    user = f"{params['user']}@" if params.get("user") else ""
    return f"postgresql://{user}{host}:{port}/{params.get('dbname') or ''}"


def _check_number(name: str, value: Any, *, integer: bool = False, minimum: float = 0.0) -> None:
    valid = not isinstance(value, bool) and isinstance(value, int if integer else (int, float))
    if not valid or not math.isfinite(value) or value < minimum:
        raise InvalidArgumentError(f"{name} must be a number >= {minimum}, got {value!r}")


class PostgresLightningStore(DurableLightningStore):
    """A LightningStore in a PostgreSQL database.

    The constructor does not connect: the first operation (or `await store.open()`, which reports problems early)
    connects and creates or upgrades the schema. Any thread and event loop may use the store.

    Args:
        dsn: a libpq connection string or URL (`postgresql://user@host:5432/db`).
        schema: the PostgreSQL schema holding this store's tables (created if missing).
        pool_size: the most connections this process opens.
        connect_timeout: seconds to wait for the server when connecting.
        acquire_timeout: seconds an operation waits for a free pooled connection before StoreBusyError.
        retention: limits on stored spans (see `RetentionPolicy`); None keeps every span.
        scan_debounce_seconds: minimum interval between health scans (0: whenever a known deadline has passed).
        health_refresh_seconds: while the notification connection is down, rescan at least this often to notice
            deadlines set by other processes.
        listen: learn of other processes' changes (finished rollouts, new health deadlines) at once through
            LISTEN/NOTIFY on one extra connection; False polls instead (waiters every `poll_interval_seconds`).
        poll_interval_seconds: how often waiters re-read their rollouts while no notifications arrive (listen=False,
            or the notification connection is down and reconnecting).

    Raises (on first use or `open()`):
        StoreOpenError: the server is unreachable, the credentials are wrong or the schema is not a store's.
        SchemaVersionError: the schema was written by a newer agentlightning.
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        pool_size: int = 10,
        connect_timeout: float = 10.0,
        acquire_timeout: float = 30.0,
        retention: Optional[RetentionPolicy] = None,
        scan_debounce_seconds: float = 0.0,
        health_refresh_seconds: float = 0.5,
        listen: bool = True,
        poll_interval_seconds: float = 0.5,
    ) -> None:
        if not isinstance(dsn, str) or not dsn:
            raise InvalidArgumentError(f"dsn must be a PostgreSQL connection string, got {dsn!r}")
        location = f"{describe_dsn(dsn)} (schema {check_schema_name(schema)})"
        _check_number("pool_size", pool_size, integer=True, minimum=1)
        _check_number("connect_timeout", connect_timeout, minimum=0.1)
        _check_number("acquire_timeout", acquire_timeout)
        _check_number("health_refresh_seconds", health_refresh_seconds, minimum=0.01)
        _check_number("poll_interval_seconds", poll_interval_seconds, minimum=0.01)
        if not isinstance(listen, bool):
            raise InvalidArgumentError(f"listen must be True or False, got {listen!r}")
        options: dict[str, Any] = {
            "dsn": dsn,
            "schema": schema,
            "pool_size": pool_size,
            "connect_timeout": connect_timeout,
            "acquire_timeout": acquire_timeout,
            "retention": retention,
            "scan_debounce_seconds": scan_debounce_seconds,
            "health_refresh_seconds": health_refresh_seconds,
            "listen": listen,
            "poll_interval_seconds": poll_interval_seconds,
        }
        self._postgres = PostgresStorage(
            dsn,
            location=location,
            schema=schema,
            pool_size=pool_size,
            connect_timeout=connect_timeout,
            acquire_timeout=acquire_timeout,
            retention=retention,
            health_refresh_seconds=health_refresh_seconds,
            listen=listen,
            poll_interval=poll_interval_seconds,
        )
        super().__init__(self._postgres, options, scan_debounce_seconds=scan_debounce_seconds)

    @property
    def schema(self) -> str:
        return self._postgres.schema

    @property
    def location(self) -> str:
        return self._postgres.location

    @property
    def listening(self) -> bool:
        """True while other processes' changes arrive as notifications (False: polling)."""
        return self._postgres.announces_changes

    async def open(self) -> None:
        """Connect and prepare the schema now; raises StoreOpenError or SchemaVersionError on problems."""
        await self._postgres.open()

    def __repr__(self) -> str:
        return f"PostgresLightningStore({self.location!r})"


_FLAGS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}

_URL_OPTIONS: dict[str, Callable[[str], Any]] = {
    "schema": str,
    "pool_size": int,
    "connect_timeout": float,
    "acquire_timeout": float,
    "retention_max_age_seconds": float,
    "retention_max_spans": int,
    "retention_max_bytes": int,
    "listen": lambda value: _FLAGS[value.lower()],
    "poll_interval_seconds": float,
}


def store_from_url(url: str) -> PostgresLightningStore:
    """`postgresql://user@host:port/db?schema=name&pool_size=10` (also `postgres://`). Other query parameters
    (sslmode, ...) go to libpq; the retention_max_* parameters set a RetentionPolicy; `listen=false` polls instead
    of listening for other processes' changes."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise InvalidArgumentError(f"Invalid PostgreSQL store URL {url!r}: use postgresql://user@host:port/db")
    options: dict[str, Any] = {}
    passthrough: list[tuple[str, str]] = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        converter = _URL_OPTIONS.get(key)
        if converter is None:
            passthrough.append((key, value))
            continue
        try:
            options[key] = converter(value)
        except (ValueError, KeyError):
            raise InvalidArgumentError(f"Invalid value {value!r} for {key} in PostgreSQL store URL") from None
    # Percent-encoding throughout: libpq reads a "+" in a URL literally, not as a space.
    dsn = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(passthrough, quote_via=quote), parts.fragment))
    limits = {
        name: options.pop(f"retention_{name}")
        for name in ("max_age_seconds", "max_spans", "max_bytes")
        if f"retention_{name}" in options
    }
    return PostgresLightningStore(dsn, retention=RetentionPolicy(**limits) if limits else None, **options)
