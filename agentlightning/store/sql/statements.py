"""How the SQL transactions run statements: the executor interface and the read helpers shared by their parts."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Optional

from agentlightning.store.core.query import Query
from agentlightning.store.sql.dialect import ORDER_COLUMN, SqlDialect, compile_query, total_from_page
from agentlightning.store.sql.rows import Row

#: Joins each rollout `r` with its latest attempt `a` (NULLs when it has none).
LATEST_ATTEMPT_JOIN = (
    "LEFT JOIN attempts a ON a.rollout_id = r.rollout_id AND a.sequence_id = "
    "(SELECT MAX(b.sequence_id) FROM attempts b WHERE b.rollout_id = r.rollout_id)"
)


def multi_row(sql: str, rows: Sequence[Sequence[Any]]) -> tuple[str, list[Any]]:
    """`INSERT ... VALUES (?, ..., ?) [rest]` for several rows in one statement (one parse and plan, not one each).
    The row template must hold no parentheses of its own."""
    head, marker, tail = sql.partition("VALUES (")
    if not marker or not rows:
        raise ValueError(f"not a single-row INSERT ... VALUES statement: {sql[:80]!r}")
    end = tail.index(")")
    template = "(" + tail[:end] + ")"
    return head + "VALUES " + ", ".join([template] * len(rows)) + tail[end + 1 :], [v for row in rows for v in row]


class DeferredRows:
    """The rows of a read sent with a later round trip (see `SqlExecutor.defer`)."""

    def __init__(self, executor: SqlExecutor) -> None:
        self._executor = executor
        self._rows: Optional[list[Row]] = None

    def fill(self, rows: list[Row]) -> None:
        self._rows = rows

    async def rows(self) -> list[Row]:
        """The rows, sending the read now if no round trip has taken it yet."""
        if self._rows is None:
            await self._executor.send_pending()
        if self._rows is None:
            raise RuntimeError("a deferred read was not answered")
        return self._rows


class SqlExecutor(ABC):
    """Runs statements (with `?` placeholders) inside the current transaction."""

    @abstractmethod
    async def execute(self, sql: str, params: Sequence[Any] = ()) -> None: ...

    @abstractmethod
    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...

    @abstractmethod
    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Row]: ...

    async def defer(self, sql: str, params: Sequence[Any] = ()) -> DeferredRows:
        """A read whose rows are needed later: executors that batch statements send it with the next round trip
        (this one runs it now)."""
        deferred = DeferredRows(self)
        deferred.fill(await self.fetchall(sql, params))
        return deferred

    async def send_pending(self) -> None:  # noqa: B027 - optional hook
        """Send what is queued (nothing to do for executors that do not queue)."""


class SqlStatements:
    """A transaction's executor and dialect, with the read helpers its operations share."""

    def __init__(self, db: SqlExecutor, dialect: SqlDialect, *, write: bool) -> None:
        self.db = db
        self.dialect = dialect
        self.write = write

    # --------------------------------------------------------------------------------------------------- helpers
    async def _fetch_in(self, sql: str, column: str, values: Sequence[Any], params: Sequence[Any] = ()) -> list[Row]:
        """Run `sql` whose `{in}` marker is replaced by `column IN values`; long lists are split."""
        if not values:
            return []
        dialect = self.dialect
        step = dialect.max_inline_values or len(values)
        rows: list[Row] = []
        for start in range(0, len(values), step):
            clause, clause_params = dialect.in_list(column, values[start : start + step])
            rows.extend(await self.db.fetchall(sql.replace("{in}", clause), [*clause_params, *params]))
        return rows

    async def _fetch_keys(
        self, select: str, table: str, columns: Sequence[str], keys: Sequence[Sequence[Any]]
    ) -> list[Row]:
        """Rows of `table` (aliased `t`) whose `columns` match one of `keys`, in chunks of 250 keys."""
        rows: list[Row] = []
        for start in range(0, len(keys), 250):
            sql, params = self.dialect.select_by_keys(select, table, columns, keys[start : start + 250])
            rows.extend(await self.db.fetchall(sql, params))
        return rows

    async def _page(
        self,
        table: str,
        query: Query,
        *,
        scope: Sequence[tuple[str, Sequence[Any]]] = (),
        default_sort: str = ORDER_COLUMN,
    ) -> tuple[list[Row], int]:
        compiled = compile_query(query, self.dialect, scope=scope, default_sort=default_sort)
        rows = await self.db.fetchall(
            f"SELECT data FROM {table} WHERE {compiled.where} ORDER BY {compiled.order_by}{compiled.window}",
            [*compiled.params, *compiled.window_params],
        )
        total = total_from_page(query, len(rows))
        if total is None:
            counted = await self.db.fetchall(f"SELECT COUNT(*) FROM {table} WHERE {compiled.where}", compiled.params)
            total = int(counted[0][0])
        return rows, total
