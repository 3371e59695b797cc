"""Request and response bodies of the store's HTTP API (`/v1/agl/...`).

Each request model lists the keyword arguments of one LightningStore method, except the ids carried in the URL path.
Field names equal the method's parameter names, so a validated body maps onto a call without translation. Fields a
client leaves out are not passed to the store (the method's own default, or UNSET for the `update_*` methods,
applies). Unknown fields are rejected at every depth (the server validates with `extra="forbid"`; spans, whose
extra fields are part of the 0.2 contract, keep them), so that a typo is reported instead of silently ignored.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, RootModel

from agentlightning.store.core.validation import MAX_SPAN_SEQUENCE_ID, MAX_STORED_INTEGER
from agentlightning.types import (
    Attempt,
    AttemptedRollout,
    AttemptStatus,
    EnqueueRolloutRequest,
    NamedResources,
    OtelResource,
    PaginatedResult,
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

__all__ = [
    "AddResourcesRequest",
    "AddSpansRequest",
    "AttemptsPage",
    "DequeueRolloutsRequest",
    "EnqueueRolloutsRequest",
    "ErrorResponse",
    "HealthResponse",
    "PydanticUnset",
    "QueryAttemptsRequest",
    "QueryResourcesRequest",
    "QueryRolloutsRequest",
    "QuerySpansRequest",
    "QueryWorkersRequest",
    "ResourcesBody",
    "ResourcesPage",
    "RolloutId",
    "RolloutOrAttempted",
    "RolloutRequest",
    "RolloutsPage",
    "SequenceIdRequest",
    "SequenceIdResponse",
    "SequenceIdsRequest",
    "SequenceIdsResponse",
    "SpanPayload",
    "SpansPage",
    "StartAttemptRequest",
    "UpdateAttemptRequest",
    "UpdateRolloutRequest",
    "UpdateWorkerRequest",
    "WaitForRolloutsRequest",
    "WorkersPage",
]

StoredInt = Annotated[int, Field(ge=-MAX_STORED_INTEGER - 1, le=MAX_STORED_INTEGER)]
"""An integer the databases can store (signed 64 bits): larger numbers get 422 naming the field."""
SpanSequenceId = Annotated[int, Field(ge=-MAX_SPAN_SEQUENCE_ID, le=MAX_SPAN_SEQUENCE_ID)]
"""A span sequence id a client gives (at most 2^53 - 1 in magnitude: exact in every JSON reader)."""

SortOrder = Literal["asc", "desc"]
FilterLogic = Literal["and", "or"]

RolloutOrAttempted = Annotated[Union[AttemptedRollout, Rollout], Field(union_mode="left_to_right")]
"""A rollout as the store returns it: with its latest attempt when it has one, else a plain Rollout."""


def _drop_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


def _omittable() -> Any:
    """A field that may be left out but not sent as null (the schema shows no default)."""
    return Field(default=None, json_schema_extra=_drop_default)


class RolloutsPage(PaginatedResult[RolloutOrAttempted]):
    """A page of rollouts (AttemptedRollout when the rollout has an attempt)."""


class AttemptsPage(PaginatedResult[Attempt]):
    """A page of attempts."""


class SpansPage(PaginatedResult[Span]):
    """A page of spans."""


class ResourcesPage(PaginatedResult[ResourcesUpdate]):
    """A page of resources snapshots."""


class WorkersPage(PaginatedResult[Worker]):
    """A page of workers."""


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)  # built on first use: clients never need them


class PydanticUnset(BaseModel):
    """Marks a field that was not provided (kept for code written against the 0.2 request models)."""

    _type: str = PrivateAttr(default="UNSET")


class RolloutRequest(_Request):
    """Body of `POST /rollouts` (start_rollout)."""

    input: TaskInput
    mode: Optional[RolloutMode] = None
    resources_id: Optional[str] = None
    config: Optional[RolloutConfig] = None
    metadata: Optional[dict[str, Any]] = None
    worker_id: Optional[str] = None


class EnqueueRolloutsRequest(_Request):
    """Body of `POST /queues/rollouts/enqueue`: the rollouts to enqueue, in order."""

    rollouts: list[EnqueueRolloutRequest]


class DequeueRolloutsRequest(_Request):
    """Body of `POST /queues/rollouts/dequeue`."""

    limit: StoredInt = 1
    worker_id: Optional[str] = None


class StartAttemptRequest(_Request):
    """Body of `POST /rollouts/{rollout_id}/attempts`."""

    worker_id: Optional[str] = None


class RolloutId(_Request):
    """A bare rollout id (0.2 request model)."""

    rollout_id: str


class QueryRolloutsRequest(_Request):
    """Filters, sort and page of `query_rollouts` (`POST /rollouts/search`, `GET /rollouts`)."""

    status_in: Optional[list[RolloutStatus]] = None
    rollout_id_in: Optional[list[str]] = None
    rollout_id_contains: Optional[str] = None
    filter_logic: FilterLogic = "and"
    sort_by: Optional[str] = None
    sort_order: SortOrder = "asc"
    limit: StoredInt = -1
    offset: StoredInt = 0
    status: Optional[list[RolloutStatus]] = Field(default=None, description="0.2 name of status_in")
    rollout_ids: Optional[list[str]] = Field(default=None, description="0.2 name of rollout_id_in")
    mode_in: Optional[list[RolloutMode]] = None


class QueryAttemptsRequest(_Request):
    """Sort and page of `query_attempts`."""

    sort_by: Optional[str] = "sequence_id"
    sort_order: SortOrder = "asc"
    limit: StoredInt = -1
    offset: StoredInt = 0


class QuerySpansRequest(_Request):
    """Filters, sort and page of `query_spans` (`POST /spans/search`, `GET /spans`)."""

    rollout_id: str
    attempt_id: Optional[str] = Field(default=None, description='an attempt id, "latest", or null for all')
    trace_id: Optional[str] = None
    trace_id_contains: Optional[str] = None
    span_id: Optional[str] = None
    span_id_contains: Optional[str] = None
    parent_id: Optional[str] = None
    parent_id_contains: Optional[str] = None
    name: Optional[str] = None
    name_contains: Optional[str] = None
    filter_logic: FilterLogic = "and"
    limit: StoredInt = -1
    offset: StoredInt = 0
    sort_by: Optional[str] = "sequence_id"
    sort_order: SortOrder = "asc"


class QueryResourcesRequest(_Request):
    """Filters, sort and page of `query_resources`."""

    resources_id: Optional[str] = None
    resources_id_contains: Optional[str] = None
    sort_by: Optional[str] = None
    sort_order: SortOrder = "asc"
    limit: StoredInt = -1
    offset: StoredInt = 0


class QueryWorkersRequest(_Request):
    """Filters, sort and page of `query_workers`."""

    status_in: Optional[list[WorkerStatus]] = None
    worker_id_contains: Optional[str] = None
    filter_logic: FilterLogic = "and"
    sort_by: Optional[str] = None
    sort_order: SortOrder = "asc"
    limit: StoredInt = -1
    offset: StoredInt = 0


class WaitForRolloutsRequest(_Request):
    """Body of `POST /waits/rollouts`. The server caps how long one request waits; clients poll again."""

    rollout_ids: list[str]
    timeout: Optional[float] = Field(default=None, description="seconds; null waits up to the server's cap")


class UpdateRolloutRequest(_Request):
    """Body of `POST /rollouts/{rollout_id}`. Omitted fields are left unchanged; null clears a nullable field."""

    input: TaskInput = None
    mode: Optional[RolloutMode] = None
    resources_id: Optional[str] = None
    status: RolloutStatus = _omittable()  # type: ignore[assignment]
    config: RolloutConfig = _omittable()  # type: ignore[assignment]
    metadata: Optional[dict[str, Any]] = None


class UpdateAttemptRequest(_Request):
    """Body of `POST /rollouts/{rollout_id}/attempts/{attempt_id}`. Omitted fields are left unchanged."""

    status: AttemptStatus = _omittable()  # type: ignore[assignment]
    worker_id: Optional[str] = None
    last_heartbeat_time: float = _omittable()  # type: ignore[assignment]
    metadata: Optional[dict[str, Any]] = None


class UpdateWorkerRequest(_Request):
    """Body of `POST /workers/{worker_id}`: a heartbeat, optionally with a stats snapshot."""

    heartbeat_stats: dict[str, Any] = _omittable()  # type: ignore[assignment]


class WireOtelResource(OtelResource):
    """A span's resource on the wire: unknown fields are rejected (a stored OtelResource would drop them)."""

    model_config = ConfigDict(extra="forbid")


