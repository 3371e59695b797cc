"""The SQL backends' tables as statements and rows: each entity's columns (its filterable fields, then its full JSON
in `data`), the INSERT/UPSERT/UPDATE statements, and the conversion of models to rows."""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Any, Optional

from agentlightning.store.base import RUNNING_STATUSES
from agentlightning.store.core.lifecycle import has_health_rules, health_deadline
from agentlightning.store.core.query import ATTEMPT_FIELDS, ROLLOUT_FIELDS, SPAN_FIELDS, WORKER_FIELDS
from agentlightning.store.sql.codec import encode_model
from agentlightning.types import Attempt, Rollout, Span, Worker

__all__ = [
    "ATTEMPT_UPDATABLE",
    "HEALTH_SCAN_BATCH",
    "INSERT_ATTEMPT",
    "INSERT_ROLLOUT",
    "INSERT_SPAN",
    "QUEUED_STATUSES",
    "ROLLOUT_UPDATABLE",
    "UPSERT_WORKER",
    "Row",
    "SpanKey",
    "attempt_values",
    "changed_fields",
    "group_updates",
    "rollout_health_deadline",
    "rollout_row",
    "span_row",
    "worker_row",
]

Row = tuple[Any, ...]
SpanKey = tuple[str, str, str]

# Columns: the filterable fields (`query.py`), then the full JSON. Row builders follow the same order.
ROLLOUT_COLUMNS = (*ROLLOUT_FIELDS, "health_deadline", "data")
ATTEMPT_COLUMNS = (*ATTEMPT_FIELDS, "data")
SPAN_COLUMNS = (*SPAN_FIELDS, "data")
WORKER_COLUMNS = (*WORKER_FIELDS, "data")

QUEUED_STATUSES = ("queuing", "requeuing")

#: How many unhealthy rollouts one health scan handles (the next scan picks up the rest).
HEALTH_SCAN_BATCH = 1000


def _insert_sql(table: str, columns: Sequence[str]) -> str:
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"


def _upsert_sql(table: str, columns: Sequence[str], key: str) -> str:
    updates = ", ".join(f"{column} = excluded.{column}" for column in columns if column != key)
    return f"{_insert_sql(table, columns)} ON CONFLICT ({key}) DO UPDATE SET {updates}"


def _update_sql(table: str, columns: Sequence[str], keys: Sequence[str]) -> str:
    assignments = ", ".join(f"{column} = ?" for column in columns)
    return f"UPDATE {table} SET {assignments} WHERE {' AND '.join(f'{key} = ?' for key in keys)}"


INSERT_ROLLOUT = _insert_sql("rollouts", ROLLOUT_COLUMNS)
INSERT_ATTEMPT = _insert_sql("attempts", ATTEMPT_COLUMNS)
#: The indexed columns an update may change (the keys never change); `data` is always rewritten with them.
ROLLOUT_UPDATABLE = ROLLOUT_FIELDS[1:]
ATTEMPT_UPDATABLE = ATTEMPT_FIELDS[2:]


def changed_fields(fields: Sequence[str], new: Any, old: Any) -> tuple[str, ...]:
    """The indexed fields whose value differs between two versions of an entity (all of them when `old` is None)."""
    if old is None:
        return tuple(fields)
    return tuple(name for name in fields if getattr(new, name) != getattr(old, name))


def group_updates(
    table: str, keys: Sequence[str], updates: Sequence[tuple[tuple[str, ...], Row]]
) -> dict[str, list[Row]]:
    """UPDATE statements (setting the changed columns and `data`) with their rows, one statement per column set."""
    grouped: dict[str, list[Row]] = {}
    for columns, row in updates:
        grouped.setdefault(_update_sql(table, (*columns, "data"), keys), []).append(row)
    return grouped


INSERT_SPAN = _insert_sql("spans", SPAN_COLUMNS)
UPSERT_WORKER = _upsert_sql("workers", WORKER_COLUMNS, "worker_id")


def rollout_health_deadline(rollout: Rollout, latest: Optional[Attempt]) -> Optional[float]:
    """When the health rules may next fire for `rollout` (None: not running, no rules or no attempt)."""
    if latest is None or rollout.status not in RUNNING_STATUSES or not has_health_rules(rollout.config):
        return None
    return health_deadline(latest, rollout.config)


_rollout_fields = attrgetter(*ROLLOUT_FIELDS)
_attempt_fields = attrgetter(*ATTEMPT_FIELDS[2:])
_span_fields = attrgetter(*SPAN_FIELDS)
_worker_fields = attrgetter(*WORKER_FIELDS)


def rollout_row(rollout: Rollout, deadline: Optional[float]) -> Row:
    """The values of ROLLOUT_COLUMNS."""
    return (*_rollout_fields(rollout), deadline, encode_model(rollout, "rollout"))


def span_row(span: Span) -> Row:
    """The values of SPAN_COLUMNS."""
    return (*_span_fields(span), encode_model(span, "span"))


def attempt_values(attempt: Attempt) -> Row:
    """The values of ATTEMPT_COLUMNS after the two key columns."""
    return (*_attempt_fields(attempt), encode_model(attempt, "attempt"))


def worker_row(worker: Worker) -> Row:
    """The values of WORKER_COLUMNS."""
    return (*_worker_fields(worker), encode_model(worker, "worker"))
