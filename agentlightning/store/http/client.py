"""`LightningStoreClient`: the whole LightningStore contract over HTTP.

Every method is one request built from the operations table. Store errors come back as the same typed
exceptions with the same messages; returned values have the same types as a direct store's. Writes carry an
Idempotency-Key, so the retries of connection failures and 502/503/504 answers never apply a write twice.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Optional, Union
from urllib.parse import quote

from pydantic_core import PydanticSerializationError, from_json, to_json

from agentlightning.store.base import (
    UNSET,
    LightningStore,
    LightningStoreCapabilities,
    LightningStoreStatistics,
    Unset,
)
from agentlightning.store.validation import check_id, check_timeout
from agentlightning.types import (
    Attempt,
    AttemptedRollout,
    EnqueueRolloutRequest,
    NamedResources,
    ResourcesUpdate,
    Rollout,
    RolloutConfig,
    RolloutMode,
    Span,
    TaskInput,
    Worker,
)

from .errors import InvalidArgumentTypeError, StoreConnectionError, StoreHTTPError, error_from_response
from .operations import API_PREFIX, OPERATIONS_BY_NAME, RESERVED_SEGMENTS, Operation
from .retry import RETRYABLE_STATUSES, FixedDelays, RetryPolicy
from .sessions import SessionPool

if TYPE_CHECKING:
    import aiohttp
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["API_KEY_ENV", "LightningStoreClient"]

logger = logging.getLogger(__name__)

API_KEY_ENV = "AGL_STORE_API_KEY"
_SAFE_SEGMENT = re.compile(r"^[A-Za-z0-9._~:@!$&'()*+,;=-]+$")
_DEFAULT_WAIT_SLICE = 5.0


class LightningStoreClient(LightningStore):
    """A LightningStore served by a LightningStoreServer at `server_address` (e.g. "http://127.0.0.1:4747").

    Args:
        server_address: base URL of the server (a trailing "/" is ignored).
        retry_delays: explicit waits before each retry (the 0.2 behaviour); `()` disables retries. By default the
            client follows `retry_policy` (exponential backoff with jitter).
        health_retry_delays: when given, the client probes `/v1/agl/health` after a failed try, waiting these
            delays between probes, and gives up at once if the server never answers (the 0.2 behaviour).
        request_timeout: seconds to wait for an answer (long polls add their own wait to it).
        connection_timeout: seconds to establish a connection.
        api_key: bearer token; defaults to the AGL_STORE_API_KEY environment variable.
        retry_policy: backoff used when `retry_delays` is not given.
        wait_slice_seconds: longest single long-poll request of `wait_for_rollouts`.
    """

    def __init__(
        self,
        server_address: str,
        *,
        retry_delays: Optional[Sequence[float]] = None,
        health_retry_delays: Sequence[float] = (),
        request_timeout: float = 30.0,
        connection_timeout: float = 5.0,
        api_key: Optional[str] = None,
        retry_policy: Optional[RetryPolicy] = None,
        wait_slice_seconds: float = _DEFAULT_WAIT_SLICE,
    ) -> None:
        if not isinstance(server_address, str) or not server_address.startswith(("http://", "https://")):
            raise ValueError(f"server_address must be an http:// or https:// URL, got {server_address!r}")
        if request_timeout <= 0 or connection_timeout <= 0 or wait_slice_seconds <= 0:
            raise ValueError("request_timeout, connection_timeout and wait_slice_seconds must be positive")
        self.server_address = server_address.rstrip("/")
        self._retry_delays: Optional[tuple[float, ...]] = None
        if retry_delays is not None:
            self._retry_delays = tuple(float(delay) for delay in retry_delays)
        self._health_retry_delays = tuple(float(delay) for delay in health_retry_delays)
        self._retries: Union[RetryPolicy, FixedDelays] = (
            RetryPolicy.fixed(self._retry_delays) if self._retry_delays is not None else retry_policy or RetryPolicy()
        )
        self._request_timeout = float(request_timeout)
        self._connection_timeout = float(connection_timeout)
        self._api_key = api_key if api_key is not None else os.environ.get(API_KEY_ENV) or None
        self._wait_slice = float(wait_slice_seconds)
        self._pool = SessionPool(self._new_session)
        self._reached_server = False

    # --------------------------------------------------------------------------------------------- plumbing
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_pool"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._pool = SessionPool(self._new_session)

    def _new_session(self) -> aiohttp.ClientSession:
        import aiohttp

        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return aiohttp.ClientSession(
            headers=headers,
            timeout=aiohttp.ClientTimeout(
                total=None, connect=self._connection_timeout, sock_read=self._request_timeout
            ),
            connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=30.0),
            raise_for_status=False,
        )

    @property
    def capabilities(self) -> LightningStoreCapabilities:
        return LightningStoreCapabilities(thread_safe=True, async_safe=True, zero_copy=False, otlp_traces=True)

    def otlp_traces_endpoint(self) -> str:
        return f"{self.server_address}/v1/traces"

    async def close(self) -> None:
        await self._pool.close()

    def _target(self, op: Operation, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The URL of a call and the arguments left for the body. Ids that cannot travel in a path segment make
        the call go to the operation's `/ops/{name}` route with every argument in the body."""
        ids = {name: check_id(args[name], name) for name in op.path_params}
        reserved = RESERVED_SEGMENTS.get(op.name, frozenset())
        if any(value in reserved or not _SAFE_SEGMENT.match(value) for value in ids.values()):
            return self.server_address + op.ops_route, args
        path = op.path.format(**{name: quote(value, safe="") for name, value in ids.items()})
        rest = {name: value for name, value in args.items() if name not in ids}
        return self.server_address + API_PREFIX + path, rest

    def _encode(self, op: Operation, body: Any) -> bytes:
        try:
            return to_json(body, inf_nan_mode="constants")
        except PydanticSerializationError as exc:
            raise InvalidArgumentTypeError(f"The arguments of {op.name} cannot be sent as JSON: {exc}") from None

    async def _call(self, operation: str, /, *, _wait: float = 0.0, **arguments: Any) -> Any:
        """Run one operation remotely and decode its answer. UNSET arguments are left out."""
        op = OPERATIONS_BY_NAME[operation]
        args = {key: value for key, value in arguments.items() if not isinstance(value, Unset)}
        url, rest = self._target(op, args)
        method = op.method
        data: Optional[bytes] = None
        if url.endswith(op.ops_route):
            method, data = "POST", self._encode(op, rest)
        elif op.body is not None:
            data = self._encode(op, rest[op.body_argument] if op.body_argument else rest)
        payload = await self._request(op, method, url, data, extra_timeout=_wait)
        return op.response_adapter.validate_json(payload)

    async def _request(
        self, op: Operation, method: str, url: str, data: Optional[bytes], *, extra_timeout: float = 0.0
    ) -> bytes:
        """Send a request, retrying connection failures and 502/503/504; the body of the 2xx answer."""
        import aiohttp

        headers = {} if op.idempotent else {"Idempotency-Key": uuid.uuid4().hex}
        options: dict[str, Any] = {"headers": headers, "data": data}
        if extra_timeout:
            options["timeout"] = aiohttp.ClientTimeout(
                total=None, connect=self._connection_timeout, sock_read=self._request_timeout + extra_timeout
            )
        delays: Optional[list[float]] = None  # drawn on the first failure only
        failure: Optional[BaseException] = None
        attempt = -1
        while True:
            attempt += 1
            if attempt:
                if delays is None:
                    delays = self._retries.delays()
                if attempt > len(delays):
                    break
                await asyncio.sleep(delays[attempt - 1])
                if self._health_retry_delays and not await self._wait_until_healthy():
                    break
            try:
                session = await self._pool.get()
                async with session.request(method, url, **options) as response:
                    body = await response.read()
                    status = response.status
            except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, asyncio.TimeoutError) as exc:
                failure = exc
                logger.debug("%s %s failed (try %d): %r", method, url, attempt + 1, exc)
                continue
            self._reached_server = True
            if status < 300:
                return body
            error = error_from_response(status, _decode_error(body))
            if status not in RETRYABLE_STATUSES:
                raise error
            failure = error
            logger.debug("%s %s answered %d (try %d)", method, url, status, attempt + 1)
        if isinstance(failure, StoreHTTPError):
            raise failure
        raise StoreConnectionError(
            f"Cannot reach the LightningStore server at {self.server_address} ({op.name}): {failure!r}"
        ) from failure

    async def _wait_until_healthy(self) -> bool:
        """Probe the health route with the 0.2 `health_retry_delays`; False if it never answers 200."""
        for delay in (*self._health_retry_delays, 0.0):
            try:
                session = await self._pool.get()
                async with session.get(f"{self.server_address}{API_PREFIX}/health") as response:
                    if response.status == 200:
                        return True
            except Exception as exc:
                logger.debug("health probe failed: %r", exc)
            if delay > 0:
                await asyncio.sleep(delay)
        return False

    # --------------------------------------------------------------------------------------------- rollouts
    async def statistics(self) -> LightningStoreStatistics:
        return await self._call("statistics")

    async def start_rollout(
        self,
        input: TaskInput,
        mode: Optional[RolloutMode] = None,
        resources_id: Optional[str] = None,
        config: Optional[RolloutConfig] = None,
        metadata: Optional[dict[str, Any]] = None,
        worker_id: Optional[str] = None,
    ) -> AttemptedRollout:
        return await self._call(
            "start_rollout",
            input=input,
            mode=mode,
            resources_id=resources_id,
            config=config,
            metadata=metadata,
            worker_id=worker_id,
        )

    async def enqueue_rollout(
        self,
        input: TaskInput,
        mode: Optional[RolloutMode] = None,
        resources_id: Optional[str] = None,
        config: Optional[RolloutConfig] = None,
        metadata: Optional[dict[str, Any]] = None,
    ) -> Rollout:
        request = {"input": input, "mode": mode, "resources_id": resources_id, "config": config, "metadata": metadata}
        return (await self._call("enqueue_many_rollouts", rollouts=[request]))[0]

    async def enqueue_many_rollouts(self, rollouts: Sequence[EnqueueRolloutRequest]) -> Sequence[Rollout]:
        if isinstance(rollouts, (str, bytes)) or not isinstance(rollouts, Sequence):
            raise InvalidArgumentTypeError(f"rollouts must be a list of EnqueueRolloutRequest, got {rollouts!r}")
        if not rollouts:
            return []
        return await self._call("enqueue_many_rollouts", rollouts=list(rollouts))

    async def dequeue_rollout(self, worker_id: Optional[str] = None) -> Optional[AttemptedRollout]:
        claimed = await self.dequeue_many_rollouts(limit=1, worker_id=worker_id)
        return claimed[0] if claimed else None

    async def dequeue_many_rollouts(
        self, *, limit: int = 1, worker_id: Optional[str] = None
    ) -> Sequence[AttemptedRollout]:
        if isinstance(limit, int) and not isinstance(limit, bool) and limit <= 0:
            return []
        try:
            return await self._call("dequeue_many_rollouts", limit=limit, worker_id=worker_id)
        except StoreConnectionError as exc:
            # A runner polls before the server is up: an unreachable server is an empty queue for it.
            level = logging.WARNING if self._reached_server else logging.DEBUG
            logger.log(level, "dequeue: the store server is not reachable (%s)", exc)
            return []

    async def start_attempt(self, rollout_id: str, worker_id: Optional[str] = None) -> AttemptedRollout:
        return await self._call("start_attempt", rollout_id=rollout_id, worker_id=worker_id)

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
        filters = {
            "status_in": status_in,
            "rollout_id_in": rollout_id_in,
            "rollout_id_contains": rollout_id_contains,
            "status": status,
            "rollout_ids": rollout_ids,
        }
        return await self._call(
            "query_rollouts",
            **{key: value for key, value in filters.items() if value is not None},
            filter_logic=filter_logic,
            sort_by=sort_by,
            sort_order=sort_order,
            limit=limit,
            offset=offset,
        )

    async def get_rollout_by_id(self, rollout_id: str) -> Optional[Rollout]:
        return await self._call("get_rollout_by_id", rollout_id=rollout_id)

    async def update_rollout(
        self,
        rollout_id: str,
        input: Union[TaskInput, Unset] = UNSET,
        mode: Union[Optional[RolloutMode], Unset] = UNSET,
        resources_id: Union[Optional[str], Unset] = UNSET,
        status: Union[Any, Unset] = UNSET,
        config: Union[RolloutConfig, Unset] = UNSET,
        metadata: Union[Optional[dict[str, Any]], Unset] = UNSET,
    ) -> Rollout:
        return await self._call(
            "update_rollout",
            rollout_id=rollout_id,
            input=input,
            mode=mode,
            resources_id=resources_id,
            status=status,
            config=config,
            metadata=metadata,
        )

    async def wait_for_rollouts(self, *, rollout_ids: list[str], timeout: Optional[float] = None) -> list[Rollout]:
        """Long-polls the server in slices of at most `wait_slice_seconds` until every known rollout finished or
        `timeout` passed (None waits forever). Cancelling the caller cancels the wait on the server too."""
        timeout = check_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        pending = list(dict.fromkeys(rollout_ids)) if isinstance(rollout_ids, (list, tuple)) else rollout_ids
        finished: dict[str, Rollout] = {}
        checked_known = False
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            wait = self._wait_slice if remaining is None else min(self._wait_slice, remaining)
            done: list[Rollout] = await self._call("wait_for_rollouts", _wait=wait, rollout_ids=pending, timeout=wait)
            finished.update((rollout.rollout_id, rollout) for rollout in done)
            pending = [rollout_id for rollout_id in pending if rollout_id not in finished]
            if not pending or (deadline is not None and time.monotonic() >= deadline):
                break
            if not checked_known:
                # Unknown ids are ignored, as by a direct store: find them once, then stop waiting for them.
                checked_known = True
                known = await self.query_rollouts(rollout_id_in=pending)
                known_ids = {rollout.rollout_id for rollout in known}
                pending = [rollout_id for rollout_id in pending if rollout_id in known_ids]
                if not pending:
                    break
        return [finished[rollout_id] for rollout_id in rollout_ids if rollout_id in finished]

    # --------------------------------------------------------------------------------------------- attempts
    async def query_attempts(
        self,
        rollout_id: str,
        *,
        sort_by: Optional[str] = "sequence_id",
        sort_order: Literal["asc", "desc"] = "asc",
        limit: int = -1,
        offset: int = 0,
    ) -> Sequence[Attempt]:
        return await self._call(
            "query_attempts", rollout_id=rollout_id, sort_by=sort_by, sort_order=sort_order, limit=limit, offset=offset
        )

    async def get_latest_attempt(self, rollout_id: str) -> Optional[Attempt]:
        return await self._call("get_latest_attempt", rollout_id=rollout_id)

    async def update_attempt(
        self,
        rollout_id: str,
        attempt_id: Union[str, Literal["latest"]],
        status: Union[Any, Unset] = UNSET,
        worker_id: Union[str, Unset] = UNSET,
        last_heartbeat_time: Union[float, Unset] = UNSET,
        metadata: Union[Optional[dict[str, Any]], Unset] = UNSET,
    ) -> Attempt:
        return await self._call(
            "update_attempt",
            rollout_id=rollout_id,
            attempt_id=attempt_id,
            status=status,
            worker_id=worker_id,
            last_heartbeat_time=last_heartbeat_time,
            metadata=metadata,
        )

    # ------------------------------------------------------------------------------------------------ spans
    async def add_span(self, span: Span) -> Optional[Span]:
        return await self._call("add_span", span=span)

    async def add_many_spans(self, spans: Sequence[Span]) -> Sequence[Span]:
        if isinstance(spans, (str, bytes)) or not isinstance(spans, Sequence):
            raise InvalidArgumentTypeError(f"spans must be a list of Span, got {type(spans).__name__}")
        if not spans:
            return []
        return await self._call("add_many_spans", spans=list(spans))

    async def add_otel_span(
        self,
        rollout_id: str,
        attempt_id: str,
        readable_span: ReadableSpan,
        sequence_id: Optional[int] = None,
    ) -> Optional[Span]:
        """Converts the span here and stores it in one request; the server allocates a missing sequence id."""
        rollout_id = check_id(rollout_id, "rollout_id")
        attempt_id = check_id(attempt_id, "attempt_id")
        if sequence_id is not None and (isinstance(sequence_id, bool) or not isinstance(sequence_id, int)):
            raise InvalidArgumentTypeError(f"sequence_id must be an integer, got {sequence_id!r}")
        span = Span.from_opentelemetry(
            readable_span, rollout_id=rollout_id, attempt_id=attempt_id, sequence_id=sequence_id or 0
        )
        payload: Any = span if sequence_id is not None else span.model_dump(exclude={"sequence_id"})
        return await self._call("add_span", span=payload)

    async def get_next_span_sequence_id(self, rollout_id: str, attempt_id: str) -> int:
        return (await self._call("get_next_span_sequence_id", rollout_id=rollout_id, attempt_id=attempt_id)).sequence_id

    async def get_many_span_sequence_ids(self, rollout_attempt_ids: Sequence[tuple[str, str]]) -> Sequence[int]:
        if not rollout_attempt_ids:
            return []
        pairs = [list(pair) if isinstance(pair, tuple) else pair for pair in rollout_attempt_ids]
        return (await self._call("get_many_span_sequence_ids", rollout_attempt_ids=pairs)).sequence_ids

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
        filters = {
            "trace_id": trace_id,
            "trace_id_contains": trace_id_contains,
            "span_id": span_id,
            "span_id_contains": span_id_contains,
            "parent_id": parent_id,
            "parent_id_contains": parent_id_contains,
            "name": name,
            "name_contains": name_contains,
        }
        arguments: dict[str, Any] = {key: value for key, value in filters.items() if value is not None}
        arguments.update(filter_logic=filter_logic, limit=limit, offset=offset, sort_by=sort_by, sort_order=sort_order)
        return await self._call("query_spans", rollout_id=rollout_id, attempt_id=attempt_id, **arguments)

    # -------------------------------------------------------------------------------------------- resources
    async def add_resources(self, resources: NamedResources) -> ResourcesUpdate:
        return await self._call("add_resources", resources=resources)

    async def update_resources(self, resources_id: str, resources: NamedResources) -> ResourcesUpdate:
        return await self._call("update_resources", resources_id=resources_id, resources=resources)

    async def get_resources_by_id(self, resources_id: str) -> Optional[ResourcesUpdate]:
        return await self._call("get_resources_by_id", resources_id=resources_id)

    async def get_latest_resources(self) -> Optional[ResourcesUpdate]:
        return await self._call("get_latest_resources")

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
        return await self._call(
            "query_resources",
            resources_id=resources_id,
            resources_id_contains=resources_id_contains,
            sort_by=sort_by,
            sort_order=sort_order,
            limit=limit,
            offset=offset,
        )

    # ---------------------------------------------------------------------------------------------- workers
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
        return await self._call(
            "query_workers",
            status_in=status_in,
            worker_id_contains=worker_id_contains,
            filter_logic=filter_logic,
            sort_by=sort_by,
            sort_order=sort_order,
            limit=limit,
            offset=offset,
        )

    async def get_worker_by_id(self, worker_id: str) -> Optional[Worker]:
        return await self._call("get_worker_by_id", worker_id=worker_id)

    async def update_worker(self, worker_id: str, heartbeat_stats: Union[dict[str, Any], Unset] = UNSET) -> Worker:
        return await self._call("update_worker", worker_id=worker_id, heartbeat_stats=heartbeat_stats)


def _decode_error(body: bytes) -> Any:
    try:
        return from_json(body)
    except ValueError:
        return body.decode("utf-8", "replace")[:500]
