"""Group commit, and the writes that ride along with it.

**Riders** (`Rider`): writes that ride along with the next write transaction of the calling task. The HTTP server
records each write request's idempotency key in the database. Written in a transaction of its own, the record costs
as much as the request's operation; given as a `Rider`, it is written inside the operation's own transaction instead,
at no extra round trip, and commits (or rolls back) with it. A rider is written once: the first write transaction of
the task that commits takes it. `GroupedCall` carries a caller's riders into the group that runs its call.

A rider may also record the outcome of its call in the same transaction (`settle`): the grouped writes of
`core/shared.py` hand each call's outcome to its riders before the commit, and the storage writes the statements they
return with it. The HTTP server stores an enqueue's answer this way, so a process killed at any moment leaves either
nothing or the rollout together with its answer (a retry then replays the answer instead of enqueuing again).

**Group commit** (`GroupedCall`): calls of one store operation that arrive together share one storage transaction.
A database transaction has a fixed cost (round trips, statement parsing, a commit that waits for the disk) that
dwarfs the work of one span or one claim. `GroupedCall` runs a call at once when nothing of its kind is in flight
(an idle store adds no latency); calls arriving while a group is in flight wait and then run together as the next
group, in arrival order. Under load the groups grow by themselves, so the per-call cost falls as the load rises.

The function that runs a group returns one outcome per call: the call's result, or the exception its caller gets.
It must give every call the result it would have had alone, run in arrival order (see the store operations that
use it in `core/rollouts.py` and `core/attempts.py`). When it raises an error that shows its transaction wrote
nothing (an unknown rollout, an invalid argument, a rider's key in use: `_RERUN_ALONE`), each call of the group runs
again alone, so only the faulty call fails; any other error (a lost connection, which may have hit the commit) goes
to every call of the group, as it would have to a single call. A caller's riders go with its call into the group's
transaction.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Generic, Optional, TypeVar, Union

from agentlightning.store.errors import StoreBusyError, StoreError

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


ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")

#: What a group returns for each of its calls: the result, or the exception to raise in that call.
Outcome = Union[ResultT, BaseException]

_Entry = tuple[ItemT, "asyncio.Future[ResultT]", tuple[Rider, ...]]

#: Errors raised before anything was written (validation, lookups, a busy lock, a rider's key in use).
_RERUN_ALONE = (ValueError, TypeError, LookupError, RiderConflict, StoreBusyError)
#: SQLSTATEs of a transaction the database rolled back whole: deadlock, serialization failure, lock not available.
_ROLLED_BACK_STATES = frozenset({"40P01", "40001", "55P03"})


def _wrote_nothing(exc: BaseException) -> bool:
    """Whether `exc` shows that the group's transaction wrote nothing, so its calls may run again one by one."""
    if isinstance(exc, _RERUN_ALONE):
        return True
    error: BaseException | None = exc
    for _ in range(5):  # the database error is the cause of the store's error
        if error is None:
            break
        if getattr(error, "sqlstate", None) in _ROLLED_BACK_STATES:
            return True
        error = error.__cause__
    return False


class _LoopState(Generic[ItemT, ResultT]):
    """The calls waiting and the groups running on one event loop."""

    def __init__(self) -> None:
        self.waiting: deque[_Entry[ItemT, ResultT]] = deque()
        self.running = 0
        self.tasks: set[asyncio.Task[None]] = set()


class GroupedCall(Generic[ItemT, ResultT]):
    """Run concurrent calls of one operation in groups (see the module docstring).

    Args:
        run_group: runs the items of one group, in order, returning one outcome per item.
        max_in_flight: groups that may run at the same time (per event loop).
        max_group: the most items in one group.
    """

    def __init__(
        self,
        run_group: Callable[[list[ItemT]], Awaitable[Sequence[Outcome[ResultT]]]],
        *,
        max_in_flight: int = 1,
        max_group: int = 64,
    ) -> None:
        if max_in_flight < 1 or max_group < 1:
            raise ValueError("max_in_flight and max_group must be at least 1")
        self._run_group = run_group
        self.max_in_flight = max_in_flight
        self.max_group = max_group
        self._states: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState[ItemT, ResultT]] = (
            weakref.WeakKeyDictionary()
        )
        self.groups_run = 0
        self.calls_run = 0

    async def __call__(self, item: ItemT) -> ResultT:
        loop = asyncio.get_running_loop()
        state = self._states.get(loop)
        if state is None:
            state = self._states[loop] = _LoopState()
        if state.running < self.max_in_flight and not state.waiting:
            state.running += 1
            try:
                outcomes = await self._run_alone(item)  # in the caller's own context, riders included
            finally:
                state.running -= 1
                self._start_waiting(loop, state)
            return unwrap(outcomes[0])
        future: asyncio.Future[ResultT] = loop.create_future()
        entry: _Entry[ItemT, ResultT] = (item, future, current_riders())
        state.waiting.append(entry)
        try:
            return await future
        finally:
            if not future.done():  # cancelled while waiting: it never joins a group
                try:
                    state.waiting.remove(entry)
                except ValueError:
                    pass

    async def _run(self, items: list[ItemT]) -> Sequence[Outcome[ResultT]]:
        outcomes = await self._run_group(items)
        if len(outcomes) != len(items):
            raise RuntimeError(f"a group of {len(items)} calls returned {len(outcomes)} outcomes")
        self.groups_run += 1
        self.calls_run += len(items)
        return outcomes

    async def _run_alone(self, item: ItemT) -> Sequence[Outcome[ResultT]]:
        try:
            return await self._run([item])
        except Exception as exc:
            return [exc]

    async def _run_entries(self, group: list[_Entry[ItemT, ResultT]]) -> Sequence[Outcome[ResultT]]:
        """Run a group with its callers' riders; if it fails as a whole, each call alone with its own."""
        if len(group) > 1:
            try:
                with riders_of([rider for _, _, riders in group for rider in riders]):
                    return await self._run([item for item, _, _ in group])
            except Exception as exc:
                if not _wrote_nothing(exc):
                    return [exc] * len(group)
        outcomes: list[Outcome[ResultT]] = []
        for item, _, riders in group:
            with riders_of(riders):
                outcomes.extend(await self._run_alone(item))
        return outcomes

    def _start_waiting(self, loop: asyncio.AbstractEventLoop, state: _LoopState[ItemT, ResultT]) -> None:
        while state.waiting and state.running < self.max_in_flight:
            group: list[_Entry[ItemT, ResultT]] = []
            while state.waiting and len(group) < self.max_group:
                entry = state.waiting.popleft()
                if not entry[1].done():
                    group.append(entry)
            if not group:
                continue
            state.running += 1
            task = loop.create_task(self._run_waiting(loop, state, group))
            state.tasks.add(task)
            task.add_done_callback(state.tasks.discard)

    async def _run_waiting(
        self,
        loop: asyncio.AbstractEventLoop,
        state: _LoopState[ItemT, ResultT],
        group: list[_Entry[ItemT, ResultT]],
    ) -> None:
        try:
            outcomes = await self._run_entries(group)
        except BaseException:  # cancelled: the loop is shutting down
            for _, future, _ in group:
                future.cancel()
            raise
        finally:
            state.running -= 1
            self._start_waiting(loop, state)
        for (_, future, _), outcome in zip(group, outcomes, strict=True):
            if future.done():  # its caller was cancelled meanwhile
                continue
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)


def unwrap(outcome: Outcome[ResultT]) -> ResultT:
    """The result, or raise the exception the outcome holds."""
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome
