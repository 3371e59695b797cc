"""Writes that ride along with the next write transaction of the calling task.

The HTTP server records each write request's idempotency key in the database. Written in a transaction of its own,
the record costs as much as the request's operation; given as a `Rider`, it is written inside the operation's own
transaction instead, at no extra round trip, and commits (or rolls back) with it. A rider is written once: the
first write transaction of the task that commits takes it. `GroupedCall` carries a caller's riders into the group
that runs its call.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from agentlightning.store.errors import StoreError


@dataclass(eq=False)
class Rider:
    """One statement (`?` placeholders) for the next write transaction; `committed` once a transaction with it
    committed. `conflict_table`: a unique-key violation on this table means this rider's row exists already."""

    sql: str
    params: Sequence[Any]
    conflict_table: str
    committed: bool = field(default=False, init=False)


class RiderConflict(StoreError):
    """A rider's row exists already (an idempotency key in use): the operation it rode with did not run."""

    def __init__(self, rider: Rider) -> None:
        super().__init__(f"A record for {rider.conflict_table} exists already")
        self.rider = rider


_RIDERS: ContextVar[tuple[Rider, ...]] = ContextVar("agentlightning_store_riders", default=())


@contextmanager
def riding(*riders: Rider) -> Iterator[None]:
    """Add riders to the write transactions this task starts inside the block."""
    token = _RIDERS.set(_RIDERS.get() + riders)
    try:
        yield
    finally:
        _RIDERS.reset(token)


@contextmanager
def riders_of(riders: Sequence[Rider]) -> Iterator[None]:
    """Run the block with exactly these riders (a group runs with the riders of its callers)."""
    token = _RIDERS.set(tuple(riders))
    try:
        yield
    finally:
        _RIDERS.reset(token)


def current_riders() -> tuple[Rider, ...]:
    """The riders of this task, committed or not."""
    return _RIDERS.get()


def pending_riders() -> list[Rider]:
    """The riders of this task that no transaction committed yet."""
    riders = _RIDERS.get()
    return [rider for rider in riders if not rider.committed] if riders else []


def conflicting_rider(exc: BaseException, riders: Sequence[Rider]) -> Rider | None:
    """The rider whose unique key `exc` (or an exception it was raised from) violated, if any.

    PostgreSQL reports the table of a unique violation (SQLSTATE 23505); SQLite names it in the message
    ("UNIQUE constraint failed: <table>.<column>")."""
    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        table = _violated_table(error)
        if table is not None:
            for rider in riders:
                if rider.conflict_table == table:
                    return rider
        error = error.__cause__ or error.__context__
    return None


def _violated_table(error: BaseException) -> str | None:
    diag = getattr(error, "diag", None)
    if diag is not None and getattr(error, "sqlstate", None) == "23505":
        return getattr(diag, "table_name", None)
    message = str(error)
    prefix = "UNIQUE constraint failed: "
    if type(error).__name__ == "IntegrityError" and message.startswith(prefix):
        return message[len(prefix) :].split(".", 1)[0]
    return None
