"""The LightningStore contract: the control plane shared by algorithms and runners.

A store holds a FIFO queue of rollouts, the attempts made at each rollout (with retries, heartbeats and timeouts),
the spans every attempt emitted, versioned snapshots of tunable resources, and the workers that run rollouts.
Every backend (memory, SQLite, PostgreSQL, the HTTP client) implements this one contract; the conformance suite in
`tests/store` checks them all.

Errors (see `agentlightning.store.errors`): writes that name an unknown rollout or attempt raise
`RolloutNotFoundError` / `AttemptNotFoundError` (both ValueError); illegal argument values raise
`InvalidArgumentError` (a ValueError). Reads of unknown ids return None or an empty result instead. A failed call
leaves the store unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import (
    TYPE_CHECKING,
    Any,
    Literal,
    Optional,
    Union,
)

from typing_extensions import TypedDict

from agentlightning.types import (
    Attempt,
    AttemptedRollout,
    AttemptStatus,
    EnqueueRolloutRequest,
    NamedResources,
    ResourcesUpdate,
    Rollout,
    RolloutConfig,
    RolloutMode,
    RolloutStatus,
    Span,
    TaskInput,
    Worker,
    WorkerStatus,
)

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = [
    "UNSET",
    "LightningStore",
    "LightningStoreCapabilities",
    "LightningStoreStatistics",
    "Unset",
    "is_finished",
    "is_queuing",
    "is_running",
]

QUEUING_STATUSES: tuple[RolloutStatus, ...] = ("queuing", "requeuing")
RUNNING_STATUSES: tuple[RolloutStatus, ...] = ("preparing", "running")
FINISHED_STATUSES: tuple[RolloutStatus, ...] = ("failed", "succeeded", "cancelled")


def is_queuing(rollout: Rollout) -> bool:
    """True when the rollout waits in the queue ("queuing" or "requeuing")."""
    return rollout.status in QUEUING_STATUSES


def is_running(rollout: Rollout) -> bool:
    """True when a runner holds the rollout ("preparing" or "running")."""
    return rollout.status in RUNNING_STATUSES


def is_finished(rollout: Rollout) -> bool:
    """True when the rollout reached a terminal status ("failed", "succeeded" or "cancelled")."""
    return rollout.status in FINISHED_STATUSES


def _return_unset() -> _UnsetType:
    return UNSET


class _UnsetType:
    """Marks an argument that was not provided (as opposed to an explicit None)."""

    __slots__ = ()

    def __new__(cls) -> _UnsetType:
        instance = globals().get("UNSET")
        if isinstance(instance, cls):
            return instance
        return super().__new__(cls)

    def __repr__(self) -> str:
        return "UNSET"

    def __reduce__(self) -> Any:
        return (_return_unset, ())

    def __copy__(self) -> _UnsetType:
        return self

    def __deepcopy__(self, memo: Any) -> _UnsetType:
        return self


UNSET = _UnsetType()
Unset = _UnsetType


class LightningStoreCapabilities(TypedDict, total=False):
    """What a store guarantees: safe from several threads, from several tasks of one loop, one copy shared by all
    processes, and native OTLP trace ingest."""

    thread_safe: bool
    async_safe: bool
    zero_copy: bool
    otlp_traces: bool


class LightningStoreStatistics(TypedDict, total=False):
    name: str
    total_rollouts: int
    total_attempts: int
    total_spans: int
    total_resources: int
    total_workers: int
    uptime: float
    total_span_bytes: int
    eviction_threshold_bytes: int
    safe_threshold_bytes: int
    memory_capacity_bytes: int


SortOrder = Literal["asc", "desc"]
FilterLogic = Literal["and", "or"]


class LightningStore:
    """Abstract contract. Every coroutine looks atomic to concurrent callers."""

    @property
    def capabilities(self) -> LightningStoreCapabilities:
        return LightningStoreCapabilities(thread_safe=False, async_safe=False, zero_copy=False, otlp_traces=False)

    @property
    def is_remote(self) -> bool:
        """True when every call is a round trip to another process (a client of a store server), so callers
        prefer one call that does it all over several cheap ones."""
        return False

    async def statistics(self) -> LightningStoreStatistics:
        """Counts of stored entities and backend figures."""
        return LightningStoreStatistics(name=type(self).__name__)

    def otlp_traces_endpoint(self) -> str:
        """The OTLP/HTTP traces URL that feeds this store, for stores with the `otlp_traces` capability."""
        raise NotImplementedError()

    async def close(self) -> None:
        """Release connections and background tasks. The store must not be used afterwards."""

    # ----------------------------------------------------------------------------------------------------- rollouts
    async def start_rollout(
        self,
        input: TaskInput,
        mode: Optional[RolloutMode] = None,
        resources_id: Optional[str] = None,
        config: Optional[RolloutConfig] = None,
        metadata: Optional[dict[str, Any]] = None,
        worker_id: Optional[str] = None,
    ) -> AttemptedRollout:
        """Create a rollout that bypasses the queue, already "preparing" with attempt #1.

        A falsy `resources_id` means the latest resources snapshot at creation time.
        Raises InvalidArgumentError for an illegal mode, config or metadata (nothing is created).
        """
        raise NotImplementedError()

    async def enqueue_rollout(
        self,
        input: TaskInput,
        mode: Optional[RolloutMode] = None,
        resources_id: Optional[str] = None,
        config: Optional[RolloutConfig] = None,
        metadata: Optional[dict[str, Any]] = None,
    ) -> Rollout:
        """Append a new "queuing" rollout (without attempts) to the tail of the queue.

        Raises InvalidArgumentError for an illegal mode, config (e.g. a negative timeout) or non-dict metadata.
        """
        raise NotImplementedError()

    async def enqueue_many_rollouts(self, rollouts: Sequence[EnqueueRolloutRequest]) -> Sequence[Rollout]:
        """Enqueue several rollouts atomically, keeping their order.

        Raises InvalidArgumentError if any request is invalid; then none is enqueued.
        """
        raise NotImplementedError()

    async def dequeue_rollout(self, worker_id: Optional[str] = None) -> Optional[AttemptedRollout]:
        """Claim the oldest queued rollout: it becomes "preparing" with a new attempt. None when the queue is empty.

        Never blocks; concurrent callers never receive the same rollout.
        """
        raise NotImplementedError()

    async def dequeue_many_rollouts(
        self, *, limit: int = 1, worker_id: Optional[str] = None
    ) -> Sequence[AttemptedRollout]:
        """Claim up to `limit` queued rollouts in FIFO order (`limit <= 0` claims none).

        Raises InvalidArgumentTypeError when `limit` is not an integer.
        """
        raise NotImplementedError()

    async def start_attempt(self, rollout_id: str, worker_id: Optional[str] = None) -> AttemptedRollout:
        """Create a new attempt for any existing rollout outside the queue (ignores `max_attempts`).

        Raises RolloutNotFoundError for an unknown id.
        """
        raise NotImplementedError()

    async def query_rollouts(
        self,
        *,
        status_in: Optional[Sequence[RolloutStatus]] = None,
        rollout_id_in: Optional[Sequence[str]] = None,
        rollout_id_contains: Optional[str] = None,
        filter_logic: FilterLogic = "and",
        sort_by: Optional[str] = None,
        sort_order: SortOrder = "asc",
        limit: int = -1,
        offset: int = 0,
        status: Optional[Sequence[RolloutStatus]] = None,
        rollout_ids: Optional[Sequence[str]] = None,
        mode_in: Optional[Sequence[RolloutMode]] = None,
    ) -> Sequence[Rollout]:
        """Rollouts matching the filters, in creation order unless `sort_by` is given.

        `status` and `rollout_ids` are the 0.2 names of `status_in` and `rollout_id_in` (the new names win).
        `mode_in` keeps rollouts whose mode is one of the given modes (an extension of 0.3). An empty list filter
        matches nothing. Rollouts with attempts come back as AttemptedRollout (latest attempt).
        `limit=-1` means no limit. The result is a PaginatedResult (a sequence with `total`).
        Raises InvalidArgumentError for an unknown status or mode, sort field, sort order, filter logic, a limit
        below -1 or a negative offset.
        """
        raise NotImplementedError()

    async def get_rollout_by_id(self, rollout_id: str) -> Optional[Rollout]:
        """The rollout (an AttemptedRollout with its latest attempt when it has one), or None if unknown.

        Raises InvalidArgumentTypeError when `rollout_id` is not a string.
        """
        raise NotImplementedError()

    async def update_rollout(
        self,
        rollout_id: str,
        input: Union[TaskInput, Unset] = UNSET,
        mode: Union[Optional[RolloutMode], Unset] = UNSET,
        resources_id: Union[Optional[str], Unset] = UNSET,
        status: Union[RolloutStatus, Unset] = UNSET,
        config: Union[RolloutConfig, Unset] = UNSET,
        metadata: Union[Optional[dict[str, Any]], Unset] = UNSET,
    ) -> Rollout:
        """Replace the given fields (UNSET leaves a field alone; None clears it).

        A terminal status stamps `end_time` and wakes waiters; a queuing status puts the rollout back in the queue
        (once). Raises RolloutNotFoundError for an unknown id and InvalidArgumentError for an illegal status, mode,
        config or metadata (the rollout is left unchanged).
        """
        raise NotImplementedError()

    async def wait_for_rollouts(self, *, rollout_ids: list[str], timeout: Optional[float] = None) -> list[Rollout]:
        """Wait until the listed rollouts are finished or `timeout` seconds pass (None waits forever).

        Returns the finished ones in input order. Unknown ids are ignored. Does not busy-wait.
        Raises InvalidArgumentError for a negative or non-numeric timeout.
        """
        raise NotImplementedError()

    # ----------------------------------------------------------------------------------------------------- attempts
    async def query_attempts(
        self,
        rollout_id: str,
        *,
        sort_by: Optional[str] = "sequence_id",
        sort_order: SortOrder = "asc",
        limit: int = -1,
        offset: int = 0,
    ) -> Sequence[Attempt]:
        """Attempts of a rollout, by ascending sequence id by default ([] for an unknown rollout).

        Raises InvalidArgumentError for an unknown sort field or order, a limit below -1 or a negative offset.
        """
        raise NotImplementedError()

    async def get_latest_attempt(self, rollout_id: str) -> Optional[Attempt]:
        """The attempt with the highest sequence id, or None."""
        raise NotImplementedError()

    async def update_attempt(
        self,
        rollout_id: str,
        attempt_id: Union[str, Literal["latest"]],
        status: Union[AttemptStatus, Unset] = UNSET,
        worker_id: Union[str, Unset] = UNSET,
        last_heartbeat_time: Union[float, Unset] = UNSET,
        metadata: Union[Optional[dict[str, Any]], Unset] = UNSET,
    ) -> Attempt:
        """Update an attempt ("latest" targets the highest sequence id).

        When the latest attempt changes status, the rollout follows: succeeded/running directly; failed, timeout and
        unresponsive requeue the rollout if the status is in `retry_condition` and attempts remain, else fail it.
        A cancelled rollout keeps its status. Raises RolloutNotFoundError, NoAttemptsError or AttemptNotFoundError
        for unknown ids and InvalidArgumentError for an illegal status, heartbeat time or metadata (nothing changes).
        """
        raise NotImplementedError()

    # -------------------------------------------------------------------------------------------------------- spans
    async def add_span(self, span: Span) -> Optional[Span]:
        """Store a span; it counts as a heartbeat of its attempt and may move statuses to "running".

        Returns None (and stores nothing) when a span with the same (rollout, attempt, span id) exists.
        Raises RolloutNotFoundError / AttemptNotFoundError when the span names unknown ids.
        """
        raise NotImplementedError()

    async def add_many_spans(self, spans: Sequence[Span]) -> Sequence[Span]:
        """Store a batch of spans in one operation; returns those actually added (duplicates are skipped).

        The batch is validated as a whole: if any span names an unknown rollout or attempt nothing is stored.
        """
        raise NotImplementedError()

    async def add_otel_span(
        self,
        rollout_id: str,
        attempt_id: str,
        readable_span: ReadableSpan,
        sequence_id: Optional[int] = None,
    ) -> Optional[Span]:
        """Convert an OpenTelemetry span and store it, allocating a sequence id when none is given.

        Raises RolloutNotFoundError / AttemptNotFoundError for unknown ids; returns None for a duplicate span.
        """
        raise NotImplementedError()

    async def get_next_span_sequence_id(self, rollout_id: str, attempt_id: str) -> int:
        """Allocate the next span sequence number of a rollout (1, 2, ...; shared by all its attempts).

        Raises RolloutNotFoundError for an unknown rollout (the attempt id is not checked).
        """
        raise NotImplementedError()

    async def get_many_span_sequence_ids(self, rollout_attempt_ids: Sequence[tuple[str, str]]) -> Sequence[int]:
        """Allocate one sequence number per (rollout_id, attempt_id) pair, in order.

        Raises RolloutNotFoundError if any rollout is unknown; then nothing is allocated.
        """
        raise NotImplementedError()

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
        filter_logic: FilterLogic = "and",
        limit: int = -1,
        offset: int = 0,
        sort_by: Optional[str] = "sequence_id",
        sort_order: SortOrder = "asc",
    ) -> Sequence[Span]:
        """Spans of a rollout (optionally one attempt, or "latest" = the latest attempt), by sequence id.

        Rollout and attempt always restrict the result; the other filters combine with `filter_logic`.
        Raises SpansEvictedError when the rollout's spans were evicted or removed by retention, and
        InvalidArgumentError for an unknown sort field, bad pagination or filter logic.
        """
        raise NotImplementedError()

    # ---------------------------------------------------------------------------------------------------- resources
    async def add_resources(self, resources: NamedResources) -> ResourcesUpdate:
        """Store a new resources snapshot (version 1) under a generated id; it becomes the latest.

        Raises InvalidArgumentError when a resource is malformed (dicts are parsed by `resource_type`).
        """
        raise NotImplementedError()

    async def update_resources(self, resources_id: str, resources: NamedResources) -> ResourcesUpdate:
        """Create or replace the snapshot `resources_id` (its version grows by one); it becomes the latest.

        Raises InvalidArgumentError when a resource is malformed or the id is empty.
        """
        raise NotImplementedError()

    async def get_resources_by_id(self, resources_id: str) -> Optional[ResourcesUpdate]:
        raise NotImplementedError()

    async def get_latest_resources(self) -> Optional[ResourcesUpdate]:
        raise NotImplementedError()

    async def query_resources(
        self,
        *,
        resources_id: Optional[str] = None,
        resources_id_contains: Optional[str] = None,
        sort_by: Optional[str] = None,
        sort_order: SortOrder = "asc",
        limit: int = -1,
        offset: int = 0,
    ) -> Sequence[ResourcesUpdate]:
        """Resource snapshots, in creation order unless `sort_by` is given."""
        raise NotImplementedError()

    # ------------------------------------------------------------------------------------------------------ workers
    async def query_workers(
        self,
        *,
        status_in: Optional[Sequence[WorkerStatus]] = None,
        worker_id_contains: Optional[str] = None,
        filter_logic: FilterLogic = "and",
        sort_by: Optional[str] = None,
        sort_order: SortOrder = "asc",
        limit: int = -1,
        offset: int = 0,
    ) -> Sequence[Worker]:
        raise NotImplementedError()

    async def get_worker_by_id(self, worker_id: str) -> Optional[Worker]:
        raise NotImplementedError()

    async def update_worker(self, worker_id: str, heartbeat_stats: Union[dict[str, Any], Unset] = UNSET) -> Worker:
        """Record a worker heartbeat (creating the worker if needed), with an optional stats snapshot.

        Raises InvalidArgumentTypeError when `heartbeat_stats` is given but is not a dict (None included).
        """
        raise NotImplementedError()
