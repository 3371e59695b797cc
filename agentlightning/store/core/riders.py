"""Writes that ride along with the next write transaction of the calling task.

The HTTP server records each write request's idempotency key in the database. Written in a transaction of its own,
the record costs as much as the request's operation; given as a `Rider`, it is written inside the operation's own
transaction instead, at no extra round trip, and commits (or rolls back) with it. A rider is written once: the
first write transaction of the task that commits takes it. `GroupedCall` carries a caller's riders into the group
that runs its call.

A rider may also record the outcome of its call in the same transaction (`settle`): the grouped writes of
`core/writes.py` hand each call's outcome to its riders before the commit, and the storage writes the statements they
return with it. The HTTP server stores an enqueue's answer this way, so a process killed at any moment leaves either
nothing or the rollout together with its answer (a retry then replays the answer instead of enqueuing again).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Optional

from agentlightning.store.errors import StoreError

#: A statement (`?` placeholders) and its parameters.
Statement = tuple[str, Sequence[Any]]


@dataclass(eq=False)
class Rider:
    """One statement (`?` placeholders) for the next write transaction; `committed` once a transaction with it
    committed. `conflict_table`: a unique-key violation on this table means this rider's row exists already.
    `settle`: given the outcome of the call (its result, or the exception it raises), the statement that records it
    in the same transaction, or None; `settlement` holds that statement while the transaction runs and after it
    committed (None when the call's outcome was not recorded)."""

    sql: str
    params: Sequence[Any]
    conflict_table: str
    settle: Optional[Callable[[Any], Optional[Statement]]] = None
    committed: bool = field(default=False, init=False)
    settlement: Optional[Statement] = field(default=None, init=False)

    def record_outcome(self, outcome: Any) -> None:
        """Keep the statement that records `outcome` for the transaction running the call (see `settle`)."""
        if self.settle is not None:
            self.settlement = self.settle(outcome)


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
