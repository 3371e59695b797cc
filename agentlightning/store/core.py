"""`CoreLightningStore`: the LightningStore contract implemented once over a `Storage` backend.

The core validates arguments, runs the state machine (`lifecycle`), schedules health scans and wakes waiters.
Backends (memory, SQLite, PostgreSQL) subclass it and supply storage only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Optional, TypeVar, Union, cast

from agentlightning.types import (
    Attempt,
    AttemptedRollout,
    EnqueueRolloutRequest,
    NamedResources,
    PaginatedResult,
    ResourcesUpdate,
    Rollout,
    RolloutConfig,
    RolloutMode,
    Span,
    TaskInput,
    Worker,
)

from .base import (
    FINISHED_STATUSES,
    UNSET,
    LightningStore,
    LightningStoreCapabilities,
    LightningStoreStatistics,
    Unset,
)
from .changes import Changes
from .errors import (
    AttemptNotFoundError,
    InvalidArgumentTypeError,
    NoAttemptsError,
    RolloutNotFoundError,
)
from .ids import generate_attempt_id, generate_resources_id, generate_rollout_id
from .lifecycle import ROLLOUT_STATUSES, record_heartbeat, rollout_status_after_span, unhealthy_attempt_status
from .notify import CompletionNotifier
from .query import (
    ATTEMPT_FIELDS,
    RESOURCES_FIELDS,
    ROLLOUT_FIELDS,
    SPAN_FIELDS,
    WORKER_FIELDS,
    Query,
    build_query,
)
from .storage import Storage, StorageTransaction
from .validation import (
    check_attempt_status,
    check_config,
    check_enqueue_request,
    check_id,
    check_id_list,
    check_limit,
    check_metadata,
    check_mode,
    check_optional_id,
    check_resources,
    check_rollout_status,
    check_span,
    check_span_ids,
    check_status_list,
    check_timeout,
    check_timestamp,
)

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

logger = logging.getLogger(__name__)

M = TypeVar("M")

WORKER_STATUSES = ("idle", "busy", "unknown")


def _page(items: list[M], total: int, query: Query) -> PaginatedResult[M]:
    return PaginatedResult[Any].model_construct(items=items, limit=query.limit, offset=query.offset, total=total)  # type: ignore[return-value]


def _with_attempt(rollout: Rollout, attempt: Optional[Attempt]) -> Rollout:
    """A caller-owned copy of the rollout, carrying its attempt when there is one."""
    if attempt is None:
        return rollout.model_copy()
    fields = dict(rollout.__dict__)
    fields["attempt"] = attempt.model_copy()
    return AttemptedRollout.model_construct(**fields)


def _attempted(rollout: Rollout, attempt: Attempt) -> AttemptedRollout:
    return _with_attempt(rollout, attempt)  # type: ignore[return-value]


class CoreLightningStore(LightningStore):
    """Implements every LightningStore method on top of `storage`.

    Health rules (timeouts, unresponsiveness) are checked before most operations; `scan_debounce_seconds` limits how
    often a scan may run (0 checks on every call; backends that track deadlines make the check cheap).
    """

    def __init__(self, storage: Storage, *, scan_debounce_seconds: float = 0.0) -> None:
        if scan_debounce_seconds < 0:
            raise ValueError(f"scan_debounce_seconds must not be negative, got {scan_debounce_seconds}")
        self._storage = storage
        self._scan_debounce_seconds = float(scan_debounce_seconds)
        self._last_scan_time = float("-inf")
        self._scan_guard = threading.Lock()
        self._notifier = CompletionNotifier()
        self._created_at = time.time()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_scan_guard", None)
        state.pop("_notifier", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._scan_guard = threading.Lock()
        self._notifier = CompletionNotifier()

    # ------------------------------------------------------------------------------------------------------- basics
    @property
    def capabilities(self) -> LightningStoreCapabilities:
        return self._storage.capabilities

    async def statistics(self) -> LightningStoreStatistics:
        async with self._storage.transaction(write=False) as tx:
            counts = await tx.count_entities()
        stats = LightningStoreStatistics(
            name=type(self).__name__,
            total_rollouts=counts.get("rollouts", 0),
            total_attempts=counts.get("attempts", 0),
            total_spans=counts.get("spans", 0),
            total_resources=counts.get("resources", 0),
            total_workers=counts.get("workers", 0),
            uptime=time.time() - self._created_at,
        )
        stats.update(await self._storage.statistics())  # type: ignore[typeddict-item]
        return stats

    async def close(self) -> None:
        await self._storage.close()

    # ------------------------------------------------------------------------------------------------------- health
    async def _scan_health(self) -> None:
        """Apply the timeout and unresponsiveness rules to running rollouts, at most once per debounce interval."""
        now = time.time()
        if now - self._last_scan_time < self._scan_debounce_seconds or not self._storage.health_scan_due(now):
            return
        if not self._scan_guard.acquire(blocking=False):
            return  # another task or thread is scanning right now
        try:
            self._last_scan_time = now
            changes = Changes(now)
            async with self._storage.transaction() as tx:
                for rollout, attempt in await tx.health_candidates(now):
                    status = unhealthy_attempt_status(attempt, rollout.config, now)
                    if status is None:
                        continue
                    logger.info("Attempt %s of rollout %s is %s", attempt.attempt_id, rollout.rollout_id, status)
                    changes.set_attempt_status(
                        changes.rollout(rollout), changes.attempt(attempt), status, is_latest=True
                    )
                await changes.flush(tx)
            self._notifier.notify(changes.finished)
        finally:
            self._scan_guard.release()

    # ----------------------------------------------------------------------------------------------------- rollouts
    async def _latest_resources_id(self, tx: StorageTransaction, resources_id: Optional[str]) -> Optional[str]:
        if resources_id:
            return resources_id
        latest = await tx.get_latest_resources()
        return latest.resources_id if latest is not None else None

    async def start_rollout(
        self,
        input: TaskInput,
        mode: Optional[Literal["train", "val", "test"]] = None,
        resources_id: Optional[str] = None,
        config: Optional[RolloutConfig] = None,
        metadata: Optional[dict[str, Any]] = None,
        worker_id: Optional[str] = None,
    ) -> AttemptedRollout:
        mode = check_mode(mode)
        resources_id = check_optional_id(resources_id, "resources_id") if resources_id else None
        checked_config = check_config(config)
        checked_metadata = check_metadata(metadata) or {}
        worker_id = check_optional_id(worker_id, "worker_id")
        await self._scan_health()
        now = time.time()
        changes = Changes(now)
        async with self._storage.transaction() as tx:
            rollout = Rollout(
                rollout_id=generate_rollout_id(),
                input=input,
                start_time=now,
                mode=mode,
                resources_id=await self._latest_resources_id(tx, resources_id),
                status="preparing",
                config=checked_config,
                metadata=checked_metadata,
            )
            attempt = Attempt(
                rollout_id=rollout.rollout_id,
                attempt_id=generate_attempt_id(),
                sequence_id=1,
                start_time=now,
                worker_id=worker_id,
            )
            changes.new_rollouts.append(rollout)
            changes.new_attempts.append(attempt)
            changes.sync_worker(attempt)
            await changes.flush(tx)
        return _attempted(rollout, attempt)

    async def enqueue_rollout(
        self,
        input: TaskInput,
        mode: Optional[Literal["train", "val", "test"]] = None,
        resources_id: Optional[str] = None,
        config: Optional[RolloutConfig] = None,
        metadata: Optional[dict[str, Any]] = None,
    ) -> Rollout:
        request = EnqueueRolloutRequest.model_construct(
            input=input, mode=mode, resources_id=resources_id, config=config, metadata=metadata
        )
        return (await self._enqueue([request]))[0]

    async def enqueue_many_rollouts(self, rollouts: Sequence[EnqueueRolloutRequest]) -> Sequence[Rollout]:
        if isinstance(rollouts, (str, bytes)) or not isinstance(rollouts, Sequence):
            raise InvalidArgumentTypeError(f"rollouts must be a list of EnqueueRolloutRequest, got {rollouts!r}")
        return await self._enqueue([check_enqueue_request(request) for request in rollouts])

    async def _enqueue(self, requests: Sequence[EnqueueRolloutRequest]) -> list[Rollout]:
        checked = [
            (
                request.input,
                check_mode(request.mode),
                check_optional_id(request.resources_id, "resources_id") if request.resources_id else None,
                check_config(request.config),
                check_metadata(request.metadata) or {},
            )
            for request in requests
        ]
        await self._scan_health()
        if not checked:
            return []
        now = time.time()
        async with self._storage.transaction() as tx:
            latest_id = await self._latest_resources_id(tx, None)
            rollouts = [
                Rollout(
                    rollout_id=generate_rollout_id(),
                    input=input,
                    start_time=now,
                    mode=cast(Optional[RolloutMode], mode),
                    resources_id=resources_id or latest_id,
                    status="queuing",
                    config=config,
                    metadata=metadata,
                )
                for input, mode, resources_id, config, metadata in checked
            ]
            await tx.insert_rollouts(rollouts, enqueue=True)
        return [rollout.model_copy() for rollout in rollouts]

    async def dequeue_rollout(self, worker_id: Optional[str] = None) -> Optional[AttemptedRollout]:
        claimed = await self.dequeue_many_rollouts(limit=1, worker_id=worker_id)
        return claimed[0] if claimed else None

    async def dequeue_many_rollouts(
        self, *, limit: int = 1, worker_id: Optional[str] = None
    ) -> Sequence[AttemptedRollout]:
        limit = check_limit(limit)
        worker_id = check_optional_id(worker_id, "worker_id")
        await self._scan_health()
        if limit <= 0:
            return []
        now = time.time()
        changes = Changes(now)
        result: list[AttemptedRollout] = []
        async with self._storage.transaction() as tx:
            claimed = await tx.claim_queued(limit)
            latest = await tx.get_latest_attempts([rollout.rollout_id for rollout in claimed]) if claimed else {}
            for stored in claimed:
                rollout = changes.rollout(stored)
                previous = latest.get(rollout.rollout_id)
                attempt = Attempt(
                    rollout_id=rollout.rollout_id,
                    attempt_id=generate_attempt_id(),
                    sequence_id=previous.sequence_id + 1 if previous is not None else 1,
                    start_time=now,
                    worker_id=worker_id,
                )
                rollout.status = "preparing"
                changes.new_attempts.append(attempt)
                changes.sync_worker(attempt)
                result.append(_attempted(rollout, attempt))
            if worker_id is not None and not claimed:
                changes.touch_worker(worker_id)
            await changes.flush(tx, dequeued_by=worker_id)
        return result

    async def start_attempt(self, rollout_id: str, worker_id: Optional[str] = None) -> AttemptedRollout:
        rollout_id = check_id(rollout_id, "rollout_id")
        worker_id = check_optional_id(worker_id, "worker_id")
        await self._scan_health()
        now = time.time()
        changes = Changes(now)
        async with self._storage.transaction() as tx:
            stored = (await tx.get_rollouts([rollout_id])).get(rollout_id)
            if stored is None:
                raise RolloutNotFoundError(rollout_id)
            previous = (await tx.get_latest_attempts([rollout_id])).get(rollout_id)
            attempt = Attempt(
                rollout_id=rollout_id,
                attempt_id=generate_attempt_id(),
                sequence_id=previous.sequence_id + 1 if previous is not None else 1,
                start_time=now,
                worker_id=worker_id,
            )
            rollout = changes.rollout(stored)
            changes.set_rollout_status(rollout, "preparing")
            changes.new_attempts.append(attempt)
            changes.sync_worker(attempt)
            await changes.flush(tx)
        return _attempted(rollout, attempt)

    async def query_rollouts(
        self,
        *,
        status_in: Optional[Sequence[str]] = None,
        rollout_id_in: Optional[Sequence[str]] = None,
        rollout_id_contains: Optional[str] = None,
        filter_logic: Literal["and", "or"] = "and",
        sort_by: Optional[str] = None,
        sort_order: Literal["asc", "desc"] = "asc",
        limit: int = -1,
        offset: int = 0,
        status: Optional[Sequence[str]] = None,
        rollout_ids: Optional[Sequence[str]] = None,
    ) -> Sequence[Rollout]:
        statuses = check_status_list(status_in if status_in is not None else status, ROLLOUT_STATUSES, "status_in")
        ids = check_id_list(rollout_id_in if rollout_id_in is not None else rollout_ids, "rollout_id_in")
        query = build_query(
            "rollouts",
            ROLLOUT_FIELDS,
            within={"status": statuses, "rollout_id": ids},
            contains={"rollout_id": rollout_id_contains},
            filter_logic=filter_logic,
            sort_by=sort_by,
            sort_order=sort_order,
            limit=limit,
            offset=offset,
        )
        await self._scan_health()
        async with self._storage.transaction(write=False) as tx:
            rollouts, total = await tx.query_rollouts(query)
            latest = await tx.get_latest_attempts([rollout.rollout_id for rollout in rollouts]) if rollouts else {}
        items = [_with_attempt(rollout, latest.get(rollout.rollout_id)) for rollout in rollouts]
        return _page(items, total, query)

    async def get_rollout_by_id(self, rollout_id: str) -> Optional[Rollout]:
        rollout_id = check_id(rollout_id, "rollout_id")
        await self._scan_health()
        async with self._storage.transaction(write=False) as tx:
            rollout = (await tx.get_rollouts([rollout_id])).get(rollout_id)
            if rollout is None:
                return None
            latest = (await tx.get_latest_attempts([rollout_id])).get(rollout_id)
        return _with_attempt(rollout, latest)

    async def update_rollout(
        self,
        rollout_id: str,
        input: Union[TaskInput, Unset] = UNSET,
        mode: Union[Optional[Literal["train", "val", "test"]], Unset] = UNSET,
        resources_id: Union[Optional[str], Unset] = UNSET,
        status: Union[str, Unset] = UNSET,
        config: Union[RolloutConfig, Unset] = UNSET,
        metadata: Union[Optional[dict[str, Any]], Unset] = UNSET,
    ) -> Rollout:
        rollout_id = check_id(rollout_id, "rollout_id")
        if not isinstance(mode, Unset):
            check_mode(mode)
        if not isinstance(resources_id, Unset) and resources_id is not None:
            check_id(resources_id, "resources_id")
        if not isinstance(status, Unset):
            check_rollout_status(status)
        new_config = None if isinstance(config, Unset) else check_config(config)
        new_metadata = None if isinstance(metadata, Unset) else check_metadata(metadata)
        await self._scan_health()
        changes = Changes(time.time())
        async with self._storage.transaction() as tx:
            stored = (await tx.get_rollouts([rollout_id])).get(rollout_id)
            if stored is None:
                raise RolloutNotFoundError(rollout_id)
            rollout = changes.rollout(stored)
            if not isinstance(input, Unset):
                rollout.input = input
            if not isinstance(mode, Unset):
                rollout.mode = mode
            if not isinstance(resources_id, Unset):
                rollout.resources_id = resources_id
            if new_config is not None:
                rollout.config = new_config
            if not isinstance(metadata, Unset):
                rollout.metadata = new_metadata
            if not isinstance(status, Unset):
                changes.set_rollout_status(rollout, status)  # type: ignore[arg-type]
            await changes.flush(tx)
        self._notifier.notify(changes.finished)
        return rollout.model_copy()

    async def wait_for_rollouts(self, *, rollout_ids: list[str], timeout: Optional[float] = None) -> list[Rollout]:
        ids = check_id_list(rollout_ids, "rollout_ids") or []
        timeout = check_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        pending = list(dict.fromkeys(ids))
        finished: dict[str, Rollout] = {}
        first_pass = True
        while pending:
            await self._scan_health()
            waiter = self._notifier.register(pending)
            try:
                async with self._storage.transaction(write=False) as tx:
                    found = await tx.get_rollouts(pending)
                if first_pass:
                    pending = [rollout_id for rollout_id in pending if rollout_id in found]
                    first_pass = False
                for rollout_id, rollout in found.items():
                    if rollout.status in FINISHED_STATUSES:
                        finished[rollout_id] = rollout.model_copy()
                pending = [rollout_id for rollout_id in pending if rollout_id not in finished]
                if not pending:
                    break
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                await self._notifier.wait(waiter, self._wake_after(remaining))
            finally:
                self._notifier.unregister(waiter, ids)
        return [finished[rollout_id] for rollout_id in ids if rollout_id in finished]

    def _wake_after(self, remaining: Optional[float]) -> Optional[float]:
        """How long a waiter may sleep: until its timeout, the next poll, or the next health scan that may fire."""
        candidates = [] if remaining is None else [remaining]
        storage = self._storage
        if storage.shared_across_processes or not storage.tracks_health_deadlines:
            candidates.append(max(storage.poll_interval, self._scan_debounce_seconds))
        else:
            deadline = storage.next_health_deadline()
            if deadline is not None:
                next_scan = max(deadline, self._last_scan_time + self._scan_debounce_seconds)
                candidates.append(max(next_scan - time.time(), 0.0) + 0.001)
        return min(candidates) if candidates else None

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
        return _page([attempt.model_copy() for attempt in attempts], total, query)

    async def get_latest_attempt(self, rollout_id: str) -> Optional[Attempt]:
        rollout_id = check_id(rollout_id, "rollout_id")
        await self._scan_health()
        async with self._storage.transaction(write=False) as tx:
            attempt = (await tx.get_latest_attempts([rollout_id])).get(rollout_id)
        return attempt.model_copy() if attempt is not None else None

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
        changes = Changes(time.time())
        async with self._storage.transaction() as tx:
            stored_rollout = (await tx.get_rollouts([rollout_id])).get(rollout_id)
            if stored_rollout is None:
                raise RolloutNotFoundError(rollout_id)
            latest = (await tx.get_latest_attempts([rollout_id])).get(rollout_id)
            if latest is None:
                raise NoAttemptsError(rollout_id)
            if attempt_id in ("latest", latest.attempt_id):
                stored_attempt = latest
            else:
                stored_attempt = (await tx.get_attempts([(rollout_id, attempt_id)])).get((rollout_id, attempt_id))
                if stored_attempt is None:
                    raise AttemptNotFoundError(rollout_id, attempt_id)
            is_latest = stored_attempt.attempt_id == latest.attempt_id
            rollout = changes.rollout(stored_rollout)
            attempt = changes.attempt(stored_attempt)
            if not isinstance(worker_id, Unset) and worker_id != attempt.worker_id:
                if attempt.worker_id:
                    changes.release_worker_of(attempt.worker_id, attempt)
                attempt.worker_id = worker_id
                changes.sync_worker(attempt)
            if heartbeat is not None:
                attempt.last_heartbeat_time = heartbeat
            if not isinstance(metadata, Unset):
                attempt.metadata = new_metadata
            if not isinstance(status, Unset):
                changes.set_attempt_status(rollout, attempt, status, is_latest=is_latest)
            elif heartbeat is not None and attempt.status == "preparing":
                # An explicit heartbeat shows the attempt is alive: it is running.
                changes.set_attempt_status(rollout, attempt, "running", is_latest=is_latest)
            await changes.flush(tx)
        self._notifier.notify(changes.finished)
        return attempt.model_copy()

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
        elif isinstance(sequence_id, bool) or not isinstance(sequence_id, int):
            raise InvalidArgumentTypeError(f"sequence_id must be an integer, got {sequence_id!r}")
        span = Span.from_opentelemetry(
            readable_span, rollout_id=rollout_id, attempt_id=attempt_id, sequence_id=sequence_id
        )
        return await self.add_span(span)

    async def _ingest_spans(self, spans: list[Span]) -> list[Span]:
        """Validate the whole batch, store the new spans, record heartbeats and promote statuses."""
        for span in spans:
            check_span_ids(span)
        if not spans:
            return []
        now = time.time()
        changes = Changes(now)
        rollout_ids = list(dict.fromkeys(span.rollout_id for span in spans))
        keys = list(dict.fromkeys((span.rollout_id, span.attempt_id) for span in spans))
        async with self._storage.transaction() as tx:
            rollouts = await tx.get_rollouts(rollout_ids)
            for rollout_id in rollout_ids:
                if rollout_id not in rollouts:
                    raise RolloutNotFoundError(rollout_id)
            attempts = await tx.get_attempts(keys)
            for key in keys:
                if key not in attempts:
                    raise AttemptNotFoundError(*key)
            floors: dict[str, int] = {}
            for span in spans:
                if span.sequence_id > floors.get(span.rollout_id, 0):
                    floors[span.rollout_id] = span.sequence_id
            if floors:
                await tx.raise_span_sequence_floor(floors)
            inserted = await tx.insert_spans(spans)
            if inserted:
                touched = list(dict.fromkeys((span.rollout_id, span.attempt_id) for span in inserted))
                latest = await tx.get_latest_attempts(list(dict.fromkeys(key[0] for key in touched)))
                for key in touched:
                    attempt = changes.attempt(attempts[key])
                    if record_heartbeat(attempt, now):
                        changes.sync_worker(attempt)
                    latest_attempt = latest.get(key[0])
                    if latest_attempt is not None and latest_attempt.attempt_id == key[1]:
                        promoted = rollout_status_after_span(rollouts[key[0]])
                        if promoted is not None:
                            changes.set_rollout_status(changes.rollout(rollouts[key[0]]), promoted)
                await changes.flush(tx)
        return inserted

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
                    return _page([], 0, query)
                attempt_id = latest.attempt_id
            spans, total = await tx.query_spans(rollout_id, attempt_id, query)
        return _page(spans, total, query)

    # ---------------------------------------------------------------------------------------------------- resources
    async def add_resources(self, resources: NamedResources) -> ResourcesUpdate:
        checked = check_resources(resources)
        now = time.time()
        update = ResourcesUpdate(
            resources_id=generate_resources_id(), create_time=now, update_time=now, version=1, resources=checked
        )
        async with self._storage.transaction() as tx:
            await tx.put_resources(update)
        return update.model_copy()

    async def update_resources(self, resources_id: str, resources: NamedResources) -> ResourcesUpdate:
        resources_id = check_id(resources_id, "resources_id")
        checked = check_resources(resources)
        await self._scan_health()
        now = time.time()
        async with self._storage.transaction() as tx:
            existing = await tx.get_resources(resources_id)
            update = ResourcesUpdate(
                resources_id=resources_id,
                create_time=existing.create_time if existing is not None else now,
                update_time=max(now, existing.update_time) if existing is not None else now,
                version=existing.version + 1 if existing is not None else 1,
                resources=checked,
            )
            await tx.put_resources(update)
        return update.model_copy()

    async def get_resources_by_id(self, resources_id: str) -> Optional[ResourcesUpdate]:
        resources_id = check_id(resources_id, "resources_id")
        async with self._storage.transaction(write=False) as tx:
            update = await tx.get_resources(resources_id)
        return update.model_copy() if update is not None else None

    async def get_latest_resources(self) -> Optional[ResourcesUpdate]:
        async with self._storage.transaction(write=False) as tx:
            update = await tx.get_latest_resources()
        return update.model_copy() if update is not None else None

    async def query_resources(
        self,
        *,
        resources_id: Optional[str] = None,
        resources_id_contains: Optional[str] = None,
        sort_by: Optional[str] = None,
        sort_order: Literal["asc", "desc"] = "asc",
        limit: int = -1,
        offset: int = 0,
    ) -> Sequence[ResourcesUpdate]:
        if resources_id is not None:
            check_id(resources_id, "resources_id")
        query = build_query(
            "resources",
            RESOURCES_FIELDS,
            exact={"resources_id": resources_id},
            contains={"resources_id": resources_id_contains},
            sort_by=sort_by,
            sort_order=sort_order,
            limit=limit,
            offset=offset,
        )
        async with self._storage.transaction(write=False) as tx:
            updates, total = await tx.query_resources(query)
        return _page([update.model_copy() for update in updates], total, query)

    # ------------------------------------------------------------------------------------------------------ workers
    async def query_workers(
        self,
        *,
        status_in: Optional[Sequence[str]] = None,
        worker_id_contains: Optional[str] = None,
        filter_logic: Literal["and", "or"] = "and",
        sort_by: Optional[str] = None,
        sort_order: Literal["asc", "desc"] = "asc",
        limit: int = -1,
        offset: int = 0,
    ) -> Sequence[Worker]:
        statuses = check_status_list(status_in, WORKER_STATUSES, "status_in")
        query = build_query(
            "workers",
            WORKER_FIELDS,
            within={"status": statuses},
            contains={"worker_id": worker_id_contains},
            filter_logic=filter_logic,
            sort_by=sort_by,
            sort_order=sort_order,
            limit=limit,
            offset=offset,
        )
        await self._scan_health()
        async with self._storage.transaction(write=False) as tx:
            workers, total = await tx.query_workers(query)
        return _page([worker.model_copy() for worker in workers], total, query)

    async def get_worker_by_id(self, worker_id: str) -> Optional[Worker]:
        worker_id = check_id(worker_id, "worker_id")
        async with self._storage.transaction(write=False) as tx:
            worker = (await tx.get_workers([worker_id])).get(worker_id)
        return worker.model_copy() if worker is not None else None

    async def update_worker(self, worker_id: str, heartbeat_stats: Union[dict[str, Any], Unset] = UNSET) -> Worker:
        worker_id = check_id(worker_id, "worker_id")
        if not isinstance(heartbeat_stats, Unset) and not isinstance(heartbeat_stats, dict):
            raise InvalidArgumentTypeError(
                f"heartbeat_stats must be a dict (omit it to record a bare heartbeat), got {heartbeat_stats!r}"
            )
        now = time.time()
        async with self._storage.transaction() as tx:
            stored = (await tx.get_workers([worker_id])).get(worker_id)
            worker = stored.model_copy() if stored is not None else Worker(worker_id=worker_id)
            worker.last_heartbeat_time = now
            if isinstance(heartbeat_stats, dict):
                worker.heartbeat_stats = dict(heartbeat_stats)
            await tx.put_workers([worker])
        return worker.model_copy()
