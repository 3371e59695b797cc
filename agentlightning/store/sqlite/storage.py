"""SQLite persistence for `SqliteLightningStore`: one WAL-mode connection per process, shared by its threads.

How calls run: every statement runs directly on the calling thread, under a `threading.Lock` that the store holds
for one whole transaction. SQLite calls on this schema take microseconds, so a dedicated thread would cost more in
hand-offs (tens of microseconds per statement) than it saves; the core never suspends inside a transaction, so the
lock is held only while statements run. The one slow step, waiting for another process to release the database's
write lock, never blocks the event loop: `BEGIN IMMEDIATE` is tried without a busy timeout and retried after an
`asyncio.sleep` (with the thread lock released) until `busy_timeout` seconds have passed.

Durability: WAL with synchronous=NORMAL makes every committed transaction survive the process being killed (the
commit is in the WAL file before COMMIT returns). A power loss or OS crash may lose the last transactions, never
corrupt the file; `synchronous="full"` also survives that, at the cost of an fsync per commit.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal, Optional

from agentlightning.store.base import LightningStoreCapabilities
from agentlightning.store.core.concurrency import TransactionLock
from agentlightning.store.errors import (
    InvalidArgumentError,
    StoreBusyError,
    StoreClosedError,
    StoreError,
    StoreFullError,
    StoreOpenError,
)
from agentlightning.store.sql.dialect import SQLITE
from agentlightning.store.sql.retention import RetentionPolicy
from agentlightning.store.sql.rows import Row
from agentlightning.store.sql.storage import SqlStorage
from agentlightning.store.sql.transaction import SqlExecutor, SqlTransaction
from agentlightning.store.sqlite.schema import migrate
from agentlightning.utils.retry import FOREVER, RetryAttempt, RetryPolicy, retry_async

logger = logging.getLogger(__name__)

SynchronousMode = Literal["normal", "full"]

#: SQLite 3.24 added UPSERT (ON CONFLICT ... DO UPDATE), which the store relies on.
MIN_SQLITE_VERSION = (3, 24, 0)

# Connections inherited through fork() must never be closed by the child (closing could checkpoint or delete the
# parent's WAL); they are parked here for the child's lifetime.
_INHERITED_CONNECTIONS: list[sqlite3.Connection] = []


_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6
_SQLITE_FULL = 13


class _Busy(Exception):
    """Another process holds the database's write lock (retried until `busy_timeout` passes)."""


_BUSY_RETRY = RetryPolicy(max_retries=FOREVER, initial_delay=0.00075, max_delay=0.015, jitter=2 / 3)
"""Waits between tries of BEGIN on a busy database: 0.25-0.75 ms at first, doubling up to 5-15 ms."""


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)  # Python >= 3.11
    if code is not None:
        return code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def _is_full(exc: sqlite3.Error) -> bool:
    """SQLITE_FULL: the disk (or the database's `max_page_count`) has no room for the write."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF == _SQLITE_FULL
    return "database or disk is full" in str(exc)


class SqliteExecutor(SqlExecutor):
    """Runs statements synchronously on the connection (the coroutines never suspend)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self.conn.execute(sql, params)

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            self.conn.executemany(sql, rows)

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return self.conn.execute(sql, params).fetchall()


