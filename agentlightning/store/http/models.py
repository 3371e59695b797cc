"""Request and response bodies of the store's HTTP API (`/v1/agl/...`).

Each request model lists the keyword arguments of one LightningStore method, except the ids carried in the URL path.
Field names equal the method's parameter names, so a validated body maps onto a call without translation. Most are
derived from the method's signature in the contract (`request_body`), so a new operation or parameter needs no model
here; the 0.2 models (exported by `agentlightning.store.client_server`) stay classes written out. Fields a client
leaves out are not passed to the store (the method's own default, or UNSET for the `update_*` methods, applies). Unknown fields are rejected at every depth (the server validates with `extra="forbid"`; spans, whose
extra fields are part of the 0.2 contract, keep them), so that a typo is reported instead of silently ignored.
"""

from __future__ import annotations

import collections.abc
import inspect
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, Optional, Union, get_args, get_origin, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, RootModel, create_model

from agentlightning.store.base import LightningStore, Unset
from agentlightning.store.core.validation import MAX_SPAN_SEQUENCE_ID, MAX_STORED_INTEGER
from agentlightning.types import (
    Attempt,
    AttemptedRollout,
    AttemptStatus,
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
    "request_body",
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


def _wire_type(annotation: Any) -> Any:
    """A contract parameter's type as a body field: sequences travel as lists, integers within what the databases
    store (`StoredInt`)."""
    origin = get_origin(annotation)
    if origin is collections.abc.Sequence:
        return list[_wire_type(get_args(annotation)[0])]
    if origin is Union:
        return Union[tuple(_wire_type(arg) for arg in get_args(annotation))]
    return StoredInt if annotation is int else annotation


def request_body(
    method: str,
    name: str,
    doc: str,
    *,
    path: Sequence[str] = (),
    fields: Optional[Mapping[str, tuple[Any, Any]]] = None,
) -> type[BaseModel]:
    """The body model of `LightningStore.<method>`, derived from its signature: one field per parameter but `self`
    and the ids in the URL path (`path`), with the parameter's type and default. A parameter whose default is UNSET
    may be left out, and is sent as null only when its type allows None. `fields` gives the (type, default or Field)
    of parameters whose wire form differs from the signature (a description, a looser type)."""
    function = getattr(LightningStore, method)
    hints = get_type_hints(function, include_extras=True)
    definitions: dict[str, Any] = {}
    for parameter in inspect.signature(function).parameters.values():
        if parameter.name == "self" or parameter.name in path:
            continue
        annotation = hints[parameter.name]
        if get_origin(annotation) is Union and Unset in get_args(annotation):
            given = tuple(arg for arg in get_args(annotation) if arg is not Unset)
            value_type = _wire_type(Union[given])
            nullable = value_type is Any or type(None) in get_args(value_type)
            definitions[parameter.name] = (value_type, None if nullable else _omittable())
        else:
            default = ... if parameter.default is inspect.Parameter.empty else parameter.default
            definitions[parameter.name] = (_wire_type(annotation), default)
    definitions.update(fields or {})
    return create_model(name, __base__=_Request, __doc__=doc, __module__=__name__, **definitions)


# The bodies that are the store method's parameters as they are (but the path ids); each name is its OpenAPI schema's.
EnqueueRolloutsRequest = request_body(
    "enqueue_many_rollouts",
    "EnqueueRolloutsRequest",
    "Body of `POST /queues/rollouts/enqueue`: the rollouts to enqueue, in order.",
)
DequeueRolloutsRequest = request_body(
    "dequeue_many_rollouts", "DequeueRolloutsRequest", "Body of `POST /queues/rollouts/dequeue`."
)
StartAttemptRequest = request_body(
    "start_attempt", "StartAttemptRequest", "Body of `POST /rollouts/{rollout_id}/attempts`.", path=["rollout_id"]
)
QueryAttemptsRequest = request_body(
    "query_attempts", "QueryAttemptsRequest", "Sort and page of `query_attempts`.", path=["rollout_id"]
)
QuerySpansRequest = request_body(
    "query_spans",
    "QuerySpansRequest",
    "Filters, sort and page of `query_spans` (`POST /spans/search`, `GET /spans`).",
    fields={
        "attempt_id": (Optional[str], Field(default=None, description='an attempt id, "latest", or null for all')),
    },
)
QueryResourcesRequest = request_body(
    "query_resources", "QueryResourcesRequest", "Filters, sort and page of `query_resources`."
)
QueryWorkersRequest = request_body("query_workers", "QueryWorkersRequest", "Filters, sort and page of `query_workers`.")
UpdateWorkerRequest = request_body(
    "update_worker",
    "UpdateWorkerRequest",
    "Body of `POST /workers/{worker_id}`: a heartbeat, optionally with a stats snapshot.",
    path=["worker_id"],
)
SequenceIdRequest = request_body("get_next_span_sequence_id", "SequenceIdRequest", "Body of `POST /spans/next`.")
SequenceIdsRequest = request_body(
    "get_many_span_sequence_ids",
    "SequenceIdsRequest",
    "Body of `POST /spans/next/batch`: one sequence id is allocated per (rollout_id, attempt_id) pair.",
)


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
