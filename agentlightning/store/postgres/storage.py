"""PostgreSQL persistence for `PostgresLightningStore`: one transaction per store operation over a shared pool.

Many processes (trainers, runners, several store servers) may share one database: dequeues lock queue entries and
rollouts with FOR UPDATE SKIP LOCKED, so each rollout goes to exactly one caller; health scans lock their candidates
the same way and re-read them inside the transaction, so two scanners never handle the same rollout twice. See
`sql_transaction` for the locking order that keeps writers free of deadlocks.

The health hint: `health_scan_due` must answer without a query, so each process keeps the earliest deadline it knows
(from its own writes, from its last scan, which reads the global minimum, and from other processes' notifications:
see `postgres_listen`). While the notification connection is down, it also rescans at least every
`health_refresh_seconds` to notice deadlines set by other processes, and waiters poll every `poll_interval` seconds.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Optional

import psycopg
from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus

from agentlightning.store.base import LightningStoreCapabilities
from agentlightning.store.errors import StoreError, StoreFullError, StoreOpenError, StoreUnavailableError
from agentlightning.store.postgres.executors import BatchingExecutor, PostgresExecutor, pg_sql
from agentlightning.store.postgres.listen import PostgresListener, deadline_payload, finished_payload
from agentlightning.store.postgres.pool import ConnectionPool
from agentlightning.store.postgres.schema import migrate
from agentlightning.store.postgres.transaction import PostgresTransaction
from agentlightning.store.sql.retention import RetentionPolicy
from agentlightning.store.sql.rows import Row
from agentlightning.store.sql.storage import SqlStorage
from agentlightning.store.sql.transaction import SqlExecutor

logger = logging.getLogger(__name__)

#: The `application_name` of the connections that LISTEN for other processes' changes.
LISTEN_APPLICATION_NAME = "agentlightning-listen"

#: SQLSTATE classes of a server that cannot serve now: connection exception (08), operator intervention such as a
#: shutdown or a server starting up (57P), insufficient resources (53: too many connections, out of memory, disk
#: full).
_UNAVAILABLE_STATES = ("08", "57P", "53")
_DISK_FULL = "53100"


class PostgresStorage(SqlStorage):
    shared_across_processes = True

    def __init__(
        self,
        conninfo: str,
        *,
        location: str,
        schema: str,
        pool_size: int,
        connect_timeout: float,
        acquire_timeout: float,
        retention: Optional[RetentionPolicy],
        health_refresh_seconds: float,
        listen: bool = True,
        poll_interval: float = 0.5,
    ) -> None:
        super().__init__(retention, location)
        self.conninfo = conninfo
        self.location = location
        self.schema = schema
        self.connect_timeout = connect_timeout
        self.health_refresh_seconds = health_refresh_seconds
        self.poll_interval = poll_interval
        self.pool = ConnectionPool(self._connect, max_size=pool_size, acquire_timeout=acquire_timeout)
        self.schema_ready = False
        self._hint_lock = threading.Lock()
        self._hint = -math.inf
        self._hint_checked = -math.inf
        self._deadlines_heard = 0
        self._subscribers: list[tuple[Callable[[Optional[list[str]]], None], Callable[[bool], None]]] = []
        self.listener = PostgresListener(
            self._listen_connect,
            schema,
            on_finished=self._heard_finished,
            on_deadline=self._heard_deadline,
            on_reset=self._listener_reset,
            location=location,
        )
        self._listen = listen

    @property
    def capabilities(self) -> LightningStoreCapabilities:
        return LightningStoreCapabilities(thread_safe=True, async_safe=True, zero_copy=True, otlp_traces=False)

    async def _connect(self) -> AsyncConnection:
        try:
            conn = await AsyncConnection.connect(
                self.conninfo,
                autocommit=False,
                connect_timeout=max(2, math.ceil(self.connect_timeout)),
                options=self._session_options(),
                application_name="agentlightning",
            )
        except psycopg.Error as exc:
            if self.schema_ready:  # it was open: the server went away (restarting, unreachable) and may come back
                raise self._store_error(exc) from exc
            raise StoreOpenError(f"Cannot connect to the PostgreSQL store {self.location}: {exc}") from exc
        if not self.schema_ready:
            try:
                await migrate(conn, self.schema, self.location)
            except psycopg.Error as exc:
                await conn.close()
                raise StoreOpenError(f"Cannot prepare the PostgreSQL store {self.location}: {exc}") from exc
            except BaseException:
                await conn.close()
                raise
            self.schema_ready = True
        return conn

    async def _listen_connect(self) -> AsyncConnection:
        return await AsyncConnection.connect(
            self.conninfo,
            autocommit=True,
            connect_timeout=max(2, math.ceil(self.connect_timeout)),
            application_name=LISTEN_APPLICATION_NAME,
        )

    def _session_options(self) -> str:
        """The DSN's own `options` (e.g. `-c synchronous_commit=off`) plus the store's search_path."""
        own = conninfo_to_dict(self.conninfo).get("options") or ""
        return f"{own} -c search_path={self.schema}".strip()

    async def open(self) -> None:
        """Connect and create or upgrade the schema now (otherwise this happens on first use)."""
        conn = await self.pool.acquire()
        self.pool.release(conn, reusable=True)
        self._start_listening()

    def _start_listening(self) -> None:
        """Listen once the database was reached: a store that cannot open fails with its own one error, and waiters
        poll (then re-read everything) until the LISTEN connection is up."""
        if self._listen:
            self.listener.ensure_running()

    # ------------------------------------------------------------------------------------------------ transactions
    @asynccontextmanager
    async def sql_transaction(self, *, write: bool = True) -> AsyncIterator[PostgresTransaction]:
        """One database transaction on a pooled connection, committed when the block exits normally.

        The notifications of what it changed (finished rollouts, earlier health deadlines) are sent inside it, so
        they are delivered on commit only."""
        conn = await self.pool.acquire()
        self._start_listening()
        reusable = False
        batch = BatchingExecutor(conn) if write else None
        executor: SqlExecutor = batch if batch is not None else PostgresExecutor(conn)
        tx = PostgresTransaction(executor, write=write, lock_namespace=self.schema)
        next_deadline: Optional[float] = None
        heard_before = self._deadlines_heard
        try:
            try:
                # Reads run in autocommit mode (no BEGIN and COMMIT round trips): each statement sees what was
                # committed when it started, exactly as inside a READ COMMITTED transaction. Writes send their own
                # BEGIN and COMMIT (see BatchingExecutor).
                await conn.set_autocommit(True)
                yield tx
                if write:
                    await tx.finalize()
                    if tx.scanned:
                        rows = await tx.db.fetchall("SELECT MIN(health_deadline) FROM rollouts")
                        next_deadline = rows[0][0] if rows[0][0] is not None else math.inf
                    for payload in self._announcements(tx):
                        await tx.db.execute("SELECT pg_notify(?, ?)", (self.schema, payload))
                    assert batch is not None
                    await batch.commit()
                await conn.set_autocommit(False)
                reusable = True
            except BaseException:
                reusable = await _rollback(conn)
                raise
        except psycopg.Error as exc:
            raise self._store_error(exc) from exc
        finally:
            self.pool.release(conn, reusable=reusable)
        self.outage.worked(write=write)
        with self._hint_lock:
            if next_deadline is not None:
                # A deadline heard during the scan may be missing from its MIN: keep the lower hint then.
                heard = self._deadlines_heard != heard_before
                self._hint = min(next_deadline, self._hint) if heard else next_deadline
                self._hint_checked = time.monotonic()
            if tx.new_deadlines:
                self._hint = min(self._hint, min(tx.new_deadlines))
        await self.after_commit(tx)

    async def run_statement(self, sql: str, params: Sequence[Any] = (), *, durable: bool = True) -> list[Row]:
        """One statement in autocommit mode: a single round trip instead of BEGIN, statement, COMMIT. Not `durable`:
        in a transaction with synchronous_commit off, whose commit does not wait for the disk."""
        if not durable:
            async with self.sql_transaction(write=True) as tx:
                await tx.db.execute("SET LOCAL synchronous_commit = off")
                return await tx.db.fetchall(sql, params)
        conn = await self.pool.acquire()
        reusable = False
        try:
            await conn.set_autocommit(True)
            cursor = conn.cursor()
            await cursor.execute(pg_sql(sql), params)  # type: ignore[arg-type]
            rows = await cursor.fetchall() if cursor.description is not None else []
            await conn.set_autocommit(False)
            reusable = True
        except psycopg.Error as exc:
            raise self._store_error(exc) from exc
        except BaseException:
            reusable = await _rollback(conn)
            raise
        finally:
            self.pool.release(conn, reusable=reusable)
        self.outage.worked(write=True)
        return rows

    def _store_error(self, exc: psycopg.Error) -> StoreError:
        """The store error for a failed call. A server that cannot serve now (down, restarting, unreachable, out of
        connections or disk) gives `StoreUnavailableError` (`StoreFullError` for a full disk), logged once per
        outage; its idle pooled connections are closed then (they died with the server's sessions)."""
        state = exc.sqlstate
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if state == _DISK_FULL:
            message = (
                f"The PostgreSQL store {self.location} is full ({reason}): writes are refused until disk space is freed"
            )
            return self.outage.refused(StoreFullError(message))
        if isinstance(exc, psycopg.OperationalError) and (state is None or state.startswith(_UNAVAILABLE_STATES)):
            self.pool.discard_idle()
            message = f"The PostgreSQL store {self.location} is unavailable ({reason}); retry later"
            return self.outage.refused(StoreUnavailableError(message))
        return StoreError(f"PostgreSQL store {self.location}: {exc}")

    def _announcements(self, tx: PostgresTransaction) -> list[str]:
        token = self.listener.token
        payloads: list[str] = []
        if tx.finished:
            payloads.append(finished_payload(token, list(dict.fromkeys(tx.finished))))
        if tx.earlier_deadlines:
            payloads.append(deadline_payload(token, min(tx.earlier_deadlines)))
        return payloads

    # ------------------------------------------------------------------------------------------------ announcements
    @property
    def announces_changes(self) -> bool:
        return self._listen and self.listener.live

    @property
    def tracks_health_deadlines(self) -> bool:  # type: ignore[override]
        return self.announces_changes

    def subscribe(
        self,
        on_finished: Callable[[Optional[list[str]]], None],
        on_wake: Callable[[bool], None],
    ) -> None:
        self._subscribers.append((on_finished, on_wake))

    def _heard_finished(self, rollout_ids: Optional[list[str]]) -> None:
        for on_finished, _ in self._subscribers:
            on_finished(rollout_ids)

    def _heard_deadline(self, deadline: float) -> None:
        with self._hint_lock:
            self._deadlines_heard += 1
            earlier = deadline < self._hint
            if earlier:
                self._hint = deadline
        if earlier:  # waiters sleeping until a later deadline must scan sooner
            for _, on_wake in self._subscribers:
                on_wake(False)

    def _listener_reset(self, up: bool) -> None:
        """The LISTEN connection went up or down: rescan health and re-read what waiters wait for."""
        with self._hint_lock:
            self._deadlines_heard += 1
            self._hint = -math.inf
        for _, on_wake in self._subscribers:
            on_wake(True)

    # ------------------------------------------------------------------------------------------------------ health
    def health_scan_due(self, now: float) -> bool:
        if now >= self._hint:
            return True
        if self.announces_changes:
            return False
        return time.monotonic() - self._hint_checked >= self.health_refresh_seconds

    def next_health_deadline(self) -> Optional[float]:
        hint = self._hint
        return hint if self.announces_changes and hint != math.inf else None

    def backend_statistics(self) -> dict[str, object]:
        return {"connections": self.pool.size}

    async def close(self) -> None:
        await self.listener.stop()
        await self.pool.close()


async def _rollback(conn: AsyncConnection) -> bool:
    """Roll back after a failure; True when the connection is clean enough to reuse."""
    if conn.closed or conn.broken:
        return False
    try:
        await conn.rollback()
        if conn.autocommit:
            await conn.set_autocommit(False)
    except BaseException:
        return False
    return conn.info.transaction_status == TransactionStatus.IDLE
