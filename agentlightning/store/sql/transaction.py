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

from collections.abc import Iterable, Sequence
from typing import Optional

from agentlightning.store.base import FINISHED_STATUSES, RUNNING_STATUSES
from agentlightning.store.core.lifecycle import has_health_rules
from agentlightning.store.core.query import Query
from agentlightning.store.core.storage import StorageTransaction
from agentlightning.store.sql.codec import decode_model, encode_model
from agentlightning.store.sql.dialect import SqlDialect
from agentlightning.store.sql.rows import (
    ATTEMPT_UPDATABLE,
    HEALTH_SCAN_BATCH,
    INSERT_ATTEMPT,
    INSERT_ROLLOUT,
    QUEUED_STATUSES,
    ROLLOUT_UPDATABLE,
    UPSERT_WORKER,
    Row,
    attempt_values,
    changed_fields,
    group_updates,
    rollout_health_deadline,
    rollout_row,
    worker_row,
)
from agentlightning.store.sql.spans import SqlSpanOperations
from agentlightning.store.sql.statements import LATEST_ATTEMPT_JOIN, DeferredRows, SqlExecutor
from agentlightning.types import Attempt, ResourcesUpdate, Rollout, Worker

__all__ = ["LATEST_ATTEMPT_JOIN", "SqlExecutor", "SqlTransaction"]

_LATEST_RESOURCES_ID = "SELECT resources_id FROM resources ORDER BY latest_seq DESC LIMIT 1"


class SqlTransaction(SqlSpanOperations, StorageTransaction):
    """The StorageTransaction operations in portable SQL. Backends override the few dialect-specific steps."""

    #: SQL expression giving the next "latest" rank of a resources snapshot.
    next_resources_rank_sql = "(SELECT COALESCE(MAX(latest_seq), 0) + 1 FROM resources)"

    def __init__(self, db: SqlExecutor, dialect: SqlDialect, *, write: bool) -> None:
        super().__init__(db, dialect, write=write)
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
        self._prefetched: Optional[tuple[set[str], DeferredRows]] = None
        self._latest_resources_read: Optional[DeferredRows] = None
        #: Workers locked and read ahead (`prefetch_workers_of`): the locked ids, and their rows.
        self.prefetched_workers: Optional[tuple[DeferredRows, DeferredRows]] = None
        self._prefetch_decoded: Optional[tuple[dict[str, Rollout], dict[str, Attempt]]] = None

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

    def _rollouts_and_latest_sql(self) -> str:
        lock = self.dialect.lock_rows + " OF r" if self.write and self.dialect.lock_rows else ""
        return (
            f"SELECT r.rollout_id, r.health_deadline, r.data, a.data FROM rollouts r {LATEST_ATTEMPT_JOIN} "
            f"WHERE r.{{in}} ORDER BY r.rollout_id{lock}"
        )

    async def prefetch_rollouts_and_latest(self, rollout_ids: Sequence[str]) -> None:
        ids = sorted(set(rollout_ids))
        if not ids or self.dialect.max_inline_values:  # one statement only where any list fits in one (PostgreSQL)
            return
        clause, params = self.dialect.in_list("rollout_id", ids)
        deferred = await self.db.defer(self._rollouts_and_latest_sql().replace("{in}", clause), params)
        self._prefetched = (set(ids), deferred)

    async def get_rollouts_and_latest(
        self, rollout_ids: Sequence[str]
    ) -> tuple[dict[str, Rollout], dict[str, Attempt]]:
        """Both in one read: each rollout row joined with its latest attempt (locking the rollout rows only)."""
        ids = sorted(set(rollout_ids))
        prefetched = self._prefetched
        if prefetched is not None and prefetched[0].issuperset(ids):
            # Read with an earlier round trip; the rows stay locked by this transaction, and what it changed since is
            # in its `Changes`, which the operations consult first.
            if self._prefetch_decoded is None:
                self._prefetch_decoded = self._decode_rollouts_and_latest(await prefetched[1].rows())
            rollouts_all, latest_all = self._prefetch_decoded
            rollouts = {rollout_id: rollouts_all[rollout_id] for rollout_id in ids if rollout_id in rollouts_all}
            latest = {rollout_id: latest_all[rollout_id] for rollout_id in ids if rollout_id in latest_all}
            return rollouts, latest
        rows = await self._fetch_in(self._rollouts_and_latest_sql(), "rollout_id", ids)
        return self._decode_rollouts_and_latest(rows)

    def _decode_rollouts_and_latest(self, rows: Sequence[Row]) -> tuple[dict[str, Rollout], dict[str, Attempt]]:
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

    # ---------------------------------------------------------------------------------------------------- resources
    async def get_resources(self, resources_id: str) -> Optional[ResourcesUpdate]:
        if self.write:
            await self.lock_keys("resources", [resources_id])
        rows = await self.db.fetchall("SELECT data FROM resources WHERE resources_id = ?", (resources_id,))
        return decode_model(ResourcesUpdate, rows[0][0]) if rows else None

    async def get_latest_resources_id(self) -> Optional[str]:
        deferred, self._latest_resources_read = self._latest_resources_read, None
        rows = await deferred.rows() if deferred is not None else await self.db.fetchall(_LATEST_RESOURCES_ID)
        return rows[0][0] if rows else None

    async def prefetch_latest_resources_id(self) -> None:
        self._latest_resources_read = await self.db.defer(_LATEST_RESOURCES_ID)

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
        prefetched = self.prefetched_workers
        if prefetched is not None:
            locked_read, rows_read = prefetched
            locked = {row[0] for row in await locked_read.rows()}
            if locked.issuperset(ids):
                # Locked and read with an earlier round trip; what this transaction changed since is in known_workers.
                self.prefetched_workers = None
                for worker_id, data in await rows_read.rows():
                    self.known_workers.setdefault(worker_id, decode_model(Worker, data))
                return {
                    worker_id: self.known_workers[worker_id] for worker_id in ids if worker_id in self.known_workers
                }
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
