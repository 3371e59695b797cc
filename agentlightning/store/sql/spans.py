"""The span part of `SqlTransaction`: span rows, their per-rollout counters and sequence ids."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from agentlightning.store.core.query import Query
from agentlightning.store.errors import SpansEvictedError
from agentlightning.store.sql.codec import decode_model
from agentlightning.store.sql.rows import INSERT_SPAN, Row, SpanKey, span_row
from agentlightning.store.sql.statements import SqlStatements
from agentlightning.types import Span


class SqlSpanOperations(SqlStatements):
    """Insert and query spans; allocate sequence ids. `spans_inserted` counts the rows this transaction added."""

    spans_inserted: int

    async def insert_spans(self, spans: Sequence[Span]) -> list[Span]:
        unique: dict[SpanKey, Span] = {}
        for span in spans:
            unique.setdefault((span.rollout_id, span.attempt_id, span.span_id), span)
        if not unique:
            return []
        evicted = await self.evicted_among(sorted({key[0] for key in unique}))
        # Spans of rollouts whose trace retention removed are not stored but still count as heartbeats.
        accepted = {key for key in unique if key[0] in evicted}
        rows = [span_row(span) for key, span in unique.items() if key[0] not in evicted]
        if rows:
            accepted |= await self.store_new_spans(rows)
        # In the caller's order: the first occurrence of each key that was not stored before.
        inserted: list[Span] = []
        for key, span in unique.items():
            if key in accepted:
                inserted.append(span)
        return inserted

    async def evicted_among(self, rollout_ids: Sequence[str]) -> set[str]:
        """The rollouts among `rollout_ids` whose spans retention removed."""
        rows = await self._fetch_in(
            "SELECT rollout_id FROM span_counters WHERE {in} AND evicted = 1", "rollout_id", rollout_ids
        )
        return {row[0] for row in rows}

    async def store_new_spans(self, rows: Sequence[Row]) -> set[SpanKey]:
        """Insert the span rows whose key is not stored yet and count them; returns the keys inserted."""
        existing = await self._fetch_keys(
            "t.rollout_id, t.attempt_id, t.span_id",
            "spans",
            ("rollout_id", "attempt_id", "span_id"),
            [(row[0], row[1], row[4]) for row in rows],
        )
        known = set(existing)
        fresh = [row for row in rows if (row[0], row[1], row[4]) not in known]
        if not fresh:
            return set()
        await self.db.executemany(INSERT_SPAN, fresh)
        stats: dict[str, list[int]] = {}
        for row in fresh:
            counts = stats.setdefault(row[0], [0, 0])
            counts[0] += 1
            counts[1] += len(row[9].encode())
        await self.db.executemany(
            "INSERT INTO span_counters (rollout_id, span_count, span_bytes) VALUES (?, ?, ?) "
            "ON CONFLICT (rollout_id) DO UPDATE SET span_count = span_counters.span_count + excluded.span_count, "
            "span_bytes = span_counters.span_bytes + excluded.span_bytes",
            [(rollout_id, count, size) for rollout_id, (count, size) in sorted(stats.items())],
        )
        self.spans_inserted += len(fresh)
        return {(row[0], row[1], row[4]) for row in fresh}

    async def query_spans(self, rollout_id: str, attempt_id: Optional[str], query: Query) -> tuple[list[Span], int]:
        evicted = await self.db.fetchall("SELECT evicted FROM span_counters WHERE rollout_id = ?", (rollout_id,))
        if evicted and evicted[0][0]:
            raise SpansEvictedError(rollout_id)
        scope: list[tuple[str, Sequence[Any]]] = [("rollout_id = ?", [rollout_id])]
        if attempt_id is not None:
            scope.append(("attempt_id = ?", [attempt_id]))
        rows, total = await self._page("spans", query, scope=scope, default_sort="sequence_id")
        return [decode_model(Span, row[0]) for row in rows], total

    async def next_span_sequence_ids(self, rollout_ids: Sequence[str]) -> list[int]:
        counts = Counter(rollout_ids)
        await self.db.executemany(
            "INSERT INTO span_counters (rollout_id, next_value) VALUES (?, ?) ON CONFLICT (rollout_id) "
            "DO UPDATE SET next_value = span_counters.next_value + excluded.next_value",
            sorted(counts.items()),
        )
        rows = await self._fetch_in(
            "SELECT rollout_id, next_value FROM span_counters WHERE {in}", "rollout_id", sorted(counts)
        )
        cursor = {rollout_id: int(value) - counts[rollout_id] for rollout_id, value in rows}
        allocated: list[int] = []
        for rollout_id in rollout_ids:
            cursor[rollout_id] += 1
            allocated.append(cursor[rollout_id])
        return allocated

    async def raise_span_sequence_floor(self, floors: Mapping[str, int]) -> None:
        await self.db.executemany(
            "INSERT INTO span_counters (rollout_id, next_value) VALUES (?, ?) ON CONFLICT (rollout_id) "
            f"DO UPDATE SET next_value = {self.dialect.greatest}(span_counters.next_value, excluded.next_value)",
            sorted(floors.items()),
        )
