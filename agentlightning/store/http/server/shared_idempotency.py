"""Idempotency records kept in the store's own database (SQLite, PostgreSQL).

Several server processes (`agl store --workers N`, or several servers on one PostgreSQL schema) share one table, so
a retry that reaches another process than the first try replays the stored answer instead of applying the write
again. A request's record is written inside the transaction of its operation (a rider: see `core/grouping.py`), so
it costs no transaction of its own and exists exactly when the operation committed. The answer of an enqueue is
written in that transaction too (the rider settles it: see `core/grouping.py`), so a server killed at any moment
leaves no rollout and no record, or both with the answer, which a retry after a restart replays. The answers of the
other writes are written behind the response, with those of the other requests of the last few milliseconds in one
transaction (a retry that comes first finds the record in flight and waits for it; one whose server died first
waits `in_flight_seconds` and then runs the request again). When the key is in use already, the rider fails the operation
before it writes anything, and the request takes the slow path (`begin`): replay the stored answer, or wait for it
while the record is in flight. A record in flight for longer than
`in_flight_seconds` belongs to a process that died: the retry takes it over and runs the request. Answers expire
`ttl_seconds` after they were given.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Optional

from agentlightning.store.core.grouping import Rider, Statement
from agentlightning.store.errors import StoreUnavailableError
from agentlightning.store.http.server.idempotency import CachedResponse, IdempotencyConflict
from agentlightning.store.sql.statements import multi_row

__all__ = ["SharedIdempotencyRecords", "shared_records_for"]

logger = logging.getLogger(__name__)

_WAIT_MIN = 0.005
_WAIT_MAX = 0.2
_IN_FLIGHT = "INSERT INTO idempotency (key, fingerprint, status, body, created) VALUES (?, ?, NULL, NULL, ?)"
# Also stores the answer of a request whose record did not commit with an operation (one that wrote nothing).
_ANSWER = (
    "INSERT INTO idempotency (key, fingerprint, status, body, created) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (key) DO UPDATE SET status = excluded.status, body = excluded.body, created = excluded.created"
)


def shared_records_for(store: Any, *, ttl_seconds: float) -> Optional[SharedIdempotencyRecords]:
    """Shared records for a store whose data lives in a database other processes use; else None."""
    from agentlightning.store.sql.storage import SqlStorage

    storage = getattr(store, "_storage", None)
    if isinstance(storage, SqlStorage) and storage.shared_across_processes:
        return SharedIdempotencyRecords(storage, ttl_seconds=ttl_seconds)
    return None


class SharedIdempotencyRecords:
    """The `IdempotencyCache` interface over the `idempotency` table of an SQL storage."""

    def __init__(
        self,
        storage: Any,
        *,
        ttl_seconds: float = 600.0,
        in_flight_seconds: float = 120.0,
        expire_every_seconds: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if ttl_seconds <= 0 or in_flight_seconds <= 0:
            raise ValueError("the idempotency record lifetimes must be positive")
        self._storage = storage
        self.ttl_seconds = ttl_seconds
        self.in_flight_seconds = in_flight_seconds
        self._expire_every = expire_every_seconds
        self._clock = clock
        self._last_expiry = float("-inf")
        self._answers = AnswerWriter(storage)
        self._mine: dict[str, float] = {}
        """The in-flight records `begin` wrote and nobody answered yet: key -> their `created`."""
        self._unforgotten: dict[str, float] = {}
        """Records `forget` could not remove (the database was down): removed at the next call that works."""

    async def count(self) -> int:
        async with self._storage.sql_transaction(write=False) as tx:
            rows = await tx.db.fetchall("SELECT COUNT(*) FROM idempotency")
        return int(rows[0][0])

    async def rider(
        self,
        key: str,
        fingerprint: tuple[str, str, str],
        answer: Optional[Callable[[Any], Optional[CachedResponse]]] = None,
    ) -> Rider:
        """The in-flight record of a request, to write with its operation; the operation fails with `RiderConflict`
        (writing nothing) when the key is in use, and the request then goes through `begin`. `answer`: the answer to
        a given outcome of the operation's write (None: not known there), stored in the write's own transaction
        (`settled_answer` then returns it)."""
        await self._upkeep()
        mark = "\n".join(fingerprint)
        settle = None if answer is None else self._settler(key, mark, answer)
        return Rider(_IN_FLIGHT, (key, mark, self._clock()), conflict_table="idempotency", settle=settle)

    def _settler(
        self, key: str, mark: str, answer: Callable[[Any], Optional[CachedResponse]]
    ) -> Callable[[Any], Optional[Statement]]:
        """The `Rider.settle` that stores the answer to an outcome of the key's operation."""

        def settle(outcome: Any) -> Optional[Statement]:
            response = answer(outcome)
            if response is None:
                return None
            return _ANSWER, (key, mark, response.status, response.body, self._clock())

        return settle

    @staticmethod
    def settled_answer(rider: Rider) -> Optional[CachedResponse]:
        """The answer committed with the rider's operation (see `rider`), if any: it needs no `complete`."""
        if not rider.committed or rider.settlement is None:
            return None
        params = rider.settlement[1]
        return CachedResponse(int(params[2]), bytes(params[3]))

    async def begin(self, key: str, fingerprint: tuple[str, str, str]) -> Optional[CachedResponse]:
        """The stored answer for a repeated key (waiting while another process runs it), or None when this request
        must run; then `complete` or `forget` must follow."""
        await self._upkeep()
        mark = "\n".join(fingerprint)
        delay = _WAIT_MIN
        while True:
            now = self._clock()
            # The commit of a fresh record need not wait for the disk: it matters only once the request's own write
            # commits, and that durable commit flushes the log up to itself, this record included (a crash before it
            # loses both, and a retry then runs the request).
            inserted = await self._storage.run_statement(
                _IN_FLIGHT + " ON CONFLICT (key) DO NOTHING RETURNING key", (key, mark, now), durable=False
            )
            if inserted:
                self._mine[key] = now
                return None
            async with self._storage.sql_transaction(write=True) as tx:
                # The key is known (a retry, or another process inserted it first): read its record.
                rows = await tx.db.fetchall(
                    "SELECT fingerprint, status, body, created FROM idempotency WHERE key = ?", (key,)
                )
                if not rows:
                    continue
                stored_mark, status, body, created = rows[0]
                if stored_mark != mark:
                    method_path = stored_mark.split("\n")[:2]
                    raise IdempotencyConflict(
                        f"Idempotency-Key {key!r} was already used for a different request ({' '.join(method_path)})"
                    )
                if status is not None:
                    return CachedResponse(int(status), bytes(body or b""))
                if now - float(created) > self.in_flight_seconds:
                    logger.warning("Idempotency-Key %r was in flight for %.0f s; running it again", key, now - created)
                    await tx.db.execute("UPDATE idempotency SET created = ? WHERE key = ?", (now, key))
                    self._mine[key] = now
                    return None
            await asyncio.sleep(delay)  # another process runs the request: wait for its answer
            delay = min(delay * 2, _WAIT_MAX)

    async def complete(
        self, key: str, response: CachedResponse, fingerprint: tuple[str, str, str] = ("", "", "")
    ) -> None:
        """Store the answer (with the record itself, for a request whose operation wrote nothing), soon: see
        `AnswerWriter`."""
        self._mine.pop(key, None)
        self._answers.add((key, "\n".join(fingerprint), response.status, response.body, self._clock()))

    async def flush(self) -> None:
        """Write the answers given so far now."""
        await self._answers.flush()

    async def forget(self, key: str) -> None:
        """Remove the in-flight record `begin` wrote for `key` (a retry then runs the request). Never raises: while
        the database is down the removal waits for the next call that works (a retry meanwhile waits for it)."""
        created = self._mine.pop(key, None)
        if created is not None:
            await self._forget(key, created)

    async def forget_rider(self, rider: Rider) -> None:
        """`forget` for the record of a rider that committed with its operation."""
        if rider.committed:
            await self._forget(str(rider.params[0]), float(rider.params[2]))

    async def _forget(self, key: str, created: float) -> None:
        try:
            await self._remove_in_flight(key, created)
        except Exception as exc:
            logger.debug("Cannot remove the idempotency record of %r yet: %s", key, exc)
            self._unforgotten[key] = created

    async def _remove_in_flight(self, key: str, created: float) -> None:
        # Only the record this process wrote: a retry may have taken the key over since.
        await self._storage.run_statement(
            "DELETE FROM idempotency WHERE key = ? AND status IS NULL AND created = ?", (key, created)
        )

    async def _upkeep(self) -> None:
        """Remove the records `forget` left behind and expire old answers: best effort, as the request itself will
        meet (and answer) a database that is down."""
        try:
            while self._unforgotten:
                key, created = next(iter(self._unforgotten.items()))
                await self._remove_in_flight(key, created)
                self._unforgotten.pop(key, None)
            await self._expire()
        except Exception as exc:
            logger.debug("Idempotency record upkeep failed: %s", exc)

    async def _expire(self) -> None:
        now = self._clock()
        if now - self._last_expiry < self._expire_every:
            return
        self._last_expiry = now
        async with self._storage.sql_transaction(write=True) as tx:
            await tx.db.execute(
                "DELETE FROM idempotency WHERE created < ?", (now - max(self.ttl_seconds, self.in_flight_seconds),)
            )


