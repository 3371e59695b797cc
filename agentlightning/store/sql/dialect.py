"""SQL differences between the SQLite and PostgreSQL backends, and the translation of a `Query` to SQL.

Statements are written with `?` placeholders; each executor converts them to its driver's style. Column names in
generated SQL always come from the validated field lists in `query.py`, never from user input.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentlightning.store.core.query import Query

#: The insertion-order column every table has; it breaks sort ties so that equal values keep creation order.
ORDER_COLUMN = "seq"


@dataclass(frozen=True)
class SqlDialect:
    """What differs between the SQL engines the store supports."""

    name: str
    #: SQL function returning the larger of two values.
    greatest: str
    #: Appended to reads in write transactions that must lock the rows they return ("" when the whole database is
    #: locked by the transaction anyway).
    lock_rows: str
    #: Appended to reads that lock rows but may pass over rows another transaction holds.
    lock_rows_skip_locked: str
    #: Lists longer than this are passed as one parameter instead of one placeholder each.
    max_inline_values: int

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """`column` is one of `values` (None members are not matched; callers add `IS NULL` themselves)."""
        if not values:
            return "1 = 0", []
        if self.name == "postgresql":
            return f"{column} = ANY(?)", [list(values)]
        if len(values) <= self.max_inline_values:
            return f"{column} IN ({', '.join('?' * len(values))})", list(values)
        return f"{column} IN (SELECT value FROM json_each(?))", [json.dumps(list(values))]

    def select_by_keys(
        self, select: str, table: str, columns: Sequence[str], keys: Sequence[Sequence[Any]]
    ) -> tuple[str, list[Any]]:
        """`SELECT {select} FROM {table} t` restricted to the rows whose `columns` equal one of `keys` (one index
        probe per key; `select` refers to the table as `t`)."""
        names = [f"k{index}" for index in range(len(columns))]
        on = " AND ".join(f"t.{column} = k.{name}" for column, name in zip(columns, names, strict=True))
        if self.name == "postgresql":
            arrays = ", ".join("?::text[]" for _ in columns)
            params: list[Any] = [[key[index] for key in keys] for index in range(len(columns))]
            sql = f"SELECT {select} FROM unnest({arrays}) AS k({', '.join(names)}) JOIN {table} t ON {on}"
            return sql, params
        row = "(" + ", ".join("?" * len(columns)) + ")"
        values = ", ".join([row] * len(keys))
        sql = f"WITH k({', '.join(names)}) AS (VALUES {values}) SELECT {select} FROM k CROSS JOIN {table} t ON {on}"
        return sql, [value for key in keys for value in key]

    def contains(self, column: str) -> str:
        """`column` contains the parameter as a substring (case-sensitive, no wildcard characters)."""
        if self.name == "postgresql":
            return f"strpos({column}, ?) > 0"
        return f"instr({column}, ?) > 0"

    def order_term(self, column: str, descending: bool) -> str:
        """None sorts first ascending and last descending (SQLite's natural order for NULL)."""
        if self.name == "postgresql":
            return f"{column} DESC NULLS LAST" if descending else f"{column} ASC NULLS FIRST"
        return f"{column} DESC" if descending else f"{column} ASC"

    def window(self, limit: int, offset: int) -> tuple[str, list[Any]]:
        if limit == -1:
            if not offset:
                return "", []
            return (" LIMIT -1 OFFSET ?", [offset]) if self.name == "sqlite" else (" OFFSET ?", [offset])
        return " LIMIT ? OFFSET ?", [limit, offset]


SQLITE = SqlDialect(name="sqlite", greatest="max", lock_rows="", lock_rows_skip_locked="", max_inline_values=500)
POSTGRESQL = SqlDialect(
    name="postgresql",
    greatest="GREATEST",
    lock_rows=" FOR UPDATE",
    lock_rows_skip_locked=" FOR UPDATE SKIP LOCKED",
    max_inline_values=0,
)


@dataclass(frozen=True)
class CompiledQuery:
    """WHERE (without the keyword), ORDER BY and LIMIT clauses of a query, with their parameters."""

    where: str
    params: list[Any]
    order_by: str
    window: str
    window_params: list[Any]


def compile_query(
    query: Query,
    dialect: SqlDialect,
    *,
    scope: Sequence[tuple[str, Sequence[Any]]] = (),
    default_sort: str = ORDER_COLUMN,
) -> CompiledQuery:
    """Translate `query`; `scope` conditions (SQL, params) always apply, whatever the query's filter logic."""
    clauses: list[str] = []
    params: list[Any] = []
    for condition in query.conditions:
        column = condition.field
        if condition.op == "exact":
            clauses.append(f"{column} = ?")
            params.append(condition.value)
        elif condition.op == "contains":
            clauses.append(dialect.contains(column))
            params.append(condition.value)
        else:
            members = [value for value in condition.value if value is not None]
            sql, values = dialect.in_list(column, members)
            if None in condition.value:
                sql = f"({column} IS NULL OR {sql})"
            clauses.append(sql)
            params.extend(values)
    where_parts: list[str] = []
    where_params: list[Any] = []
    for sql, values in scope:
        where_parts.append(sql)
        where_params.extend(values)
    if clauses:
        joiner = " AND " if query.logic == "and" else " OR "
        where_parts.append("(" + joiner.join(clauses) + ")")
        where_params.extend(params)
    sort_by = query.sort_by or default_sort
    descending = query.sort_order == "desc" and query.sort_by is not None
    order_by = dialect.order_term(sort_by, descending)
    if sort_by != ORDER_COLUMN:
        order_by += f", {ORDER_COLUMN} ASC"
    window, window_params = dialect.window(query.limit, query.offset)
    return CompiledQuery(
        where=" AND ".join(where_parts) if where_parts else "1 = 1",
        params=where_params,
        order_by=order_by,
        window=window,
        window_params=window_params,
    )


def total_from_page(query: Query, returned: int) -> int | None:
    """The number of matches when the page itself proves it (None when a COUNT query is needed)."""
    if query.limit != -1 and returned >= query.limit:
        return None
    if returned == 0 and query.offset > 0:
        return None
    return query.offset + returned