class SpanPayload(Span):
    """A span on the wire. Without `sequence_id` the server allocates the next one of the rollout.

    Unknown top-level fields are kept, as by `Span` itself; unknown fields of the resource are rejected."""

    sequence_id: Optional[SpanSequenceId] = None  # type: ignore[assignment]
    resource: WireOtelResource  # type: ignore[assignment]


class AddSpansRequest(_Request):
    """Body of `POST /spans/batch`: spans stored in one operation."""

    spans: list[SpanPayload]


class SequenceIdRequest(_Request):
    """Body of `POST /spans/next`."""

    rollout_id: str
    attempt_id: str


class SequenceIdsRequest(_Request):
    """Body of `POST /spans/next/batch`: one sequence id is allocated per (rollout_id, attempt_id) pair."""

    rollout_attempt_ids: list[tuple[str, str]]


class SequenceIdResponse(BaseModel):
    sequence_id: int


class SequenceIdsResponse(BaseModel):
    sequence_ids: list[int]


class ResourcesBody(RootModel[NamedResources]):
    """Body of `POST /resources` and `POST /resources/{resources_id}`: a mapping of name -> resource."""


class AddResourcesRequest(_Request):
    """The 0.2 body of add_resources (`{"resources": ...}`); the 0.3 routes take the mapping itself."""

    resources: NamedResources


class HealthResponse(BaseModel):
    status: Literal["ok"] = "ok"


class ErrorResponse(BaseModel):
    """Every error answer: a message, the error type the client re-raises, and optional details."""

    detail: str
    error_type: str
    context: Optional[dict[str, Any]] = Field(default=None, description="attributes of the error, such as ids")
    errors: Optional[list[dict[str, Any]]] = Field(default=None, description="validation errors, one per field")
