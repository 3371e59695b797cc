"""Validated query descriptions (filters, sort, pagination) shared by all store backends.

A `Query` is built and validated once at the API edge; SQL backends translate it to WHERE/ORDER BY/LIMIT clauses and
the in-memory backend evaluates it with `Query.apply`. Ordering rules every backend follows: None sorts before any
value (first when ascending, last when descending) and ties keep creation order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Literal, Optional, TypeVar

from agentlightning.store.core.validation import MAX_STORED_INTEGER
from agentlightning.store.errors import InvalidArgumentError, InvalidArgumentTypeError

T = TypeVar("T")

ConditionOp = Literal["exact", "within", "contains"]

# Fields that can be filtered and sorted on, per entity. Anything else is rejected with a clear error.
ROLLOUT_FIELDS: tuple[str, ...] = ("rollout_id", "status", "mode", "resources_id", "start_time", "end_time")
ATTEMPT_FIELDS: tuple[str, ...] = (
    "rollout_id",
    "attempt_id",
    "sequence_id",
    "status",
    "worker_id",
    "start_time",
    "end_time",
    "last_heartbeat_time",
)
SPAN_FIELDS: tuple[str, ...] = (
    "rollout_id",
    "attempt_id",
    "sequence_id",
    "trace_id",
    "span_id",
    "parent_id",
    "name",
    "start_time",
    "end_time",
)
RESOURCES_FIELDS: tuple[str, ...] = ("resources_id", "create_time", "update_time", "version")
WORKER_FIELDS: tuple[str, ...] = (
    "worker_id",
    "status",
    "last_heartbeat_time",
    "last_dequeue_time",
    "last_busy_time",
    "last_idle_time",
    "current_rollout_id",
    "current_attempt_id",
)


@dataclass(frozen=True)
class Condition:
    """One filter: `field` equals / is within / contains `value`."""

    field: str
    op: ConditionOp
    value: Any

    def matches(self, item: Any) -> bool:
        return self.compile()(item)

    def compile(self) -> Callable[[Any], bool]:
        """A fast predicate for in-memory evaluation."""
        get = attrgetter(self.field)
        value = self.value
        if self.op == "exact":
            return lambda item: get(item) == value
        if self.op == "within":
            return lambda item: get(item) in value
        return lambda item: isinstance(actual := get(item), str) and value in actual


@dataclass(frozen=True)
class Query:
    """Conditions combined with `logic`, then sorting and a page window (`limit=-1` means all)."""

    conditions: tuple[Condition, ...] = ()
    logic: Literal["and", "or"] = "and"
    sort_by: Optional[str] = None
    sort_order: Literal["asc", "desc"] = "asc"
    limit: int = -1
    offset: int = 0

    def matches(self, item: Any) -> bool:
        return self.predicate()(item)

    def predicate(self) -> Callable[[Any], bool]:
        predicates = [condition.compile() for condition in self.conditions]
        if not predicates:
            return lambda item: True
        if len(predicates) == 1:
            return predicates[0]
        if self.logic == "and":
            return lambda item: all(predicate(item) for predicate in predicates)
        return lambda item: any(predicate(item) for predicate in predicates)

    def window(self, items: list[T]) -> list[T]:
        if self.limit == -1:
            return items[self.offset :]
        return items[self.offset : self.offset + self.limit]

    def apply(self, items: Iterable[T]) -> tuple[list[T], int]:
        """Filter, sort and paginate `items` (given in creation order). Returns (page, total matches)."""
        if self.conditions:
            predicate = self.predicate()
            matched = [item for item in items if predicate(item)]
        else:
            matched = list(items)
        if self.sort_by is not None:
            matched.sort(key=sort_key(self.sort_by), reverse=self.sort_order == "desc")
        return self.window(matched), len(matched)


def sort_key(field: str) -> Callable[[Any], tuple[Any, ...]]:
    def key(item: Any) -> tuple[Any, ...]:
        value = getattr(item, field)
        return (0,) if value is None else (1, value)

    return key


def _check_str(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidArgumentTypeError(f"{name} must be a string, got {type(value).__name__}: {value!r}")
    return value


def build_query(
    entity: str,
    allowed_fields: Sequence[str],
    *,
    exact: Optional[dict[str, Any]] = None,
    within: Optional[dict[str, Optional[Sequence[Any]]]] = None,
    contains: Optional[dict[str, Optional[str]]] = None,
    filter_logic: Any = "and",
    sort_by: Any = None,
    sort_order: Any = "asc",
    limit: Any = -1,
    offset: Any = 0,
) -> Query:
    """Validate query arguments and build a Query. None operands are ignored; an empty `within` matches nothing."""
    if filter_logic not in ("and", "or"):
        raise InvalidArgumentError(f"Invalid filter_logic: {filter_logic!r}, expected 'and' or 'or'")
    if sort_order not in ("asc", "desc"):
        raise InvalidArgumentError(f"Invalid sort_order: {sort_order!r}, expected 'asc' or 'desc'")
    if sort_by is not None and sort_by not in allowed_fields:
        raise InvalidArgumentError(f"Invalid sort_by: {sort_by}, allowed fields are: {', '.join(allowed_fields)}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not -1 <= limit <= MAX_STORED_INTEGER:
        raise InvalidArgumentError(
            f"Invalid limit: {limit!r}, expected -1 (no limit) or an integer from 0 to {MAX_STORED_INTEGER}"
        )
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= MAX_STORED_INTEGER:
        raise InvalidArgumentError(f"Invalid offset: {offset!r}, expected an integer from 0 to {MAX_STORED_INTEGER}")
    conditions: list[Condition] = []
    for field, value in (exact or {}).items():
        if value is not None:
            conditions.append(Condition(field, "exact", value))
    for field, values in (within or {}).items():
        if values is None:
            continue
        if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
            raise InvalidArgumentTypeError(f"{field} filter of {entity} must be a list, got {values!r}")
        items = tuple(values)
        for item in items:
            if item is not None and not isinstance(item, (str, int, float)):
                raise InvalidArgumentTypeError(f"{field} filter of {entity} has an invalid member {item!r}")
        conditions.append(Condition(field, "within", frozenset(items)))
    for field, needle in (contains or {}).items():
        if needle is not None:
            conditions.append(Condition(field, "contains", _check_str(f"{field}_contains", needle)))
    return Query(
        conditions=tuple(conditions),
        logic=filter_logic,
        sort_by=sort_by,
        sort_order=sort_order,
        limit=limit,
        offset=offset,
    )