class SqliteStorage(SqlStorage):
    tracks_health_deadlines = False
    poll_interval = 0.2

    def __init__(
        self,
        path: str,
        *,
        synchronous: SynchronousMode = "normal",
        busy_timeout: float = 30.0,
        retention: Optional[RetentionPolicy] = None,
    ) -> None:
        if synchronous not in ("normal", "full"):
            raise InvalidArgumentError(f"synchronous must be 'normal' or 'full', got {synchronous!r}")
        if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, (int, float)) or not busy_timeout >= 0:
            raise InvalidArgumentError(f"busy_timeout must be a non-negative number of seconds, got {busy_timeout!r}")
        self.path = path
        self.in_memory = path == ":memory:"
        self.shared_across_processes = not self.in_memory
        self.synchronous = synchronous
        self.busy_timeout = busy_timeout
        super().__init__(retention, path)
        self._lock = TransactionLock("SQLite store")
        self._conn: Optional[sqlite3.Connection] = None
        self._pid = os.getpid()
        self._closed = False
        self.schema_version_before_open = self._open()

    # ----------------------------------------------------------------------------------------------------- opening
    def _open(self) -> int:
        if sqlite3.sqlite_version_info < MIN_SQLITE_VERSION:
            raise StoreOpenError(
                f"SQLite {sqlite3.sqlite_version} is too old for the SQLite store (needs 3.24 or newer)"
            )
        location = self.path
        if not self.in_memory:
            directory = os.path.dirname(os.path.abspath(self.path))
            if not os.path.isdir(directory):
                raise StoreOpenError(f"Cannot open the SQLite store {location}: directory {directory} does not exist")
            if os.path.isdir(self.path):
                raise StoreOpenError(f"Cannot open the SQLite store {location}: it is a directory")
        conn: Optional[sqlite3.Connection] = None
        try:
            conn = sqlite3.connect(self.path, timeout=max(self.busy_timeout, 1.0), isolation_level=None,
                                   check_same_thread=False)  # fmt: skip
            if not self.in_memory:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreOpenError(f"Cannot open the SQLite store {location}: WAL mode unavailable ({mode})")
            conn.execute(f"PRAGMA synchronous = {self.synchronous.upper()}")
            before = migrate(conn, location)
            conn.execute("PRAGMA busy_timeout = 0")  # waits for other writers happen in `transaction`, off the loop
        except sqlite3.Error as exc:
            if conn is not None:
                conn.close()
            raise StoreOpenError(f"Cannot open the SQLite store {location}: {exc}") from exc
        except BaseException:
            if conn is not None:
                conn.close()
            raise
        self._conn = conn
        self._pid = os.getpid()
        return before

    def _connection(self) -> sqlite3.Connection:
        """The connection of this process (called with the lock held)."""
        if self._closed:
            raise StoreClosedError("The SQLite store is closed")
        if self._pid != os.getpid():
            if self.in_memory:
                raise StoreError("An in-memory SQLite store cannot be used from a forked process")
            if self._conn is not None:
                _INHERITED_CONNECTIONS.append(self._conn)
            self._conn = None
            self._open()
        assert self._conn is not None
        return self._conn

    @property
    def capabilities(self) -> LightningStoreCapabilities:
        return LightningStoreCapabilities(
            thread_safe=True, async_safe=True, zero_copy=not self.in_memory, otlp_traces=False
        )

    # ------------------------------------------------------------------------------------------------ transactions
    async def _begin(self, write: bool) -> sqlite3.Connection:
        """Start a transaction with the lock held; wait (without blocking the loop) while other processes write."""
        try:
            return self._try_begin(write)
        except _Busy:
            pass
        deadline = time.monotonic() + self.busy_timeout

        async def begin(_: RetryAttempt) -> sqlite3.Connection:
            return self._try_begin(write)

        try:
            return await retry_async(
                begin,
                _BUSY_RETRY,
                what=f"BEGIN on SQLite store {self.path}",
                retry_on=lambda exc: isinstance(exc, _Busy) and time.monotonic() < deadline,
            )
        except _Busy:
            raise StoreBusyError(
                f"The SQLite store {self.path} stayed locked by other writers for {self.busy_timeout} s"
            ) from None

    def _try_begin(self, write: bool) -> sqlite3.Connection:
        """Start a transaction and keep the lock, or release it and raise `_Busy` while another process writes."""
        self._lock.acquire()
        try:
            conn = self._connection()
            if write:
                conn.execute("BEGIN IMMEDIATE")
            else:
                conn.execute("BEGIN")
                conn.execute("SELECT 1 FROM agl_meta LIMIT 1").fetchall()  # takes the read snapshot now
            return conn
        except sqlite3.Error as exc:
            if conn_in_transaction(self._conn):
                self._conn.execute("ROLLBACK")  # type: ignore[union-attr]
            self._lock.release()
            if _is_busy(exc):
                raise _Busy from exc
            raise self._store_error(exc) from exc
        except BaseException:
            self._lock.release()
            raise

    @asynccontextmanager
    async def sql_transaction(self, *, write: bool = True) -> AsyncIterator[SqlTransaction]:
        """A transaction exposing the SQL operations (the store's own transactions, retention, tests)."""
        conn = await self._begin(write)
        tx = SqlTransaction(SqliteExecutor(conn), SQLITE, write=write)
        try:
            try:
                yield tx
                if write:
                    await tx.finalize()
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            if _is_busy(exc):
                raise StoreBusyError(f"SQLite store {self.path} is locked: {exc}") from exc
            raise self._store_error(exc) from exc
        finally:
            self._lock.release()
        self.outage.worked(write=write)
        await self.after_commit(tx)

    def _store_error(self, exc: sqlite3.Error) -> StoreError:
        """The store error for a failed statement; a full disk is recorded (and logged once per burst)."""
        if _is_full(exc):
            return self.outage.refused(
                StoreFullError(
                    f"The SQLite store {self.path} is full ({exc}): writes are refused until disk space is freed"
                )
            )
        return StoreError(f"SQLite store {self.path}: {exc}")

    # ------------------------------------------------------------------------------------------------------ health
    def health_scan_due(self, now: float) -> bool:
        with self._lock:
            conn = self._connection()
            try:
                # The WHERE clause lets SQLite answer from the partial index instead of scanning every rollout.
                row = conn.execute(
                    "SELECT MIN(health_deadline) FROM rollouts WHERE health_deadline IS NOT NULL"
                ).fetchone()
            except sqlite3.Error as exc:
                if _is_busy(exc):
                    return True  # let the scan's transaction wait for the database
                raise StoreError(f"SQLite store {self.path}: {exc}") from exc
        return row is not None and row[0] is not None and row[0] <= now

    def backend_statistics(self) -> dict[str, object]:
        if self.in_memory:
            return {}
        files = [self.path + suffix for suffix in ("", "-wal")]
        return {"database_bytes": sum(os.path.getsize(path) for path in files if os.path.exists(path))}

    async def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None


def conn_in_transaction(conn: Optional[sqlite3.Connection]) -> bool:
    return conn is not None and conn.in_transaction