_Answer = tuple[str, str, int, bytes, float]


class AnswerWriter:
    """Writes answers behind the responses: those given within `linger_seconds` go in one transaction.

    A write that fails is retried (with a warning) until it succeeds or the event loop ends; when the loop ends, what
    is left is written first. At most `max_pending` answers wait: beyond that the oldest are dropped, with a warning
    (their requests then look in flight to a retry, which waits and then runs them again)."""

    def __init__(self, storage: Any, *, linger_seconds: float = 0.01, max_pending: int = 100_000) -> None:
        self._storage = storage
        self.linger_seconds = linger_seconds
        self.max_pending = max_pending
        self._pending: list[_Answer] = []
        self._task: Optional[asyncio.Task[None]] = None
        self.batches_written = 0

    def add(self, answer: _Answer) -> None:
        self._pending.append(answer)
        if len(self._pending) > self.max_pending:
            dropped = len(self._pending) - self.max_pending
            del self._pending[:dropped]
            logger.warning("Dropped %d idempotency answers that could not be written", dropped)
        task = self._task
        if task is None or task.done() or task.get_loop() is not asyncio.get_running_loop():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                await self._write(batch)
            except BaseException:
                self._pending[:0] = batch
                raise

    async def _run(self) -> None:
        delay = _WAIT_MAX
        try:
            while self._pending:
                await asyncio.sleep(self.linger_seconds)
                try:
                    await self.flush()
                    delay = _WAIT_MAX
                except Exception as exc:
                    # A database that is down or full is logged once by the storage (`OutageLog`).
                    level = logging.DEBUG if isinstance(exc, StoreUnavailableError) else logging.WARNING
                    logger.log(level, "Cannot write %d idempotency answers yet: %s", len(self._pending), exc)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)
        except asyncio.CancelledError:
            if self._pending:  # the loop is ending: write what is left first
                try:
                    await self.flush()
                except Exception as exc:
                    logger.warning("Lost %d idempotency answers at shutdown: %s", len(self._pending), exc)
            raise

    async def _write(self, answers: list[_Answer]) -> None:
        latest = list({answer[0]: answer for answer in answers}.values())  # one row per key: the last answer
        async with self._storage.sql_transaction(write=True) as tx:
            for start in range(0, len(latest), 200):
                await tx.db.execute(*multi_row(_ANSWER, latest[start : start + 200]))
        self.batches_written += 1
