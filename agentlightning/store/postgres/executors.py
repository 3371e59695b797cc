"""How PostgreSQL statements run: `PostgresExecutor` for reads, `BatchingExecutor` for write transactions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import AsyncClientCursor, AsyncConnection
from psycopg.pq import Escaping

from agentlightning.store.postgres.literals import LiteralWriter
from agentlightning.store.sql.rows import Row
from agentlightning.store.sql.statements import DeferredRows, SqlExecutor, multi_row

_CONVERTED: dict[tuple[str, str], str] = {}


def _with_placeholders(statement: str, placeholder: str) -> str:
    """`statement` with its `?` placeholders as psycopg's `placeholder` (cached: the statements are few and fixed)."""
    key = (statement, placeholder)
    converted = _CONVERTED.get(key)
    if converted is None:
        if len(_CONVERTED) > 4000:
            _CONVERTED.clear()
        converted = _CONVERTED[key] = statement.replace("?", placeholder)
    return converted


def pg_sql(statement: str) -> str:
    """`?` placeholders as psycopg's binary `%b` ones: binary parameters skip text escaping, which dominates the
    client's work for JSON documents and arrays."""
    return _with_placeholders(statement, "%b")


class PostgresExecutor(SqlExecutor):
    def __init__(self, conn: AsyncConnection) -> None:
        self.cursor = conn.cursor()

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        await self.cursor.execute(pg_sql(sql), params)  # type: ignore[arg-type]

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            await self.cursor.executemany(pg_sql(sql), rows)  # type: ignore[arg-type]

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        await self.cursor.execute(pg_sql(sql), params)  # type: ignore[arg-type]
        return await self.cursor.fetchall()


def _mergeable(sql: str, rows: Sequence[Sequence[Any]]) -> bool:
    """Whether `executemany(sql, rows)` can be one multi-row INSERT: an upsert may not touch a row twice in one
    statement, so its conflict key (the first column of the store's upserts) must differ between the rows."""
    if not sql.startswith("INSERT INTO ") or "VALUES (" not in sql:
        return False
    return "DO UPDATE" not in sql or len({row[0] for row in rows}) == len(rows)


class BatchingExecutor(SqlExecutor):
    """Runs a write transaction in few round trips, on a connection in autocommit mode.

    Statements whose results nobody reads (writes, locks, notifications) are queued, with the BEGIN that opens the
    transaction, and sent together with the next statement whose rows are needed, or with the COMMIT, as one
    simple-protocol query (parameters bound client-side by psycopg): a call costs one round trip per read plus one
    for the commit. An error in any statement aborts the rest and the transaction, and surfaces at that send."""

    def __init__(self, conn: AsyncConnection) -> None:
        self.cursor = AsyncClientCursor(conn)
        self.pending: list[str] = ["BEGIN"]
        #: Reads queued with the statements (position in `pending`, where their rows go).
        self.deferred: list[tuple[int, DeferredRows]] = []
        escaping = Escaping(conn.pgconn)
        self.literals = LiteralWriter(escaping.escape_literal, escaping.escape_bytea)

    def _render(self, sql: str, params: Sequence[Any]) -> str:
        rendered = self.literals.render(sql, params) if params else sql
        if rendered is None:  # a type of parameter `literals` leaves to psycopg
            rendered = self.cursor.mogrify(_with_placeholders(sql, "%s"), params)  # type: ignore[arg-type]
        return rendered

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self.pending.append(self._render(sql, params))

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if len(rows) > 1 and _mergeable(sql, rows):  # one statement for all rows: one parse and plan
            for start in range(0, len(rows), 100):
                self.pending.append(self._render(*multi_row(sql, rows[start : start + 100])))
            return
        self.pending.extend(self._render(sql, row) for row in rows)

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        self.pending.append(self._render(sql, params))
        await self._send()
        return await self.cursor.fetchall()

    async def defer(self, sql: str, params: Sequence[Any] = ()) -> DeferredRows:
        deferred = DeferredRows(self)
        self.deferred.append((len(self.pending), deferred))
        self.pending.append(self._render(sql, params))
        return deferred

    async def send_pending(self) -> None:
        if self.pending and self.pending != ["BEGIN"]:
            await self._send()

    async def commit(self) -> None:
        if self.pending == ["BEGIN"]:  # nothing was sent: there is no transaction to commit
            self.pending = []
            return
        self.pending.append("COMMIT")
        await self._send()

    async def _send(self) -> None:
        batch, self.pending = self.pending, []
        deferred, self.deferred = self.deferred, []
        await self.cursor.execute(";\n".join(batch))  # type: ignore[arg-type]
        # One result per statement, in order; the deferred reads take theirs, the cursor ends on the last one.
        position = 0
        for index, rows in deferred:
            while position < index:
                self.cursor.nextset()
                position += 1
            rows.fill(await self.cursor.fetchall())
        while self.cursor.nextset():
            pass
