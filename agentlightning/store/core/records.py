"""Building the records the core returns: caller-owned copies of rollouts with their attempt, the next attempt of a
rollout, and result pages. Plain functions shared by the core's operation groups."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional, TypeVar

from pydantic import BaseModel

from agentlightning.store.core.ids import generate_attempt_id
from agentlightning.store.core.query import Query
from agentlightning.types import Attempt, AttemptedRollout, PaginatedResult, Rollout, Span

__all__ = ["attempted", "next_attempt", "owned_copy", "page_of", "with_attempt"]

M = TypeVar("M")
ModelT = TypeVar("ModelT", bound=BaseModel)

_set_attribute = object.__setattr__


def owned_copy(model: ModelT) -> ModelT:
    """A shallow copy of `model`, the same as `model.model_copy()`, in about half the time.

    Snapshot reads (query_rollouts over a thousand rollouts, query_workers) copy every record they return, and on a
    store server that copying ran on the event loop that also answers heartbeats: it was half of the time the
    server spent on a snapshot, and the heartbeats queued behind it. pydantic's copy goes through `copy.copy` for
    each of the instance's four slots; the store's records only need their dicts and sets copied.
    """
    cls = type(model)
    copy = cls.__new__(cls)
    _set_attribute(copy, "__dict__", model.__dict__.copy())
    extra = model.__pydantic_extra__
    _set_attribute(copy, "__pydantic_extra__", None if extra is None else extra.copy())
    _set_attribute(copy, "__pydantic_fields_set__", model.__pydantic_fields_set__.copy())
    private = model.__pydantic_private__
    _set_attribute(copy, "__pydantic_private__", None if private is None else private.copy())
    return copy


def page_of(items: list[M], total: int, query: Query) -> PaginatedResult[M]:
    """One page of query results, with the query's limit and offset and the total count."""
    return PaginatedResult[Any].model_construct(items=items, limit=query.limit, offset=query.offset, total=total)  # type: ignore[return-value]


def with_attempt(rollout: Rollout, attempt: Optional[Attempt]) -> Rollout:
    """A caller-owned copy of the rollout, carrying its attempt when there is one."""
    if attempt is None:
        return owned_copy(rollout)
    fields = rollout.__dict__.copy()
    fields.pop("attempt", None)
    fields["attempt"] = owned_copy(attempt)
    # What `AttemptedRollout.model_construct(**fields)` builds (every field given, so every field set), without
    # its per-call walk over the model's fields.
    copy = AttemptedRollout.__new__(AttemptedRollout)
    _set_attribute(copy, "__dict__", fields)
    _set_attribute(copy, "__pydantic_extra__", None)
    _set_attribute(copy, "__pydantic_fields_set__", set(fields))
    _set_attribute(copy, "__pydantic_private__", None)
    return copy


def next_attempt(rollout_id: str, previous: Optional[Attempt], now: float, worker_id: Optional[str]) -> Attempt:
    """A new "preparing" attempt following `previous` (the first one when there is none)."""
    return Attempt(
        rollout_id=rollout_id,
        attempt_id=generate_attempt_id(),
        sequence_id=previous.sequence_id + 1 if previous is not None else 1,
        start_time=now,
        worker_id=worker_id,
    )


def attempted(rollout: Rollout, attempt: Attempt) -> AttemptedRollout:
    """A caller-owned copy of the rollout with `attempt` as its attempt."""
    return with_attempt(rollout, attempt)  # type: ignore[return-value]


def span_floors(spans: Sequence[Span]) -> dict[str, int]:
    """The highest sequence id of each rollout's spans (the floor of its next allocated sequence id)."""
    floors: dict[str, int] = {}
    for span in spans:
        if span.sequence_id > floors.get(span.rollout_id, 0):
            floors[span.rollout_id] = span.sequence_id
    return floors
