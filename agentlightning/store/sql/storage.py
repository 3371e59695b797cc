"""What the SQL storages (SQLite, PostgreSQL) share: transactions exposing the SQL operations, retention, figures."""

from __future__ import annotations

import logging
import time
from abc import abstractmethod
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Optional

from agentlightning.store.core.grouping import Rider, RiderConflict, Statement, conflicting_rider, pending_riders
from agentlightning.store.core.storage import Storage, StorageTransaction
from agentlightning.store.sql.outage import OutageLog
from agentlightning.store.sql.retention import RetentionPolicy, RetentionSchedule, apply_retention, span_totals
from agentlightning.store.sql.rows import Row
from agentlightning.store.sql.statements import multi_row
from agentlightning.store.sql.transaction import SqlTransaction

logger = logging.getLogger(__name__)


class SqlStorage(Storage):
    """A Storage whose transactions are `SqlTransaction`s, with a span retention policy."""

    groups_concurrent_writes = True

    def __init__(self, retention: Optional[RetentionPolicy], location: str) -> None:
        self.outage = OutageLog(location)
        self.retention = RetentionSchedule(retention)
        self.retention_runs = 0
        self.retention_evicted = 0

    @abstractmethod
    def sql_transaction(self, *, write: bool = True) -> AbstractAsyncContextManager[SqlTransaction]:
        """One database transaction, committed when the block exits normally."""

    def transaction(self, *, write: bool = True) -> AbstractAsyncContextManager[StorageTransaction]:
        if write:
            riders = pending_riders()
            if riders:
                return self._transaction_with_riders(riders)
        return self.sql_transaction(write=write)

    @asynccontextmanager
    async def _transaction_with_riders(self, riders: list[Rider]) -> AsyncIterator[StorageTransaction]:
        """A write transaction that also writes the caller's riders, and what they recorded of the outcomes of their
        calls before the commit (see `core/grouping.py`)."""
        try:
            async with self.sql_transaction(write=True) as tx:
                for rider in riders:
                    rider.settlement = None  # from an earlier try that did not commit
                await _execute_grouped(tx, [(rider.sql, rider.params) for rider in riders])
                yield tx
                await _execute_grouped(tx, [rider.settlement for rider in riders if rider.settlement is not None])
        except Exception as exc:
            conflict = conflicting_rider(exc, riders)
            if conflict is not None:
                raise RiderConflict(conflict) from exc
            raise
        for rider in riders:
            rider.committed = True

    @property
    def write_problem(self) -> Optional[Exception]:
        return self.outage.problem

    async def run_statement(self, sql: str, params: Sequence[Any] = (), *, durable: bool = True) -> list[Row]:
        """Run one statement (`?` placeholders) as a transaction of its own; returns its rows (empty if none).

        `durable=False` lets the commit return before the change reaches the disk where the backend waits for it
        (PostgreSQL): only for records that matter once a later durable commit exists, which flushes the log up
        to itself, this change included. A crash before such a commit may lose the change."""
        async with self.sql_transaction(write=True) as tx:
            return await tx.db.fetchall(sql, params)

    async def after_commit(self, tx: SqlTransaction) -> None:
        """Apply the retention policy when a committed write makes it due."""
        if tx.write and self.retention.record(tx.spans_inserted):
            await self.apply_retention()

    async def apply_retention(self, now: Optional[float] = None) -> list[str]:
        """Apply the retention policy now. Returns the rollouts whose spans were removed."""
        policy = self.retention.policy
        if policy is None or not policy.enabled:
            return []
        self.retention.started()
        try:
            async with self.sql_transaction(write=True) as tx:
                evicted = await apply_retention(tx, policy, time.time() if now is None else now)
        finally:
            self.retention.finished()
        self.retention_runs += 1
        self.retention_evicted += len(evicted)
        if evicted:
            logger.info("Span retention removed the spans of %d finished rollouts", len(evicted))
        return evicted

    async def statistics(self) -> dict[str, object]:
        async with self.sql_transaction(write=False) as tx:
            _, span_bytes = await span_totals(tx)
        return {
            "total_span_bytes": span_bytes,
            "retention_runs": self.retention_runs,
            "retention_evicted_rollouts": self.retention_evicted,
            **self.backend_statistics(),
        }

    def backend_statistics(self) -> dict[str, object]:
        """Extra figures of one backend."""
        return {}


async def _execute_grouped(tx: SqlTransaction, statements: Sequence[Statement]) -> None:
    """Run statements, those of one single-row INSERT template as one multi-row INSERT (the idempotency records of
    a group: one statement)."""
    by_sql: dict[str, list[Sequence[Any]]] = {}
    for sql, params in statements:
        by_sql.setdefault(sql, []).append(params)
    for sql, rows in by_sql.items():
        if len(rows) > 1 and "VALUES (" in sql:
            await tx.db.execute(*multi_row(sql, rows))
        else:
            for params in rows:
                await tx.db.execute(sql, params)
