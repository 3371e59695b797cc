"""Rollouts, attempts, workers, query helpers and the legacy task models."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    Literal,
    Optional,
    Protocol,
    SupportsIndex,
    TypeVar,
    Union,
    overload,
)

from pydantic import BaseModel, ConfigDict, Field, model_validator
from typing_extensions import TypedDict

from .tracer import Span, SpanCoreFields

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = [
    "Attempt",
    "AttemptStatus",
    "AttemptedRollout",
    "Dataset",
    "EnqueueRolloutRequest",
    "FilterField",
    "FilterOptions",
    "GenericResponse",
    "Hook",
    "PaginatedResult",
    "ParallelWorkerBase",
    "Rollout",
    "RolloutConfig",
    "RolloutLegacy",
    "RolloutMode",
    "RolloutRawResult",  # noqa: F822 - resolved lazily by __getattr__
    "RolloutRawResultLegacy",  # noqa: F822 - resolved lazily by __getattr__
    "RolloutStatus",
    "SortOptions",
    "Task",
    "TaskIfAny",
    "TaskInput",
    "Triplet",
    "Worker",
    "WorkerStatus",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

RolloutStatus = Literal["queuing", "preparing", "running", "failed", "succeeded", "cancelled", "requeuing"]
"""queuing: enqueued, never claimed; preparing: claimed by a runner; running: the first span arrived;
failed/succeeded/cancelled: terminal; requeuing: waiting for a retry."""

AttemptStatus = Literal["preparing", "running", "failed", "succeeded", "unresponsive", "timeout"]
RolloutMode = Literal["train", "val", "test"]
WorkerStatus = Literal["idle", "busy", "unknown"]
TaskInput = Any


class Triplet(BaseModel):
    """One step of a trajectory: what the model saw, what it produced, and the reward for it."""

    model_config = ConfigDict(defer_build=True)

    prompt: Any
    response: Any
    reward: Optional[float] = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class RolloutConfig(BaseModel):
    """Health and retry rules of a rollout.

    `timeout_seconds` bounds the wall time of each attempt; `unresponsive_seconds` bounds the time since its last
    heartbeat (or its start). An attempt that ends with a status in `retry_condition` is retried while fewer than
    `max_attempts` attempts (the first included) have been made.
    """

    # NaN and Infinity travel as such (not as null), so the store that receives them can refuse them.
    model_config = ConfigDict(defer_build=True, ser_json_inf_nan="constants")

    timeout_seconds: Optional[float] = Field(default=None, ge=0)
    unresponsive_seconds: Optional[float] = Field(default=None, ge=0)
    max_attempts: int = Field(default=1, ge=1)
    retry_condition: list[AttemptStatus] = Field(default_factory=list)


class Rollout(BaseModel):
    """A unit of work: one task input to run the agent on, with its lifecycle status."""

    model_config = ConfigDict(defer_build=True)

    rollout_id: str
    input: TaskInput
    start_time: float
    end_time: Optional[float] = None
    mode: Optional[RolloutMode] = None
    resources_id: Optional[str] = None
    status: RolloutStatus = "queuing"
    config: RolloutConfig = Field(default_factory=RolloutConfig)
    metadata: Optional[dict[str, Any]] = None


class Attempt(BaseModel):
    """One try at running a rollout; `sequence_id` counts the tries of a rollout from 1."""

    model_config = ConfigDict(defer_build=True)

    rollout_id: str
    attempt_id: str
    sequence_id: int
    start_time: float
    end_time: Optional[float] = None
    status: AttemptStatus = "preparing"
    worker_id: Optional[str] = None
    last_heartbeat_time: Optional[float] = None
    metadata: Optional[dict[str, Any]] = None


class AttemptedRollout(Rollout):
    """A rollout together with one of its attempts (usually the latest)."""

    attempt: Attempt

    @model_validator(mode="after")
    def _check_consistency(self) -> AttemptedRollout:
        if self.attempt is not None and self.attempt.rollout_id != self.rollout_id:
            raise ValueError("Inconsistent rollout_id between Rollout and Attempt")
        return self


class EnqueueRolloutRequest(BaseModel):
    """One rollout to enqueue in a batch (`LightningStore.enqueue_many_rollouts`)."""

    # NaN and Infinity travel as such (not as null), so the store that receives them can refuse them.
    model_config = ConfigDict(defer_build=True, ser_json_inf_nan="constants")

    input: TaskInput
    mode: Optional[RolloutMode] = None
    resources_id: Optional[str] = None
    config: Optional[RolloutConfig] = None
    metadata: Optional[dict[str, Any]] = None


class Worker(BaseModel):
    """A runner process as seen by the store: its status, heartbeats and current assignment."""

    model_config = ConfigDict(defer_build=True)

    worker_id: str
    status: WorkerStatus = "unknown"
    heartbeat_stats: Optional[dict[str, Any]] = None
    last_heartbeat_time: Optional[float] = None
    last_dequeue_time: Optional[float] = None
    last_busy_time: Optional[float] = None
    last_idle_time: Optional[float] = None
    current_rollout_id: Optional[str] = None
    current_attempt_id: Optional[str] = None


class FilterField(TypedDict, total=False):
    """Conditions on one field: equal to `exact`, a member of `within`, or containing the substring `contains`."""

    exact: Any
    within: Sequence[Any]
    contains: str


FilterOptions = Mapping[str, Union[FilterField, Literal["and", "or"], Mapping[str, FilterField], Sequence[Any]]]
"""Field conditions combined by `_aggregate` ("and" by default); `_must` holds conditions that always apply."""


class SortOptions(TypedDict):
    name: str
    order: Literal["asc", "desc"]


class PaginatedResult(BaseModel, Sequence[T], Generic[T]):
    """One page of a query. Behaves like a read-only list of `items`; `total` counts all matches."""

    model_config = ConfigDict(defer_build=True)

    items: list[T]
    limit: int
    offset: int
    total: int

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, index: SupportsIndex) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: Union[SupportsIndex, slice]) -> Union[T, list[T]]:
        return self.items[index]

    def __iter__(self) -> Iterator[T]:  # type: ignore[override]
        return iter(self.items)

    def __contains__(self, value: object) -> bool:
        return value in self.items

    def __reversed__(self) -> Iterator[T]:
        return reversed(self.items)

    def __bool__(self) -> bool:
        return bool(self.items)

    def index(self, value: Any, start: int = 0, stop: int = sys.maxsize) -> int:
        return self.items.index(value, start, stop)

    def count(self, value: Any) -> int:
        return self.items.count(value)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple)):
            return self.items == list(other)
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        end = "" if self.limit == -1 else str(self.offset + self.limit)
        preview = repr(self.items[:2])
        if len(self.items) > 2:
            preview = preview[:-1] + ", ...]"
        return f"<PaginatedResult ({self.offset}:{end} of {self.total}) {preview}>"


class RolloutLegacy(BaseModel):
    """Deprecated v0.1 rollout result."""

    model_config = ConfigDict(defer_build=True)

    rollout_id: str
    task: Optional[Task] = None
    final_reward: Optional[float] = None
    triplets: Optional[list[Triplet]] = None
    trace: Optional[list[dict[str, Any]]] = None
    logs: Optional[list[str]] = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Task(BaseModel):
    """Deprecated v0.1 task handed to a client agent."""

    model_config = ConfigDict(defer_build=True)

    rollout_id: str
    input: TaskInput
    mode: Optional[RolloutMode] = None
    resources_id: Optional[str] = None
    create_time: Optional[float] = None
    last_claim_time: Optional[float] = None
    num_claims: Optional[int] = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class TaskIfAny(BaseModel):
    """Deprecated v0.1 polling answer."""

    model_config = ConfigDict(defer_build=True)

    is_available: bool
    task: Optional[Task] = None


class GenericResponse(BaseModel):
    """Deprecated v0.1 generic server response."""

    model_config = ConfigDict(defer_build=True)

    status: str = "success"
    message: Optional[str] = None
    data: Optional[dict[str, Any]] = None


class ParallelWorkerBase:
    """Lifecycle shared by components that run in worker processes: init once, then per worker."""

    def __init__(self) -> None:
        self.worker_id: Optional[int] = None

    def init(self, *args: Any, **kwargs: Any) -> None:
        """Set up once in the driver process."""

    def init_worker(self, worker_id: int, *args: Any, **kwargs: Any) -> None:
        """Set up inside worker `worker_id`."""
        self.worker_id = worker_id

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """Do the work."""
        return None

    def teardown_worker(self, worker_id: int, *args: Any, **kwargs: Any) -> None:
        """Release what `init_worker` acquired."""

    def teardown(self, *args: Any, **kwargs: Any) -> None:
        """Release what `init` acquired."""


class Dataset(Protocol, Generic[T_co]):
    """Anything indexable with a length, such as a list of tasks."""

    def __getitem__(self, index: SupportsIndex, /) -> T_co: ...

    def __len__(self) -> int: ...


class Hook(ParallelWorkerBase):
    """Callbacks around each traced rollout. Override the ones you need."""

    async def on_trace_start(self, *, agent: Any, runner: Any, tracer: Any, rollout: Rollout) -> None:
        """Called before tracing of a rollout starts."""

    async def on_trace_end(self, *, agent: Any, runner: Any, tracer: Any, rollout: Rollout) -> None:
        """Called after tracing of a rollout ends."""

    async def on_rollout_start(self, *, agent: Any, runner: Any, rollout: Rollout) -> None:
        """Called before the agent runs a rollout."""

    async def on_rollout_end(
        self,
        *,
        agent: Any,
        runner: Any,
        rollout: Rollout,
        spans: Union[list[ReadableSpan], list[Span]],
    ) -> None:
        """Called after the agent finished a rollout, with the spans it produced."""


def __getattr__(name: str) -> Any:
    # The raw-result unions mention the OpenTelemetry SDK span class; build them lazily to keep imports fast.
    if name in ("RolloutRawResultLegacy", "RolloutRawResult"):
        from opentelemetry.sdk.trace import ReadableSpan

        values = {
            "RolloutRawResultLegacy": Union[
                None, float, list[Triplet], list[dict[str, Any]], list[ReadableSpan], RolloutLegacy
            ],
            "RolloutRawResult": Union[None, float, list[ReadableSpan], list[Span], list[SpanCoreFields]],
        }
        globals().update(values)
        return values[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
