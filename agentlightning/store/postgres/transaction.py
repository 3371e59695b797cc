"""`PostgresTransaction`: the SQL transaction with PostgreSQL's own statements (advisory locks, array inserts,
SKIP LOCKED claims)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

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
# The workers of some rollouts' attempts plus named ones, each advisory-locked as `lock_keys` locks it (same key text,
# same order: "C" collation is code point order), then read.
_WORKER_SET = (
    "SELECT w FROM (SELECT unnest(?::text[]) AS w UNION SELECT worker_id FROM attempts "
    "WHERE rollout_id = ANY(?::text[]) AND worker_id IS NOT NULL) u"
)
_LOCK_WORKERS = (
    "SELECT w, pg_advisory_xact_lock(hashtextextended(? || w, 0)) IS NULL "
    f'FROM ({_WORKER_SET} ORDER BY w COLLATE "C") t'
)
_READ_WORKERS = f"SELECT worker_id, data FROM workers WHERE worker_id IN ({_WORKER_SET})"
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
        self.queued_floors: Optional[dict[str, int]] = None
        self.queued_spans: Optional[tuple[tuple[SpanKey, ...], Optional[DeferredRows]]] = None
        self.scanned = False

    async def lock_keys(self, kind: str, keys: Sequence[str]) -> None:  # type: ignore[override]
        for key in sorted(set(keys)):
            await self.db.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", (f"{self.lock_namespace}:{kind}:{key}",)
            )

    async def queue_span_insert(self, spans: Sequence[Span], floors: Mapping[str, int]) -> None:
        if floors:
            await self.raise_span_sequence_floor(floors)
            self.queued_floors = dict(floors)
        unique = _unique_spans(spans)
        rows = [span_row(span) for span in unique.values()]
        columns = [list(column) for column in zip(*rows, strict=True)]
        self.queued_spans = (tuple(unique), await self.db.defer(_INSERT_SPANS, columns) if rows else None)

    async def prefetch_workers_of(self, rollout_ids: Sequence[str], worker_ids: Sequence[str]) -> None:
        prefix = f"{self.lock_namespace}:worker:"
        sets = (sorted(set(worker_ids)), sorted(set(rollout_ids)))
        locked = await self.db.defer(_LOCK_WORKERS, (prefix, *sets))
        self.prefetched_workers = (locked, await self.db.defer(_READ_WORKERS, sets))

    async def raise_span_sequence_floor(self, floors: Mapping[str, int]) -> None:
        """One statement that also learns which rollouts' spans retention removed (used by `evicted_among`), sent
        with the next round trip (the span insert's)."""
        if self.queued_floors is not None and self.queued_floors == dict(floors):
            self.queued_floors = None  # sent already (`queue_span_insert`)
            return
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
        unique = _unique_spans(spans)
        if not unique:
            return []
        queued, self.queued_spans = self.queued_spans, None
        if queued is not None and queued[0] == tuple(unique):  # inserted with an earlier round trip
            inserted = await queued[1].rows() if queued[1] is not None else []
            self.spans_inserted += len(inserted)
            accepted = {(rollout_id, attempt_id, span_id) for rollout_id, attempt_id, span_id in inserted}
        else:
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
            wanted = limit - len(claimed)
            rows = await self.db.fetchall(
                "SELECT q.seq, r.rollout_id, r.health_deadline, r.data, r.status, a.data FROM rollout_queue q "
                f"JOIN rollouts r ON r.rollout_id = q.rollout_id {LATEST_ATTEMPT_JOIN} ORDER BY q.seq LIMIT ? "
                "FOR UPDATE OF q, r SKIP LOCKED",
                (wanted,),
            )
            if not rows:
                break
            await self.db.execute("DELETE FROM rollout_queue WHERE seq = ANY(?)", ([row[0] for row in rows],))
            claimed.extend(self.claimed_rows(rows))
            if len(rows) < wanted:  # nothing more to take now (another read would find nothing)
                break
        return claimed

    async def health_candidates(self, now: float) -> list:  # type: ignore[override]
        self.scanned = True
        return await super().health_candidates(now)


def _unique_spans(spans: Sequence[Span]) -> dict[SpanKey, Span]:
    """The first span of each key, in order."""
    unique: dict[SpanKey, Span] = {}
    for span in spans:
        unique.setdefault((span.rollout_id, span.attempt_id, span.span_id), span)
    return unique
