"""Server side of one operation: parse the request once, call the store, serialise the answer or the error."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import typing
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Optional
from urllib.parse import parse_qs

from pydantic import BaseModel, RootModel, ValidationError
from pydantic_core import PydanticSerializationError, to_json
from starlette.responses import Response

from agentlightning.store.base import LightningStore
from agentlightning.store.core.grouping import RiderConflict, riding
from agentlightning.store.http.errors import (
    error_context,
    error_status,
    retry_after_seconds,
    validation_error_to_store_error,
)
from agentlightning.store.http.models import PydanticUnset, SpanPayload
from agentlightning.store.http.operations import Operation
from agentlightning.store.http.server.bodies import BodyError, read_body
from agentlightning.store.http.server.claims import ClaimLedger
from agentlightning.store.http.server.faults import kill_after_commit_if_asked
from agentlightning.store.http.server.idempotency import CachedResponse, IdempotencyConflict, IdempotencyRecords
from agentlightning.store.http.server.shared_idempotency import SharedIdempotencyRecords
from agentlightning.types import PaginatedResult, Span

__all__ = [
    "JSON",
    "OperationHandler",
    "ServerLimits",
    "ShutdownSignal",
    "error_answer",
    "error_body",
    "json_response",
]

logger = logging.getLogger(__name__)

JSON = "application/json"
MAX_IDEMPOTENCY_KEY_LENGTH = 255

#: The operations whose answer is recorded in the transaction of their write (a database store): what they return,
#: from the outcome of their grouped write (`core/shared.py`: the rollouts one enqueue call created). The client's
#: `enqueue_rollout` is an `enqueue_many_rollouts` request.
_ANSWERED_WITH_THE_WRITE: dict[str, Callable[[Any], Any]] = {"enqueue_many_rollouts": list}


@dataclass(frozen=True)
class ServerLimits:
    max_body_bytes: int = 32 * 1024**2
    body_timeout_seconds: float = 30.0
    max_wait_seconds: float = 10.0


def error_body(status: int, error_type: str, detail: str, **extra: Any) -> bytes:
    payload: dict[str, Any] = {"detail": detail, "error_type": error_type}
    payload.update({key: value for key, value in extra.items() if value is not None})
    return to_json(payload, fallback=repr, bytes_mode="base64")


def error_answer(exc: Exception, what: str) -> tuple[int, bytes]:
    """(status, JSON body) for an exception raised while serving `what`: a store error gets its status (503 or 507
    for a database that cannot serve now), anything else is a 500 logged with its traceback."""
    status = error_status(exc)
    if status is None:
        logger.error("Unexpected error in %s", what, exc_info=exc)
        return 500, error_body(500, type(exc).__name__, "Internal server error")
    detail = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    return status, error_body(status, type(exc).__name__, detail, context=error_context(exc))


def json_response(status: int, body: bytes, headers: Optional[dict[str, str]] = None) -> Response:
    return Response(content=body, status_code=status, media_type=JSON, headers=headers)


class ShutdownSignal:
    """Tells long polls that the server is stopping; `trigger()` may be called from any thread."""

    def __init__(self) -> None:
        self._event: Optional[asyncio.Event] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._triggered = False

    def _ensure(self) -> asyncio.Event:
        if self._event is None:
            self._event = asyncio.Event()
            self._loop = asyncio.get_running_loop()
            if self._triggered:
                self._event.set()
        return self._event

    async def wait(self) -> None:
        await self._ensure().wait()

    def reset(self) -> None:
        """Arm the signal again (a server that is started again after a stop)."""
        self._event, self._loop, self._triggered = None, None, False

    def trigger(self) -> None:
        self._triggered = True
        if self._event is not None and self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._event.set)


class _ClientGone(Exception):
    """The client disconnected while the server waited for it."""


def _unwrap(value: Any) -> Any:
    return value.root if isinstance(value, RootModel) else value


def _list_fields(model: type[BaseModel]) -> frozenset[str]:
    names = set()
    for name, info in model.model_fields.items():
        annotation = info.annotation
        candidates = typing.get_args(annotation) if typing.get_origin(annotation) is typing.Union else (annotation,)
        if any(typing.get_origin(candidate) in (list, tuple, Sequence) for candidate in candidates):
            names.add(name)
    return frozenset(names)


def _carries_spans(model: type[BaseModel]) -> bool:
    return any("SpanPayload" in str(info.annotation) for info in model.model_fields.values())


def _explicit_nulls(exc: ValidationError) -> list[str]:
    """The top-level fields sent as JSON null that cannot be null, when they are all that is wrong."""
    names: list[str] = []
    for error in exc.errors(include_url=False, include_context=False):
        loc = error.get("loc", ())
        if len(loc) != 1 or error.get("input", ...) is not None or error.get("type") == "missing":
            return []
        if str(loc[0]) not in names:
            names.append(str(loc[0]))
    return names


def _to_span(payload: SpanPayload, sequence_id: int) -> Span:
    values = dict(payload.__dict__)
    values["sequence_id"] = sequence_id
    values.update(payload.__pydantic_extra__ or {})
    return Span.model_construct(_fields_set=set(payload.model_fields_set) | {"sequence_id"}, **values)


class _Endpoint:
    """A raw ASGI endpoint (Starlette routes call class instances directly, without building a Request)."""

    def __init__(self, handler: OperationHandler, kind: str) -> None:
        self._handler = handler
        self._kind = kind

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            status, body, headers = await self._handler.handle(scope, receive, self._kind)
        except Exception as exc:  # never a bare 500 from the ASGI server, even for a failure on the error path
            status, body = error_answer(exc, self._handler.op.name)
            headers = {}
        retry_after = retry_after_seconds(status)
        if retry_after is not None:
            headers = {**headers, "retry-after": str(retry_after)}
        raw_headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        raw_headers.extend((key.encode(), value.encode()) for key, value in headers.items())
        await send({"type": "http.response.start", "status": status, "headers": raw_headers})
        await send({"type": "http.response.body", "body": body})


class OperationHandler:
    """The ASGI endpoints of one operation: its REST route, its GET search alias and its `/ops/{name}` route."""

    def __init__(
        self,
        op: Operation,
        store: LightningStore,
        limits: ServerLimits,
        idempotency: Optional[IdempotencyRecords],
        shutdown: Optional[ShutdownSignal] = None,
        claims: Optional[ClaimLedger] = None,
    ) -> None:
        self.op = op
        self.claims = claims
        self.store = store
        self.limits = limits
        self.idempotency = idempotency
        self.shutdown = shutdown or ShutdownSignal()
        self._query_lists = _list_fields(op.body) if op.body is not None and op.query_route else frozenset()
        # Unknown fields are rejected at every depth, except in spans (their extra fields are kept, as in 0.2).
        self._extra: Optional[Literal["forbid"]] = None if _carries_spans(op.ops_body) else "forbid"
        self._call: Callable[[dict[str, Any], Any], Awaitable[Any]] = getattr(
            self, f"_call_{op.name}", self._call_store
        )
        self.rest = _Endpoint(self, "rest")
        self.query = _Endpoint(self, "query")
        self.ops = _Endpoint(self, "ops")

    # -------------------------------------------------------------------------------------------------- parsing
    def _arguments(self, model: BaseModel) -> dict[str, Any]:
        return {
            name: _unwrap(getattr(model, name))
            for name in model.model_fields_set
            if not isinstance(getattr(model, name), PydanticUnset)
        }

    def _parse(self, kind: str, scope: dict[str, Any], body: bytes) -> dict[str, Any]:
        op = self.op
        path_params: dict[str, Any] = scope.get("path_params", {})
        if kind == "ops":
            return self._arguments(op.ops_body.model_validate_json(body or b"{}", strict=True, extra=self._extra))
        if kind == "query":
            if body.strip():
                raise BodyError(400, "InvalidArgumentError", f"GET {scope['path']} takes no request body")
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
            data: dict[str, Any] = {
                key: values if key in self._query_lists else values[-1] for key, values in query.items()
            }
            data.update(path_params)
            return self._arguments(op.ops_body.model_validate(data, extra=self._extra))
        args: dict[str, Any] = {}
        if op.body is not None:
            if op.body_argument is not None:
                args[op.body_argument] = _unwrap(op.body.model_validate_json(body, strict=True, extra=self._extra))
            else:
                args.update(self._arguments(op.body.model_validate_json(body or b"{}", strict=True, extra=self._extra)))
        elif body.strip():
            raise BodyError(400, "InvalidArgumentError", f"{op.method} {scope['path']} takes no request body")
        args.update(path_params)
        return args

    # ------------------------------------------------------------------------------------------------- handling
    async def handle(self, scope: dict[str, Any], receive: Any, kind: str) -> tuple[int, bytes, dict[str, str]]:
        """(status, JSON body, extra headers) of one request."""
        scope["agl.operation"] = self.op.name
        headers = {key.decode("latin-1"): value.decode("latin-1") for key, value in scope["headers"]}
        try:
            body = await read_body(
                receive,
                headers,
                max_bytes=self.limits.max_body_bytes,
                timeout_seconds=self.limits.body_timeout_seconds,
            )
            args = self._parse(kind, scope, body)
        except BodyError as exc:
            return exc.status, error_body(exc.status, exc.error_type, exc.detail), {}
        except ValidationError as exc:
            prefix = (self.op.body_argument,) if self.op.body_argument and kind == "rest" else ()
            nulls = _explicit_nulls(exc)
            if nulls:
                detail = f"{', '.join(nulls)} cannot be null (leave the field out to keep its current value)"
                return 400, error_body(400, "InvalidArgumentTypeError", detail), {}
            error = validation_error_to_store_error(exc, prefix)
            errors = exc.errors(include_url=False, include_context=False, include_input=False)
            return 422, error_body(422, type(error).__name__, str(error), errors=errors), {}
        key = headers.get("idempotency-key")
        if key is not None and not 0 < len(key) <= MAX_IDEMPOTENCY_KEY_LENGTH:
            detail = f"Idempotency-Key must have 1 to {MAX_IDEMPOTENCY_KEY_LENGTH} characters"
            return 400, error_body(400, "InvalidArgumentError", detail), {}
        if key is None or self.op.idempotent or self.idempotency is None:
            status, payload = await self._execute(args, receive)
            return status, payload, {}
        digest = hashlib.blake2b(body, digest_size=16).hexdigest()  # stable across the processes sharing records
        return await self._execute_once(key, (self.op.name, scope["path"], digest), args, receive)

    async def _execute_once(
        self, key: str, fingerprint: tuple[str, str, str], args: dict[str, Any], receive: Any
    ) -> tuple[int, bytes, dict[str, str]]:
        cache = self.idempotency
        assert cache is not None
        try:
            if isinstance(cache, SharedIdempotencyRecords):
                answered = await self._execute_riding(cache, key, fingerprint, args, receive)
                if answered is not None:
                    return answered
            try:
                cached = await cache.begin(key, fingerprint)
            except IdempotencyConflict as exc:
                return 422, error_body(422, "IdempotencyKeyConflict", str(exc)), {}
            if cached is not None:
                return cached.status, cached.body, {"idempotent-replayed": "true"}
            try:
                status, payload = await self._execute(args, receive)
            except BaseException:
                await asyncio.shield(cache.forget(key))
                raise
            if status >= 500:
                await cache.forget(key)
            else:
                await cache.complete(key, CachedResponse(status, payload))
            return status, payload, {}
        except Exception as exc:  # the records' own database failed (an outage): answer as the operation would
            status, payload = error_answer(exc, self.op.name)
            return status, payload, {}

    async def _execute_riding(
        self,
        cache: SharedIdempotencyRecords,
        key: str,
        fingerprint: tuple[str, str, str],
        args: dict[str, Any],
        receive: Any,
    ) -> Optional[tuple[int, bytes, dict[str, str]]]:
        """The common case, a fresh key: its record is written in the operation's own transaction (with its answer,
        for an enqueue). None when the key is in use (nothing was written): the caller replays or waits."""
        answer = self._answer_of_outcome if self.op.name in _ANSWERED_WITH_THE_WRITE else None
        rider = await cache.rider(key, fingerprint, answer)
        try:
            with riding(rider):
                status, payload = await self._execute(args, receive)
        except RiderConflict:
            return None
        except BaseException:
            await asyncio.shield(cache.forget_rider(rider))
            raise
        kill_after_commit_if_asked(self.op.name)
        settled = cache.settled_answer(rider)
        if settled is not None:  # committed with the write: the answer a retry replays
            return settled.status, settled.body, {}
        if status >= 500:
            await cache.forget_rider(rider)  # a record that did not commit (an outage) needs no removal
        else:
            await cache.complete(key, CachedResponse(status, payload), fingerprint)
        return status, payload, {}

    def _answer_of_outcome(self, outcome: Any) -> Optional[CachedResponse]:
        """The answer to the outcome of this operation's grouped write, or None to answer after the commit (an
        error: the write did not happen, so a retry may run it again)."""
        if isinstance(outcome, BaseException):
            return None
        try:
            result = _ANSWERED_WITH_THE_WRITE[self.op.name](outcome)
            return CachedResponse(self.op.status_code, to_json(result, inf_nan_mode="constants"))
        except Exception as exc:  # an outcome of another shape: answered after the commit, as other writes are
            logger.warning("Cannot record the answer of %s with its write: %s", self.op.name, exc)
            return None

    async def _execute(self, args: dict[str, Any], receive: Any) -> tuple[int, bytes]:
        """(status, JSON body) of running the operation; store errors become their 4xx answers."""
        op = self.op
        try:
            result = await self._call(args, receive)
            return op.status_code, to_json(result, inf_nan_mode="constants")
        except _ClientGone:
            return 499, b""
        except RiderConflict:
            raise  # the request's idempotency key is in use: `_execute_once` takes the slow path
        except PydanticSerializationError as exc:
            logger.error("Cannot serialise the result of %s: %s", op.name, exc)
            return 500, error_body(500, "SerializationError", f"The result of {op.name} is not JSON-serialisable")
        except Exception as exc:
            return error_answer(exc, op.name)

    # ------------------------------------------------------------------------------------------ store calls
    async def _call_store(self, args: dict[str, Any], receive: Any) -> Any:
        result = await getattr(self.store, self.op.name)(**args)
        if self.op.paginated and not isinstance(result, PaginatedResult):
            items = list(result)
            return PaginatedResult[Any].model_construct(items=items, limit=-1, offset=0, total=len(items))
        return result

    async def _call_dequeue_many_rollouts(self, args: dict[str, Any], receive: Any) -> Any:
        if self.claims is None:
            return await self._call_store(args, receive)
        await self.claims.sweep()  # claims nobody acknowledged go back to the queue first
        claimed = await self._call_store(args, receive)
        self.claims.record(claimed)
        return claimed

    async def _call_statistics(self, args: dict[str, Any], receive: Any) -> Any:
        return dict(await self.store.statistics())

    async def _call_add_span(self, args: dict[str, Any], receive: Any) -> Any:
        payload: SpanPayload = args["span"]
        sequence_id = payload.sequence_id
        if sequence_id is None:
            sequence_id = await self.store.get_next_span_sequence_id(payload.rollout_id, payload.attempt_id)
        return await self.store.add_span(_to_span(payload, sequence_id))

    async def _call_add_many_spans(self, args: dict[str, Any], receive: Any) -> Any:
        payloads: list[SpanPayload] = args["spans"]
        missing = [payload for payload in payloads if payload.sequence_id is None]
        allocated: dict[int, int] = {}
        if missing:
            ids = await self.store.get_many_span_sequence_ids(
                [(payload.rollout_id, payload.attempt_id) for payload in missing]
            )
            allocated = {id(payload): sequence_id for payload, sequence_id in zip(missing, ids, strict=True)}
        spans = [
            _to_span(payload, payload.sequence_id if payload.sequence_id is not None else allocated[id(payload)])
            for payload in payloads
        ]
        return list(await self.store.add_many_spans(spans))

    async def _call_get_next_span_sequence_id(self, args: dict[str, Any], receive: Any) -> Any:
        return {"sequence_id": int(await self.store.get_next_span_sequence_id(**args))}

    async def _call_get_many_span_sequence_ids(self, args: dict[str, Any], receive: Any) -> Any:
        ids = await self.store.get_many_span_sequence_ids(args["rollout_attempt_ids"])
        return {"sequence_ids": [int(value) for value in ids]}

    async def _call_wait_for_rollouts(self, args: dict[str, Any], receive: Any) -> Any:
        """A long poll, capped at `max_wait_seconds`; ends early when the client leaves or the server stops."""
        timeout = args.get("timeout")
        cap = self.limits.max_wait_seconds
        if timeout is None or timeout > cap:
            timeout = cap
        rollout_ids = args["rollout_ids"]
        wait = asyncio.ensure_future(self.store.wait_for_rollouts(rollout_ids=rollout_ids, timeout=timeout))
        gone = asyncio.ensure_future(_until_disconnect(receive))
        stopping = asyncio.ensure_future(self.shutdown.wait())
        try:
            await asyncio.wait({wait, gone, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (wait, gone, stopping):
                if not task.done():
                    task.cancel()
        if wait.done() and not wait.cancelled():
            return wait.result()
        if gone.done():
            raise _ClientGone()
        # The server is stopping: answer with what has finished so far; the client polls again.
        return await self.store.wait_for_rollouts(rollout_ids=rollout_ids, timeout=0)


async def _until_disconnect(receive: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
