"""`PostgresTransaction`: the SQL transaction with PostgreSQL's own statements (advisory locks, array inserts,
SKIP LOCKED claims)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agentlightning.store.sql.dialect import POSTGRESQL
from agentlightning.store.sql.rows import SPAN_COLUMNS, Row, SpanKey, span_row
from agentlightning.store.sql.statements import DeferredRows
from agentlightning.store.sql.transaction import LATEST_ATTEMPT_JOIN, SqlExecutor, SqlTransaction
from agentlightning.types import Span

_SPAN_COLUMN_TYPES = ("text", "text", "bigint", "text", "text", "text", "text", "float8", "float8", "text")
_INSERT_SPANS = (
    f"WITH inserted AS (INSERT INTO spans ({', '.join(SPAN_COLUMNS)}) SELECT * FROM unnest("
    + ", ".join(f"?::{kind}[]" for kind in _SPAN_COLUMN_TYPES)
    + f") AS s({', '.join(SPAN_COLUMNS)}) WHERE NOT EXISTS (SELECT 1 FROM span_counters c "
    "WHERE c.rollout_id = s.rollout_id AND c.evicted = 1) "  # retention removed those rollouts' spans
    "ON CONFLICT (rollout_id, span_id, attempt_id) DO NOTHING "
    "RETURNING rollout_id, attempt_id, span_id, octet_length(data) AS size), "
    "counted AS (INSERT INTO span_counters (rollout_id, span_count, span_bytes) "
    "SELECT rollout_id, COUNT(*), SUM(size) FROM inserted GROUP BY rollout_id ORDER BY rollout_id "
    "ON CONFLICT (rollout_id) DO UPDATE SET span_count = span_counters.span_count + excluded.span_count, "
    "span_bytes = span_counters.span_bytes + excluded.span_bytes) "
    "SELECT rollout_id, attempt_id, span_id FROM inserted"
)
_RAISE_FLOORS = (
    "INSERT INTO span_counters (rollout_id, next_value) SELECT * FROM unnest(?::text[], ?::bigint[]) "
    "ON CONFLICT (rollout_id) DO UPDATE SET next_value = GREATEST(span_counters.next_value, excluded.next_value) "
    "RETURNING rollout_id, evicted"
)


class PostgresTransaction(SqlTransaction):
    next_resources_rank_sql = "nextval('resources_latest_seq')"

    def __init__(self, db: SqlExecutor, *, write: bool, lock_namespace: str) -> None:
        super().__init__(db, POSTGRESQL, write=write)
        self.lock_namespace = lock_namespace
        self.evicted_flags: dict[str, bool] = {}
        self.floor_reads: list[DeferredRows] = []
        self.scanned = False

    async def lock_keys(self, kind: str, keys: Sequence[str]) -> None:  # type: ignore[override]
        for key in sorted(set(keys)):
            await self.db.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", (f"{self.lock_namespace}:{kind}:{key}",)
            )

    async def raise_span_sequence_floor(self, floors: Mapping[str, int]) -> None:
        """One statement that also learns which rollouts' spans retention removed (used by `evicted_among`), sent
        with the next round trip (the span insert's)."""
        ids = sorted(floors)
        self.floor_reads.append(await self.db.defer(_RAISE_FLOORS, [ids, [floors[rollout_id] for rollout_id in ids]]))

    async def evicted_among(self, rollout_ids: Sequence[str]) -> set[str]:
        await self._take_floor_reads()
        flags = self.evicted_flags
        if all(rollout_id in flags for rollout_id in rollout_ids):
            return {rollout_id for rollout_id in rollout_ids if flags[rollout_id]}
        return await super().evicted_among(rollout_ids)

    async def _take_floor_reads(self) -> None:
        reads, self.floor_reads = self.floor_reads, []
        for read in reads:
            self.evicted_flags.update({rollout_id: bool(evicted) for rollout_id, evicted in await read.rows()})

    async def insert_spans(self, spans: Sequence[Span]) -> list[Span]:
        """One round trip: the statement skips the spans of rollouts whose spans retention removed (which still
        count as accepted heartbeats) and keys stored before."""
        unique: dict[SpanKey, Span] = {}
        for span in spans:
            unique.setdefault((span.rollout_id, span.attempt_id, span.span_id), span)
        if not unique:
            return []
        accepted = await self.store_new_spans([span_row(span) for span in unique.values()])
        evicted = await self.evicted_among(sorted({key[0] for key in unique}))
        return [span for key, span in unique.items() if key in accepted or key[0] in evicted]

    async def store_new_spans(self, rows: Sequence[Row]) -> set[SpanKey]:
        """Insert, skip known keys and update the counters in one statement over column arrays."""
        columns = [list(column) for column in zip(*rows, strict=True)]
        inserted = await self.db.fetchall(_INSERT_SPANS, columns)
        self.spans_inserted += len(inserted)
        return {(rollout_id, attempt_id, span_id) for rollout_id, attempt_id, span_id in inserted}

    async def claim_queued(self, limit: int) -> list:  # type: ignore[override]
        claimed = []
        while len(claimed) < limit:
            rows = await self.db.fetchall(
                "SELECT q.seq, r.rollout_id, r.health_deadline, r.data, r.status, a.data FROM rollout_queue q "
                f"JOIN rollouts r ON r.rollout_id = q.rollout_id {LATEST_ATTEMPT_JOIN} ORDER BY q.seq LIMIT ? "
                "FOR UPDATE OF q, r SKIP LOCKED",
                (limit - len(claimed),),
            )
            if not rows:
                break
            await self.db.execute("DELETE FROM rollout_queue WHERE seq = ANY(?)", ([row[0] for row in rows],))
            claimed.extend(self.claimed_rows(rows))
        return claimed

    async def health_candidates(self, now: float) -> list:  # type: ignore[override]
        self.scanned = True
        return await super().health_candidates(now)
