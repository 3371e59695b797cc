"""Attempt and span operations of `CoreLightningStore`: attempt updates with status propagation, span ingest."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Optional, Union, cast

from agentlightning.store.base import (
    UNSET,
    Unset,
)
from agentlightning.store.core.grouping import Outcome
from agentlightning.store.core.lifecycle import record_heartbeat, rollout_status_after_span
from agentlightning.store.core.query import (
    ATTEMPT_FIELDS,
    SPAN_FIELDS,
    build_query,
)
from agentlightning.store.core.records import owned_copy, page_of, span_floors
from agentlightning.store.core.shared import GroupedWrites
from agentlightning.store.core.storage import Changes, StorageTransaction
from agentlightning.store.core.validation import (
    check_attempt_status,
    check_id,
    check_metadata,
    check_optional_id,
    check_span,
    check_span_ids,
    check_span_sequence_id,
    check_timestamp,
)
from agentlightning.store.errors import (
    AttemptNotFoundError,
    InvalidArgumentTypeError,
    NoAttemptsError,
    RolloutNotFoundError,
)
from agentlightning.types import (
    Attempt,
    Rollout,
    Span,
)

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan


class AttemptAndSpanOperations(GroupedWrites):
    """Query and update attempts; ingest spans (heartbeats, status promotion); span queries."""

    # ----------------------------------------------------------------------------------------------------- attempts
    async def query_attempts(
        self,
        rollout_id: str,
        *,
        sort_by: Optional[str] = "sequence_id",
        sort_order: Literal["asc", "desc"] = "asc",
        limit: int = -1,
        offset: int = 0,
    ) -> Sequence[Attempt]:
        rollout_id = check_id(rollout_id, "rollout_id")
        query = build_query(
            "attempts", ATTEMPT_FIELDS, sort_by=sort_by, sort_order=sort_order, limit=limit, offset=offset
        )
        await self._scan_health()
        async with self._storage.transaction(write=False) as tx:
            attempts, total = await tx.query_attempts(rollout_id, query)
        return page_of([owned_copy(attempt) for attempt in attempts], total, query)

    async def get_latest_attempt(self, rollout_id: str) -> Optional[Attempt]:
        rollout_id = check_id(rollout_id, "rollout_id")
        await self._scan_health()
        async with self._storage.transaction(write=False) as tx:
            attempt = (await tx.get_latest_attempts([rollout_id])).get(rollout_id)
        return owned_copy(attempt) if attempt is not None else None

    async def update_attempt(
        self,
        rollout_id: str,
        attempt_id: Union[str, Literal["latest"]],
        status: Union[str, Unset] = UNSET,
        worker_id: Union[str, Unset] = UNSET,
        last_heartbeat_time: Union[float, Unset] = UNSET,
        metadata: Union[Optional[dict[str, Any]], Unset] = UNSET,
    ) -> Attempt:
        rollout_id = check_id(rollout_id, "rollout_id")
        attempt_id = check_id(attempt_id, "attempt_id")
        if not isinstance(status, Unset):
            check_attempt_status(status)
        if not isinstance(worker_id, Unset) and worker_id is not None and not isinstance(worker_id, str):
            raise InvalidArgumentTypeError(f"worker_id must be a string, got {worker_id!r}")
        heartbeat = (
            None
            if isinstance(last_heartbeat_time, Unset)
            else check_timestamp(last_heartbeat_time, "last_heartbeat_time")
        )
        new_metadata = None if isinstance(metadata, Unset) else check_metadata(metadata)
        await self._scan_health()
        update = AttemptUpdate(
            rollout_id, attempt_id, status, worker_id, heartbeat, not isinstance(metadata, Unset), new_metadata
        )
        return cast(Attempt, await self._write("update", update))

    async def _updates_in(
        self, tx: StorageTransaction, changes: Changes, updates: list[AttemptUpdate]
    ) -> list[Outcome[Attempt]]:
        """Apply updates in order, as if one ran after the other: each outcome is the attempt as its update left it,
        or the not-found error of that update alone (which then changes nothing)."""
        outcomes: list[Outcome[Attempt]] = []
        rollout_ids = list(dict.fromkeys(update.rollout_id for update in updates))
        rollouts, latest = await tx.get_rollouts_and_latest(rollout_ids)
        latest.update(changes.new_latest_attempts())  # attempts created earlier in this transaction
        older = list(
            dict.fromkeys(
                (update.rollout_id, update.attempt_id)
                for update in updates
                if update.rollout_id in latest
                and update.attempt_id not in ("latest", latest[update.rollout_id].attempt_id)
            )
        )
        attempts = await tx.get_attempts(older) if older else {}
        for update in updates:
            stored_rollout = rollouts.get(update.rollout_id)
            if stored_rollout is None:
                outcomes.append(RolloutNotFoundError(update.rollout_id))
                continue
            latest_attempt = latest.get(update.rollout_id)
            if latest_attempt is None:
                outcomes.append(NoAttemptsError(update.rollout_id))
                continue
            if update.attempt_id in ("latest", latest_attempt.attempt_id):
                stored_attempt = latest_attempt
            else:
                found = attempts.get((update.rollout_id, update.attempt_id))
                if found is None:
                    outcomes.append(AttemptNotFoundError(update.rollout_id, update.attempt_id))
                    continue
                stored_attempt = found
            attempt = _apply_update(changes, update, stored_rollout, stored_attempt, latest_attempt)
            outcomes.append(owned_copy(attempt))
        return outcomes

    # -------------------------------------------------------------------------------------------------------- spans
    async def add_span(self, span: Span) -> Optional[Span]:
        added = await self._ingest_spans([check_span(span)])
        return added[0] if added else None

    async def add_many_spans(self, spans: Sequence[Span]) -> Sequence[Span]:
        if isinstance(spans, (str, bytes)) or not isinstance(spans, Sequence):
            raise InvalidArgumentTypeError(f"spans must be a list of Span, got {type(spans).__name__}")
        return await self._ingest_spans([check_span(span) for span in spans])

    async def add_otel_span(
        self,
        rollout_id: str,
        attempt_id: str,
        readable_span: ReadableSpan,
        sequence_id: Optional[int] = None,
    ) -> Optional[Span]:
        rollout_id = check_id(rollout_id, "rollout_id")
        attempt_id = check_id(attempt_id, "attempt_id")
        if sequence_id is None:
            sequence_id = await self.get_next_span_sequence_id(rollout_id, attempt_id)
        else:
            sequence_id = check_span_sequence_id(sequence_id)
        span = Span.from_opentelemetry(
            readable_span, rollout_id=rollout_id, attempt_id=attempt_id, sequence_id=sequence_id
        )
        return await self.add_span(span)

    async def _ingest_spans(self, spans: list[Span]) -> list[Span]:
        """Validate the whole batch, then store it (grouped with concurrent calls where the storage groups)."""
        for span in spans:
            check_span_ids(span)
        if not spans:
            return []
        return cast(list[Span], await self._write("spans", spans))

    async def _spans_in(
        self, tx: StorageTransaction, changes: Changes, groups: list[list[Span]]
    ) -> list[Outcome[list[Span]]]:
        """Store the new spans of each call, record heartbeats and promote statuses. Each call gets the spans of its
        own batch that were new; the first occurrence of a key wins, as if the calls had run one after the other.
        An unknown rollout or attempt fails them all (the group then runs call by call)."""
        spans = [span for batch in groups for span in batch]
        rollout_ids = list(dict.fromkeys(span.rollout_id for span in spans))
        keys = list(dict.fromkeys((span.rollout_id, span.attempt_id) for span in spans))
        # The rollouts are locked: their latest attempts cannot change until the commit.
        rollouts, latest = await tx.get_rollouts_and_latest(rollout_ids)
        latest.update(changes.new_latest_attempts())
        for rollout_id in rollout_ids:
            if rollout_id not in rollouts:
                raise RolloutNotFoundError(rollout_id)
        attempts: dict[tuple[str, str], Attempt] = {}
        older: list[tuple[str, str]] = []
        for key in keys:
            latest_attempt = latest.get(key[0])
            if latest_attempt is not None and latest_attempt.attempt_id == key[1]:
                attempts[key] = latest_attempt
            else:
                older.append(key)
        if older:
            attempts.update(await tx.get_attempts(older))
        for key in keys:
            if key not in attempts:
                raise AttemptNotFoundError(*key)
        floors = span_floors(spans)
        if floors:
            await tx.raise_span_sequence_floor(floors)
        inserted = await tx.insert_spans(spans)
        for key in dict.fromkeys((span.rollout_id, span.attempt_id) for span in inserted):
            attempt = changes.attempt(attempts[key])
            if record_heartbeat(attempt, changes.now):
                changes.sync_worker(attempt)
            latest_attempt = latest.get(key[0])
            if latest_attempt is not None and latest_attempt.attempt_id == key[1]:
                rollout = changes.rollout(rollouts[key[0]])
                promoted = rollout_status_after_span(rollout)
                if promoted is not None:
                    changes.set_rollout_status(rollout, promoted)
        if len(groups) == 1:
            return [inserted]
        new = {id(span) for span in inserted}
        outcomes: list[Outcome[list[Span]]] = []
        for batch in groups:
            mine = []
            for span in batch:
                if id(span) in new:
                    new.discard(id(span))  # an object given twice was new the first time only
                    mine.append(span)
            outcomes.append(mine)
        return outcomes

    async def get_next_span_sequence_id(self, rollout_id: str, attempt_id: str) -> int:
        return (await self.get_many_span_sequence_ids([(rollout_id, attempt_id)]))[0]

    async def get_many_span_sequence_ids(self, rollout_attempt_ids: Sequence[tuple[str, str]]) -> Sequence[int]:
        pairs = [(check_id(pair[0], "rollout_id"), check_id(pair[1], "attempt_id")) for pair in rollout_attempt_ids]
        if not pairs:
            return []
        rollout_ids = [rollout_id for rollout_id, _ in pairs]
        async with self._storage.transaction() as tx:
            known = await tx.get_rollouts(list(dict.fromkeys(rollout_ids)))
            for rollout_id in rollout_ids:
                if rollout_id not in known:
                    raise RolloutNotFoundError(rollout_id)
            return await tx.next_span_sequence_ids(rollout_ids)

    async def query_spans(
        self,
        rollout_id: str,
        attempt_id: Union[str, Literal["latest"], None] = None,
        *,
        trace_id: Optional[str] = None,
        trace_id_contains: Optional[str] = None,
        span_id: Optional[str] = None,
        span_id_contains: Optional[str] = None,
        parent_id: Optional[str] = None,
        parent_id_contains: Optional[str] = None,
        name: Optional[str] = None,
        name_contains: Optional[str] = None,
        filter_logic: Literal["and", "or"] = "and",
        limit: int = -1,
        offset: int = 0,
        sort_by: Optional[str] = "sequence_id",
        sort_order: Literal["asc", "desc"] = "asc",
    ) -> Sequence[Span]:
        rollout_id = check_id(rollout_id, "rollout_id")
        attempt_id = check_optional_id(attempt_id, "attempt_id")
        exact = {"trace_id": trace_id, "span_id": span_id, "parent_id": parent_id, "name": name}
        for field, value in exact.items():
            if value is not None:
                check_id(value, field)
        query = build_query(
            "spans",
            SPAN_FIELDS,
            exact=exact,
            contains={
                "trace_id": trace_id_contains,
                "span_id": span_id_contains,
                "parent_id": parent_id_contains,
                "name": name_contains,
            },
            filter_logic=filter_logic,
            sort_by=sort_by,
            sort_order=sort_order,
            limit=limit,
            offset=offset,
        )
        await self._scan_health()
        async with self._storage.transaction(write=False) as tx:
            if attempt_id == "latest":
                latest = (await tx.get_latest_attempts([rollout_id])).get(rollout_id)
                if latest is None:
                    return page_of([], 0, query)
                attempt_id = latest.attempt_id
            spans, total = await tx.query_spans(rollout_id, attempt_id, query)
        return page_of(spans, total, query)


class AttemptUpdate(NamedTuple):
    """One validated `update_attempt` call."""

    rollout_id: str
    attempt_id: str
    status: Union[str, Unset]
    worker_id: Union[str, Unset, None]
    heartbeat: Optional[float]
    sets_metadata: bool
    metadata: Optional[dict[str, Any]]


def _apply_update(
    changes: Changes, update: AttemptUpdate, stored_rollout: Rollout, stored_attempt: Attempt, latest: Attempt
) -> Attempt:
    """Apply one update to the (copied) attempt and let its rollout and worker follow."""
    is_latest = stored_attempt.attempt_id == latest.attempt_id
    rollout = changes.rollout(stored_rollout)
    attempt = changes.attempt(stored_attempt)
    worker_id = update.worker_id
    if not isinstance(worker_id, Unset) and worker_id != attempt.worker_id:
        if attempt.worker_id:
            changes.release_worker_of(attempt.worker_id, attempt)
        attempt.worker_id = worker_id
        changes.sync_worker(attempt)
    if update.heartbeat is not None:
        attempt.last_heartbeat_time = update.heartbeat
    if update.sets_metadata:
        attempt.metadata = update.metadata
    if not isinstance(update.status, Unset):
        changes.set_attempt_status(rollout, attempt, update.status, is_latest=is_latest)
    elif update.heartbeat is not None and attempt.status == "preparing":
        # An explicit heartbeat shows the attempt is alive: it is running.
        changes.set_attempt_status(rollout, attempt, "running", is_latest=is_latest)
    return attempt
