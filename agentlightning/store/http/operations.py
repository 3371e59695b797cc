"""The one table of store operations on the wire.

The server's routes, the client's requests and the OpenAPI document are all built from `OPERATIONS`, so a contract
method cannot be forgotten on one side. Each entry says which LightningStore method it runs, its REST route under
`/v1/agl`, the request body model (ids travel in the path), the response type, and whether a retry is harmless
as is (`idempotent`) or needs an `Idempotency-Key` to be applied once.

A new operation is one row here: its body, when it takes one, is usually `request_body(...)` (derived from the store
method's signature, see `models.py`), and the client calls it through the generated `DelegatingStore`.

Every operation is also reachable at `POST /v1/agl/ops/{name}` with all arguments in the body. Clients use that
route only for ids that cannot travel in a path segment (for example a resources id "search" or one containing
"/"), which would otherwise be taken for another route.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal, Optional

from pydantic import BaseModel, TypeAdapter, create_model

from agentlightning.store.http.models import (
    AddSpansRequest,
    AttemptsPage,
    DequeueRolloutsRequest,
    EnqueueRolloutsRequest,
    QueryAttemptsRequest,
    QueryResourcesRequest,
    QueryRolloutsRequest,
    QuerySpansRequest,
    QueryWorkersRequest,
    ResourcesBody,
    ResourcesPage,
    RolloutOrAttempted,
    RolloutRequest,
    RolloutsPage,
    SequenceIdRequest,
    SequenceIdResponse,
    SequenceIdsRequest,
    SequenceIdsResponse,
    SpanPayload,
    SpansPage,
    StartAttemptRequest,
    UpdateAttemptRequest,
    UpdateRolloutRequest,
    UpdateWorkerRequest,
    WaitForRolloutsRequest,
    WorkersPage,
    _Request,
)
from agentlightning.types import (
    Attempt,
    AttemptedRollout,
    ResourcesUpdate,
    Rollout,
    Span,
    Worker,
)

__all__ = [
    "API_PREFIX",
    "CLIENT_DERIVED_METHODS",
    "CLIENT_LOCAL_MEMBERS",
    "OPERATIONS",
    "OPERATIONS_BY_NAME",
    "Operation",
]

API_PREFIX = "/v1/agl"

_PATH_PARAM = re.compile(r"{(\w+)}")


@dataclass(frozen=True)
class Operation:
    """One store method on the wire."""

    name: str
    """The LightningStore method the server calls."""
    method: Literal["GET", "POST"]
    path: str
    """REST route under API_PREFIX; `{name}` segments are method arguments."""
    response: Any
    """Type of the response body."""
    idempotent: bool
    """True when repeating the request cannot change the outcome (reads, waits); writes are retried with an
    Idempotency-Key and replayed by the server."""
    body: Optional[type[BaseModel]] = None
    """Model of the JSON body; its fields are the remaining method arguments."""
    body_argument: Optional[str] = None
    """For a RootModel body: the method argument that receives the whole body."""
    status_code: int = 200
    query_route: Optional[str] = None
    """A GET route that takes the body fields as query parameters (searches)."""
    summary: str = ""
    paginated: bool = field(default=False)

    @property
    def path_params(self) -> tuple[str, ...]:
        return tuple(_PATH_PARAM.findall(self.path))

    @property
    def route(self) -> str:
        return API_PREFIX + self.path

    @property
    def ops_route(self) -> str:
        return f"{API_PREFIX}/ops/{self.name}"

    @cached_property
    def response_adapter(self) -> TypeAdapter[Any]:
        return TypeAdapter(self.response)

    @cached_property
    def ops_body(self) -> type[BaseModel]:
        """The body model of the `/ops/{name}` route: path ids plus the regular body."""
        if not self.path_params and self.body is not None and self.body_argument is None:
            return self.body
        fields: dict[str, Any] = {name: (str, ...) for name in self.path_params}
        if self.body is not None:
            if self.body_argument is not None:
                fields[self.body_argument] = (self.body, ...)
                return create_model(f"{_camel(self.name)}Call", __base__=_Request, **fields)
            return create_model(f"{_camel(self.name)}Call", __base__=self.body, **fields)
        return create_model(f"{_camel(self.name)}Call", __base__=_Request, **fields)


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


OPERATIONS: tuple[Operation, ...] = (
    Operation("statistics", "GET", "/statistics", dict[str, Any], idempotent=True, summary="Counts of stored entities"),
    Operation(
        "enqueue_many_rollouts",
        "POST",
        "/queues/rollouts/enqueue",
        list[Rollout],
        idempotent=False,
        body=EnqueueRolloutsRequest,
        status_code=201,
        summary="Enqueue rollouts in order (also used for a single rollout)",
    ),
    Operation(
        "dequeue_many_rollouts",
        "POST",
        "/queues/rollouts/dequeue",
        list[AttemptedRollout],
        idempotent=False,
        body=DequeueRolloutsRequest,
        summary="Claim up to `limit` queued rollouts",
    ),
    Operation(
        "start_rollout",
        "POST",
        "/rollouts",
        AttemptedRollout,
        idempotent=False,
        body=RolloutRequest,
        status_code=201,
        summary="Create a rollout that bypasses the queue",
    ),
    Operation(
        "query_rollouts",
        "POST",
        "/rollouts/search",
        RolloutsPage,
        idempotent=True,
        body=QueryRolloutsRequest,
        query_route="/rollouts",
        paginated=True,
        summary="Search rollouts",
    ),
    Operation(
        "get_rollout_by_id",
        "GET",
        "/rollouts/{rollout_id}",
        Optional[RolloutOrAttempted],
        idempotent=True,
        summary="One rollout, or null",
    ),
    Operation(
        "update_rollout",
        "POST",
        "/rollouts/{rollout_id}",
        RolloutOrAttempted,
        idempotent=False,
        body=UpdateRolloutRequest,
        summary="Update the given fields of a rollout",
    ),
    Operation(
        "wait_for_rollouts",
        "POST",
        "/waits/rollouts",
        list[RolloutOrAttempted],
        idempotent=True,
        body=WaitForRolloutsRequest,
        summary="Long poll until the rollouts finish or the (capped) timeout passes",
    ),
    Operation(
        "start_attempt",
        "POST",
        "/rollouts/{rollout_id}/attempts",
        AttemptedRollout,
        idempotent=False,
        body=StartAttemptRequest,
        status_code=201,
        summary="Start a new attempt of a rollout",
    ),
    Operation(
        "query_attempts",
        "POST",
        "/rollouts/{rollout_id}/attempts/search",
        AttemptsPage,
        idempotent=True,
        body=QueryAttemptsRequest,
        query_route="/rollouts/{rollout_id}/attempts",
        paginated=True,
        summary="Attempts of a rollout",
    ),
    Operation(
        "get_latest_attempt",
        "GET",
        "/rollouts/{rollout_id}/attempts/latest",
        Optional[Attempt],
        idempotent=True,
        summary="The latest attempt of a rollout, or null",
    ),
    Operation(
        "update_attempt",
        "POST",
        "/rollouts/{rollout_id}/attempts/{attempt_id}",
        Attempt,
        idempotent=False,
        body=UpdateAttemptRequest,
        summary='Update an attempt ("latest" targets the latest one)',
    ),
    Operation(
        "add_span",
        "POST",
        "/spans",
        Optional[Span],
        idempotent=False,
        body=SpanPayload,
        body_argument="span",
        status_code=201,
        summary="Store one span (null for a duplicate); the server allocates a missing sequence_id",
    ),
    Operation(
        "add_many_spans",
        "POST",
        "/spans/batch",
        list[Span],
        idempotent=False,
        body=AddSpansRequest,
        summary="Store a batch of spans in one operation; returns those added",
    ),
    Operation(
        "get_next_span_sequence_id",
        "POST",
        "/spans/next",
        SequenceIdResponse,
        idempotent=False,
        body=SequenceIdRequest,
        summary="Allocate the next span sequence id of a rollout",
    ),
    Operation(
        "get_many_span_sequence_ids",
        "POST",
        "/spans/next/batch",
        SequenceIdsResponse,
        idempotent=False,
        body=SequenceIdsRequest,
        summary="Allocate one sequence id per (rollout_id, attempt_id) pair",
    ),
    Operation(
        "query_spans",
        "POST",
        "/spans/search",
        SpansPage,
        idempotent=True,
        body=QuerySpansRequest,
        query_route="/spans",
        paginated=True,
        summary="Spans of a rollout",
    ),
    Operation(
        "add_resources",
        "POST",
        "/resources",
        ResourcesUpdate,
        idempotent=False,
        body=ResourcesBody,
        body_argument="resources",
        status_code=201,
        summary="Store a new resources snapshot",
    ),
    Operation(
        "get_latest_resources",
        "GET",
        "/resources/latest",
        Optional[ResourcesUpdate],
        idempotent=True,
        summary="The latest resources snapshot, or null",
    ),
    Operation(
        "query_resources",
        "POST",
        "/resources/search",
        ResourcesPage,
        idempotent=True,
        body=QueryResourcesRequest,
        query_route="/resources",
        paginated=True,
        summary="Search resources snapshots",
    ),
    Operation(
        "get_resources_by_id",
        "GET",
        "/resources/{resources_id}",
        Optional[ResourcesUpdate],
        idempotent=True,
        summary="One resources snapshot, or null",
    ),
    Operation(
        "update_resources",
        "POST",
        "/resources/{resources_id}",
        ResourcesUpdate,
        idempotent=False,
        body=ResourcesBody,
        body_argument="resources",
        summary="Create or replace a resources snapshot",
    ),
    Operation(
        "query_workers",
        "POST",
        "/workers/search",
        WorkersPage,
        idempotent=True,
        body=QueryWorkersRequest,
        query_route="/workers",
        paginated=True,
        summary="Search workers",
    ),
    Operation(
        "get_worker_by_id",
        "GET",
        "/workers/{worker_id}",
        Optional[Worker],
        idempotent=True,
        summary="One worker, or null",
    ),
    Operation(
        "update_worker",
        "POST",
        "/workers/{worker_id}",
        Worker,
        idempotent=False,
        body=UpdateWorkerRequest,
        summary="Record a worker heartbeat",
    ),
)

OPERATIONS_BY_NAME: dict[str, Operation] = {op.name: op for op in OPERATIONS}

CLIENT_DERIVED_METHODS: dict[str, str] = {
    "enqueue_rollout": "enqueue_many_rollouts",
    "dequeue_rollout": "dequeue_many_rollouts",
    "add_otel_span": "add_span",
}
"""Contract methods the client implements with another operation (one request each)."""

CLIENT_LOCAL_MEMBERS: frozenset[str] = frozenset({"capabilities", "close", "is_remote", "otlp_traces_endpoint"})
"""Contract members the client answers without a request."""

RESERVED_SEGMENTS: dict[str, frozenset[str]] = {}
"""Per operation: path ids that a literal route of the same shape would capture (filled below)."""


def _shadowing_words(path: str, other: str) -> set[str]:
    """Literal segments of `other` that a request meant for `path` would hit instead when an id equals them."""
    mine, theirs = path.split("/"), other.split("/")
    if len(mine) != len(theirs):
        return set()
    words: set[str] = set()
    for segment, their_segment in zip(mine, theirs, strict=False):
        if segment.startswith("{"):
            if not their_segment.startswith("{"):
                words.add(their_segment)
        elif segment != their_segment and not their_segment.startswith("{"):
            return set()
    return words


def _reserved_segments() -> None:
    routes = [(op.method, op.path) for op in OPERATIONS]
    routes += [("GET", op.query_route) for op in OPERATIONS if op.query_route is not None]
    for op in OPERATIONS:
        if op.path_params:
            words: set[str] = {".", ".."}
            for method, route in routes:
                if method == op.method and route != op.path:
                    words |= _shadowing_words(op.path, route)
            RESERVED_SEGMENTS[op.name] = frozenset(words)


_reserved_segments()
