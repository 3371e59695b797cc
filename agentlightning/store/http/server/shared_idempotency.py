"""Idempotency records kept in the store's own database (SQLite, PostgreSQL).

Several server processes (`agl store --workers N`, or several servers on one PostgreSQL schema) share one table, so
a retry that reaches another process than the first try replays the stored answer instead of applying the write
again. A record is written in its own transaction before the request runs (in flight) and completed with the
answer afterwards; a retry that finds a record in flight waits for its answer. A record in flight for longer than
`in_flight_seconds` belongs to a process that died: the retry takes it over and runs the request. Answers expire
`ttl_seconds` after they were given.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Optional

from agentlightning.store.http.server.idempotency import CachedResponse, IdempotencyConflict

__all__ = ["SharedIdempotencyRecords", "shared_records_for"]

logger = logging.getLogger(__name__)

_WAIT_MIN = 0.005
_WAIT_MAX = 0.2


def shared_records_for(store: Any, *, ttl_seconds: float) -> Optional[SharedIdempotencyRecords]:
    """Shared records for a store whose data lives in a database other processes use; else None."""
    from agentlightning.store.sql.storage import SqlStorage

    storage = getattr(store, "_storage", None)
    if isinstance(storage, SqlStorage) and storage.shared_across_processes:
        return SharedIdempotencyRecords(storage, ttl_seconds=ttl_seconds)
    return None


class SharedIdempotencyRecords:
    """The `IdempotencyCache` interface over the `idempotency` table of an SQL storage."""

    def __init__(
        self,
        storage: Any,
        *,
        ttl_seconds: float = 600.0,
        in_flight_seconds: float = 120.0,
        expire_every_seconds: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if ttl_seconds <= 0 or in_flight_seconds <= 0:
            raise ValueError("the idempotency record lifetimes must be positive")
        self._storage = storage
        self.ttl_seconds = ttl_seconds
        self.in_flight_seconds = in_flight_seconds
        self._expire_every = expire_every_seconds
        self._clock = clock
        self._last_expiry = float("-inf")

    async def count(self) -> int:
        async with self._storage.sql_transaction(write=False) as tx:
            rows = await tx.db.fetchall("SELECT COUNT(*) FROM idempotency")
        return int(rows[0][0])

    async def begin(self, key: str, fingerprint: tuple[str, str, str]) -> Optional[CachedResponse]:
        """The stored answer for a repeated key (waiting while another process runs it), or None when this request
        must run; then `complete` or `forget` must follow."""
        await self._expire()
        mark = "\n".join(fingerprint)
        delay = _WAIT_MIN
        while True:
            now = self._clock()
            # A fresh key (the common case) costs one statement. Its commit need not wait for the disk: the record
            # matters only once the request's own write commits, and that durable commit flushes the log up to
            # itself, this record included (a crash before it loses both, and a retry then runs the request).
            inserted = await self._storage.run_statement(
                "INSERT INTO idempotency (key, fingerprint, status, body, created) VALUES (?, ?, NULL, NULL, ?)"
                " ON CONFLICT (key) DO NOTHING RETURNING key",
                (key, mark, now),
                durable=False,
            )
            if inserted:
                return None
            async with self._storage.sql_transaction(write=True) as tx:
                # The key is known (a retry, or another process inserted it first): read its record.
                rows = await tx.db.fetchall(
                    "SELECT fingerprint, status, body, created FROM idempotency WHERE key = ?", (key,)
                )
                if not rows:
                    continue
                stored_mark, status, body, created = rows[0]
                if stored_mark != mark:
                    method_path = stored_mark.split("\n")[:2]
                    raise IdempotencyConflict(
                        f"Idempotency-Key {key!r} was already used for a different request ({' '.join(method_path)})"
                    )
                if status is not None:
                    return CachedResponse(int(status), bytes(body or b""))
                if now - float(created) > self.in_flight_seconds:
                    logger.warning("Idempotency-Key %r was in flight for %.0f s; running it again", key, now - created)
                    await tx.db.execute("UPDATE idempotency SET created = ? WHERE key = ?", (now, key))
                    return None
            await asyncio.sleep(delay)  # another process runs the request: wait for its answer
            delay = min(delay * 2, _WAIT_MAX)

    async def complete(self, key: str, response: CachedResponse) -> None:
        await self._storage.run_statement(
            "UPDATE idempotency SET status = ?, body = ?, created = ? WHERE key = ?",
            (response.status, response.body, self._clock(), key),
        )

    async def forget(self, key: str) -> None:
        await self._storage.run_statement("DELETE FROM idempotency WHERE key = ? AND status IS NULL", (key,))

    async def _expire(self) -> None:
        now = self._clock()
        if now - self._last_expiry < self._expire_every:
            return
        self._last_expiry = now
        async with self._storage.sql_transaction(write=True) as tx:
            await tx.db.execute(
                "DELETE FROM idempotency WHERE created < ?", (now - max(self.ttl_seconds, self.in_flight_seconds),)
            )
