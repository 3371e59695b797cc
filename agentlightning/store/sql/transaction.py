"""The storage operations shared by the SQL backends (SQLite and PostgreSQL), over a small async executor.

Every entity is one row with indexed columns for the fields that can be filtered or sorted, plus its full JSON in
`data` (so pydantic extras and nested values survive). Rollouts also carry `health_deadline`: the earliest time a
health rule can fire for a running rollout with rules (NULL otherwise). It is recomputed for every rollout a
transaction touched just before commit (`finalize`), which keeps the health scan an indexed range query.

Locking (PostgreSQL; SQLite's write transactions lock the whole database): a write transaction locks the rollout rows
it reads, in id order, and touches attempts, queue entries and span counters only of rollouts it holds. Workers and
resources are locked by advisory locks taken last. Claims and health scans use SKIP LOCKED and never wait, so no
lock cycle can form.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional

from agentlightning.store.base import FINISHED_STATUSES, RUNNING_STATUSES
from agentlightning.store.core.lifecycle import has_health_rules
from agentlightning.store.core.query import Query
from agentlightning.store.core.storage import StorageTransaction
from agentlightning.store.errors import SpansEvictedError
from agentlightning.store.sql.codec import decode_model, encode_model
from agentlightning.store.sql.dialect import ORDER_COLUMN, SqlDialect, compile_query, total_from_page
from agentlightning.store.sql.rows import (
    ATTEMPT_UPDATABLE,
    HEALTH_SCAN_BATCH,
    INSERT_ATTEMPT,
    INSERT_ROLLOUT,
    INSERT_SPAN,
    QUEUED_STATUSES,
    ROLLOUT_UPDATABLE,
    UPSERT_WORKER,
    Row,
    SpanKey,
    attempt_values,
    changed_fields,
    group_updates,
    rollout_health_deadline,
    rollout_row,
    span_row,
    worker_row,
)
from agentlightning.types import Attempt, ResourcesUpdate, Rollout, Span, Worker

#: Joins each rollout `r` with its latest attempt `a` (NULLs when it has none).
LATEST_ATTEMPT_JOIN = (
    "LEFT JOIN attempts a ON a.rollout_id = r.rollout_id AND a.sequence_id = "
    "(SELECT MAX(b.sequence_id) FROM attempts b WHERE b.rollout_id = r.rollout_id)"
)


class SqlExecutor(ABC):
    """Runs statements (with `?` placeholders) inside the current transaction."""

    @abstractmethod
    async def execute(self, sql: str, params: Sequence[Any] = ()) -> None: ...

    @abstractmethod
    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...

    @abstractmethod
    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Row]: ...


class SqlTransaction(StorageTransaction):
    """The StorageTransaction operations in portable SQL. Backends override the few dialect-specific steps."""

    #: SQL expression giving the next "latest" rank of a resources snapshot.
    next_resources_rank_sql = "(SELECT COALESCE(MAX(latest_seq), 0) + 1 FROM resources)"

    def __init__(self, db: SqlExecutor, dialect: SqlDialect, *, write: bool) -> None:
        self.db = db
        self.dialect = dialect
        self.write = write
        # What this transaction knows, to recompute health deadlines at commit without extra reads.
        self.known_rollouts: dict[str, Rollout] = {}
        self.stored_deadlines: dict[str, Optional[float]] = {}
        self.known_latest: dict[str, Optional[Attempt]] = {}
        #: The stored version of each attempt read (or written) by this transaction: updates write only changes.
        self.known_attempts: dict[tuple[str, str], Attempt] = {}
        #: False for rollouts this transaction knows to have no queue entry.
        self.maybe_queued: dict[str, bool] = {}
        self.known_workers: dict[str, Worker] = {}
        self.touched: set[str] = set()
        #: Health deadlines written by this transaction (lets the storage schedule the next scan).
        self.new_deadlines: list[float] = []
        #: The new deadlines earlier than the rollout's previous one (the only ones other processes must learn).
        self.earlier_deadlines: list[float] = []
        #: Rollouts this transaction moved to a finished status.
        self.finished: list[str] = []
        self.spans_inserted = 0

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

    async def lock_keys(self, kind: str, keys: Iterable[str]) -> None:
        """Serialise writers of entities that may not exist yet (no-op where transactions lock everything)."""

    def _remember_rollout(self, rollout: Rollout, deadline: Optional[float], *, queued: Optional[bool] = None) -> None:
        self.known_rollouts[rollout.rollout_id] = rollout
        self.stored_deadlines[rollout.rollout_id] = deadline
        # Only queuing-like rollouts have queue entries (every other status removes them), and the rollout row is
        # locked by this (write) transaction: a rollout known not to be queued needs no removal from the queue.
        self.maybe_queued[rollout.rollout_id] = rollout.status in QUEUED_STATUSES if queued is None else queued

    def _decode_rollout_rows(self, rows: Iterable[Row], *, queued: Optional[bool] = None) -> dict[str, Rollout]:
        """Rows of (rollout_id, health_deadline, data)."""
        found: dict[str, Rollout] = {}
        for rollout_id, deadline, data in rows:
            rollout = decode_model(Rollout, data)
            self._remember_rollout(rollout, deadline, queued=queued)
            found[rollout_id] = rollout
        return found

    # --------------------------------------------------------------------------------------------- rollouts + queue
    async def insert_rollouts(self, rollouts: Sequence[Rollout], *, enqueue: bool) -> None:
        rows = [rollout_row(rollout, None) for rollout in rollouts]
        await self.db.executemany(INSERT_ROLLOUT, rows)
        for rollout in rollouts:
            self._remember_rollout(rollout, None)
            self.known_latest[rollout.rollout_id] = None
        if enqueue:
            await self.enqueue([rollout.rollout_id for rollout in rollouts])

    async def get_rollouts(self, rollout_ids: Sequence[str]) -> dict[str, Rollout]:
        ids = sorted(set(rollout_ids))
        lock = self.dialect.lock_rows if self.write else ""
        rows = await self._fetch_in(
            f"SELECT rollout_id, health_deadline, data FROM rollouts WHERE {{in}} ORDER BY rollout_id{lock}",
            "rollout_id",
            ids,
        )
        return self._decode_rollout_rows(rows)

    async def update_rollouts(self, rollouts: Sequence[Rollout]) -> None:
        """Write the rollouts that differ from the stored version this transaction read: only their changed
        indexed columns and the JSON (unchanged rollouts, e.g. of heartbeat-only attempt updates, are skipped)."""
        updates: list[tuple[tuple[str, ...], Row]] = []
        for rollout in rollouts:
            previous = self.known_rollouts.get(rollout.rollout_id)
            if previous is not None and previous == rollout:
                continue
            columns = changed_fields(ROLLOUT_UPDATABLE, rollout, previous)
            values = (*(getattr(rollout, name) for name in columns), encode_model(rollout, "rollout"))
            updates.append((columns, (*values, rollout.rollout_id)))
            if rollout.status in FINISHED_STATUSES and (previous is None or previous.status != rollout.status):
                self.finished.append(rollout.rollout_id)
            # A copy: the caller may change its object again before a later write in this transaction.
            self.known_rollouts[rollout.rollout_id] = rollout.model_copy()
            self.touched.add(rollout.rollout_id)
        for sql, rows in group_updates("rollouts", ("rollout_id",), updates).items():
            await self.db.executemany(sql, rows)

    async def query_rollouts(self, query: Query) -> tuple[list[Rollout], int]:
        rows, total = await self._page("rollouts", query)
        return [decode_model(Rollout, row[0]) for row in rows], total

    async def enqueue(self, rollout_ids: Sequence[str]) -> None:
        for rollout_id in rollout_ids:
            self.maybe_queued[rollout_id] = True
        await self.db.executemany(
            "INSERT INTO rollout_queue (rollout_id) VALUES (?) ON CONFLICT (rollout_id) DO NOTHING",
            [(rollout_id,) for rollout_id in dict.fromkeys(rollout_ids)],
        )

    async def remove_from_queue(self, rollout_ids: Sequence[str]) -> None:
        maybe_queued = self.maybe_queued
        rollout_ids = [rollout_id for rollout_id in rollout_ids if maybe_queued.get(rollout_id, True)]
        for start in range(0, len(rollout_ids), 500):
            clause, params = self.dialect.in_list("rollout_id", rollout_ids[start : start + 500])
            await self.db.execute(f"DELETE FROM rollout_queue WHERE {clause}", params)

    async def claim_queued(self, limit: int) -> list[Rollout]:
        """Pop from the queue head; correct where the transaction holds the database's write lock (SQLite)."""
        claimed: list[Rollout] = []
        while len(claimed) < limit:
            rows = await self.db.fetchall(
                "SELECT q.seq, r.rollout_id, r.health_deadline, r.data, r.status, a.data FROM rollout_queue q "
                f"LEFT JOIN rollouts r ON r.rollout_id = q.rollout_id {LATEST_ATTEMPT_JOIN} ORDER BY q.seq LIMIT ?",
                (limit - len(claimed),),
            )
            if not rows:
                break
            positions = [row[0] for row in rows]
            clause, params = self.dialect.in_list("seq", positions)
            await self.db.execute(f"DELETE FROM rollout_queue WHERE {clause}", params)
            claimed.extend(self.claimed_rows(rows))
        return claimed

    def claimed_rows(self, rows: Sequence[Row]) -> list[Rollout]:
        """Rows of (seq, rollout_id, health_deadline, data, status, latest attempt data): the rollouts still
        waiting in the queue, their latest attempts remembered."""
        eligible = [row for row in rows if row[4] in ("queuing", "requeuing")]
        for row in eligible:
            self.known_latest[row[1]] = decode_model(Attempt, row[5]) if row[5] is not None else None
        return list(self._decode_rollout_rows((row[1:4] for row in eligible), queued=False).values())

    # ----------------------------------------------------------------------------------------------------- attempts
    async def insert_attempts(self, attempts: Sequence[Attempt]) -> None:
        rows = []
        for attempt in attempts:
            rows.append((attempt.rollout_id, attempt.attempt_id, *attempt_values(attempt)))
            self._note_attempt(attempt, inserted=True)
        await self.db.executemany(INSERT_ATTEMPT, rows)

    async def update_attempts(self, attempts: Sequence[Attempt]) -> None:
        """Write the attempts that differ from the stored version this transaction read: only their changed indexed
        columns and the JSON."""
        updates: list[tuple[tuple[str, ...], Row]] = []
        for attempt in attempts:
            key = (attempt.rollout_id, attempt.attempt_id)
            previous = self.known_attempts.get(key)
            if previous is not None and previous == attempt:
                continue
            columns = changed_fields(ATTEMPT_UPDATABLE, attempt, previous)
            values = (*(getattr(attempt, name) for name in columns), encode_model(attempt, "attempt"))
            updates.append((columns, (*values, *key)))
            self.known_attempts[key] = attempt.model_copy()
            self._note_attempt(attempt, inserted=False)
        for sql, rows in group_updates("attempts", ("rollout_id", "attempt_id"), updates).items():
            await self.db.executemany(sql, rows)

    def _note_attempt(self, attempt: Attempt, *, inserted: bool) -> None:
        rollout_id = attempt.rollout_id
        self.touched.add(rollout_id)
        if rollout_id not in self.known_latest:
            return  # unknown: finalize reads the latest attempt
        latest = self.known_latest[rollout_id]
        if (inserted and (latest is None or attempt.sequence_id > latest.sequence_id)) or (
            latest is not None and latest.attempt_id == attempt.attempt_id
        ):
            self.known_latest[rollout_id] = attempt

    async def get_attempts(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Attempt]:
        rows = await self._fetch_keys(
            "t.rollout_id, t.attempt_id, t.data", "attempts", ("rollout_id", "attempt_id"), sorted(set(keys))
        )
        found = {(rollout_id, attempt_id): decode_model(Attempt, data) for rollout_id, attempt_id, data in rows}
        self.known_attempts.update(found)
        return found

    async def get_latest_attempts(self, rollout_ids: Sequence[str]) -> dict[str, Attempt]:
        ids = sorted(set(rollout_ids))
        known = self.known_latest
        if self.write and all(rollout_id in known for rollout_id in ids):
            # Read (or written) by this transaction, which holds the rollouts: nobody else added an attempt since.
            return {rollout_id: attempt for rollout_id in ids if (attempt := known[rollout_id]) is not None}
        rows = await self._fetch_in(
            "SELECT a.rollout_id, a.data FROM attempts a WHERE a.{in} AND a.sequence_id = "
            "(SELECT MAX(b.sequence_id) FROM attempts b WHERE b.rollout_id = a.rollout_id)",
            "rollout_id",
            ids,
        )
        found = {rollout_id: decode_model(Attempt, data) for rollout_id, data in rows}
        for rollout_id in ids:
            self.known_latest[rollout_id] = found.get(rollout_id)
        for attempt in found.values():
            self.known_attempts[(attempt.rollout_id, attempt.attempt_id)] = attempt
        return found

    async def get_rollouts_and_latest(
        self, rollout_ids: Sequence[str]
    ) -> tuple[dict[str, Rollout], dict[str, Attempt]]:
        """Both in one read: each rollout row joined with its latest attempt (locking the rollout rows only)."""
        ids = sorted(set(rollout_ids))
        lock = self.dialect.lock_rows + " OF r" if self.write and self.dialect.lock_rows else ""
        rows = await self._fetch_in(
            f"SELECT r.rollout_id, r.health_deadline, r.data, a.data FROM rollouts r {LATEST_ATTEMPT_JOIN} "
            f"WHERE r.{{in}} ORDER BY r.rollout_id{lock}",
            "rollout_id",
            ids,
        )
        rollouts = self._decode_rollout_rows(row[:3] for row in rows)
        latest: dict[str, Attempt] = {}
        for rollout_id, _, _, data in rows:
            attempt = decode_model(Attempt, data) if data is not None else None
            self.known_latest[rollout_id] = attempt
            if attempt is not None:
                latest[rollout_id] = attempt
                self.known_attempts[(rollout_id, attempt.attempt_id)] = attempt
        return rollouts, latest

    async def query_attempts(self, rollout_id: str, query: Query) -> tuple[list[Attempt], int]:
        rows, total = await self._page(
            "attempts", query, scope=[("rollout_id = ?", [rollout_id])], default_sort="sequence_id"
        )
        return [decode_model(Attempt, row[0]) for row in rows], total

    # -------------------------------------------------------------------------------------------------------- spans
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

    # ---------------------------------------------------------------------------------------------------- resources
    async def get_resources(self, resources_id: str) -> Optional[ResourcesUpdate]:
        if self.write:
            await self.lock_keys("resources", [resources_id])
        rows = await self.db.fetchall("SELECT data FROM resources WHERE resources_id = ?", (resources_id,))
        return decode_model(ResourcesUpdate, rows[0][0]) if rows else None

    async def get_latest_resources(self) -> Optional[ResourcesUpdate]:
        rows = await self.db.fetchall("SELECT data FROM resources ORDER BY latest_seq DESC LIMIT 1")
        return decode_model(ResourcesUpdate, rows[0][0]) if rows else None

    async def put_resources(self, update: ResourcesUpdate) -> None:
        await self.db.execute(
            "INSERT INTO resources (resources_id, create_time, update_time, version, latest_seq, data) "
            f"VALUES (?, ?, ?, ?, {self.next_resources_rank_sql}, ?) ON CONFLICT (resources_id) DO UPDATE SET "
            "create_time = excluded.create_time, update_time = excluded.update_time, version = excluded.version, "
            "latest_seq = excluded.latest_seq, data = excluded.data",
            (
                update.resources_id,
                update.create_time,
                update.update_time,
                update.version,
                encode_model(update, "resources"),
            ),
        )

    async def query_resources(self, query: Query) -> tuple[list[ResourcesUpdate], int]:
        rows, total = await self._page("resources", query)
        return [decode_model(ResourcesUpdate, row[0]) for row in rows], total

    # ------------------------------------------------------------------------------------------------------ workers
    async def get_workers(self, worker_ids: Sequence[str]) -> dict[str, Worker]:
        ids = sorted(set(worker_ids))
        if self.write:
            await self.lock_keys("worker", ids)
        rows = await self._fetch_in("SELECT worker_id, data FROM workers WHERE {in}", "worker_id", ids)
        found = {worker_id: decode_model(Worker, data) for worker_id, data in rows}
        self.known_workers.update(found)
        return found

    async def put_workers(self, workers: Sequence[Worker]) -> None:
        """Insert or replace the workers that differ from the stored version this transaction read."""
        changed = [worker for worker in workers if self.known_workers.get(worker.worker_id) != worker]
        for worker in changed:
            self.known_workers[worker.worker_id] = worker.model_copy()
        await self.db.executemany(UPSERT_WORKER, [worker_row(worker) for worker in changed])

    async def query_workers(self, query: Query) -> tuple[list[Worker], int]:
        rows, total = await self._page("workers", query)
        return [decode_model(Worker, row[0]) for row in rows], total

    # ------------------------------------------------------------------------------------------------------- health
    async def health_candidates(self, now: float) -> list[tuple[Rollout, Attempt]]:
        rows = await self.db.fetchall(
            "SELECT rollout_id FROM rollouts WHERE health_deadline IS NOT NULL AND health_deadline <= ? "
            f"ORDER BY health_deadline LIMIT ?{self.dialect.lock_rows_skip_locked}",
            (now, HEALTH_SCAN_BATCH),
        )
        ids = [row[0] for row in rows]
        if not ids:
            return []
        rollouts = await self.get_rollouts(ids)
        latest = await self.get_latest_attempts(ids)
        self.touched.update(ids)  # finalize repairs any stale deadline among them
        return [
            (rollouts[rollout_id], latest[rollout_id])
            for rollout_id in ids
            if rollout_id in rollouts and rollout_id in latest and rollouts[rollout_id].status in RUNNING_STATUSES
        ]

    async def count_entities(self) -> dict[str, int]:
        rows = await self.db.fetchall(
            "SELECT (SELECT COUNT(*) FROM rollouts), (SELECT COUNT(*) FROM attempts), "
            "(SELECT COALESCE(SUM(span_count), 0) FROM span_counters), (SELECT COUNT(*) FROM resources), "
            "(SELECT COUNT(*) FROM workers)"
        )
        rollouts, attempts, spans, resources, workers = (int(value) for value in rows[0])
        return {"rollouts": rollouts, "attempts": attempts, "spans": spans, "resources": resources, "workers": workers}

    # ----------------------------------------------------------------------------------------------------- finalize
    async def finalize(self) -> None:
        """Store the health deadline of every rollout this transaction touched (called just before commit)."""
        if not self.touched:
            return
        ids = sorted(self.touched)
        missing = [rollout_id for rollout_id in ids if rollout_id not in self.known_rollouts]
        if missing:
            await self.get_rollouts(missing)
        need_latest = [
            rollout_id
            for rollout_id in ids
            if rollout_id in self.known_rollouts
            and rollout_id not in self.known_latest
            and self.known_rollouts[rollout_id].status in RUNNING_STATUSES
            and has_health_rules(self.known_rollouts[rollout_id].config)
        ]
        if need_latest:
            await self.get_latest_attempts(need_latest)
        changes: list[tuple[Optional[float], str]] = []
        for rollout_id in ids:
            rollout = self.known_rollouts.get(rollout_id)
            if rollout is None:
                continue
            deadline = rollout_health_deadline(rollout, self.known_latest.get(rollout_id))
            if rollout_id in self.stored_deadlines and self.stored_deadlines[rollout_id] == deadline:
                continue
            changes.append((deadline, rollout_id))
            if deadline is not None:
                self.new_deadlines.append(deadline)
                previous = self.stored_deadlines.get(rollout_id)
                if previous is None or deadline < previous:
                    self.earlier_deadlines.append(deadline)
        if changes:
            await self.db.executemany("UPDATE rollouts SET health_deadline = ? WHERE rollout_id = ?", changes)
        self.touched.clear()
