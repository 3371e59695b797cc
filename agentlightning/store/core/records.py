"""Building the records the core returns: caller-owned copies of rollouts with their attempt, the next attempt of a
rollout, and result pages. Plain functions shared by the core's operation groups."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional, TypeVar

from agentlightning.store.core.ids import generate_attempt_id
from agentlightning.store.core.query import Query
from agentlightning.types import Attempt, AttemptedRollout, PaginatedResult, Rollout, Span

__all__ = ["attempted", "next_attempt", "page_of", "with_attempt"]

M = TypeVar("M")


def page_of(items: list[M], total: int, query: Query) -> PaginatedResult[M]:
    """One page of query results, with the query's limit and offset and the total count."""
    return PaginatedResult[Any].model_construct(items=items, limit=query.limit, offset=query.offset, total=total)  # type: ignore[return-value]


def with_attempt(rollout: Rollout, attempt: Optional[Attempt]) -> Rollout:
    """A caller-owned copy of the rollout, carrying its attempt when there is one."""
    if attempt is None:
        return rollout.model_copy()
    fields = dict(rollout.__dict__)
    fields["attempt"] = attempt.model_copy()
    return AttemptedRollout.model_construct(**fields)


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
