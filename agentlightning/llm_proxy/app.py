"""The proxy's HTTP surface: OpenAI-compatible routes that forward upstream and record each call.

Rollout and attempt ids come from the path (`/rollout/{rid}/attempt/{aid}/v1/chat/completions`, with or without
`/v1`) or from the `x-rollout-id` / `x-attempt-id` headers on plain `/v1/...` routes. A call carrying the header
`x-agl-agent` goes to that agent's entry of the model (see `models.py`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Optional

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from agentlightning.store.base import LightningStore
from agentlightning.store.errors import AttemptNotFoundError, RolloutNotFoundError
from agentlightning.tracer.scope import untraced_asgi
from agentlightning.utils.sse import data_objects

from .auth import ProxyKeyMiddleware
from .call_link import REQUEST_ID_HEADER, proxy_request_id
from .known_attempts import KnownAttempts
from .messages import CLIENT_API, MESSAGES_PATHS, as_anthropic_error, serve_messages
from .models import AGENT_HEADER, ModelRouter, Upstream, token_id_server
from .record import CallRecord, StreamAssembler
from .token_id_support import FIELD, rejects_return_token_ids
from .upstream import UpstreamClient, UpstreamResponse
from .writer import CallRecordWriter

logger = logging.getLogger(__name__)

ROUTES = {"chat/completions": "chat", "completions": "completion", "responses": "responses"}
UPSTREAM_PATHS = {"chat": "/chat/completions", "completion": "/completions", "responses": "/responses"}
MAX_BODY_BYTES = 32 * 1024 * 1024


@dataclass
class ProxyState:
    """What the app needs; the upstream client and writer are created on the serving event loop."""

    router: ModelRouter
    store: LightningStore
    num_retries: int
    request_timeout: float
    request_logprobs: bool = False
    api_key: Optional[str] = None
    upstream: Optional[UpstreamClient] = None
    writer: Optional[CallRecordWriter] = None
    writer_options: dict[str, Any] = field(default_factory=dict)
    loop: Any = None
    extra: dict[str, Any] = field(default_factory=dict)
    known_attempts: KnownAttempts = field(default_factory=KnownAttempts)


def _error(
    status: int,
    message: str,
    kind: str = "invalid_request_error",
    code: Optional[str] = None,
    headers: Optional[dict[str, str]] = None,
) -> Any:
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": None, "code": code}}, status_code=status, headers=headers
    )


def create_proxy_app(state: ProxyState) -> Any:
    """The proxy's ASGI app: the API-key check (when `state.api_key` is set) in front of the routes, and nothing it
    does traced into a rollout (the proxy may share its process with an agent's open trace context)."""
    app = _routes(state)
    if state.api_key:
        app = ProxyKeyMiddleware(app, state.api_key)
    return untraced_asgi(app)


def _routes(state: ProxyState) -> Any:
    @asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        state.loop = asyncio.get_running_loop()
        state.upstream = UpstreamClient(num_retries=state.num_retries, timeout=state.request_timeout)
        state.writer = CallRecordWriter(state.store, **state.writer_options)
        try:
            yield
        finally:
            await state.writer.stop()
            await state.upstream.close()

    app = FastAPI(title="Agent Lightning LLM proxy", lifespan=lifespan)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    @app.get("/rollout/{rollout_id}/attempt/{attempt_id}/v1/models")
    @app.get("/rollout/{rollout_id}/attempt/{attempt_id}/models")
    async def models(rollout_id: Optional[str] = None, attempt_id: Optional[str] = None) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {"id": name, "object": "model", "owned_by": "agentlightning"} for name in state.router.model_names
            ],
        }

    @app.post("/rollout/{rollout_id}/attempt/{attempt_id}/{path:path}")
    async def with_ids_in_path(rollout_id: str, attempt_id: str, path: str, request: Request) -> Any:
        return await _handle(state, request, path, rollout_id, attempt_id)

    @app.post("/v1/{path:path}")
    async def with_ids_in_headers(path: str, request: Request) -> Any:
        rollout_id = request.headers.get("x-rollout-id")
        attempt_id = request.headers.get("x-attempt-id")
        if not rollout_id or not attempt_id:
            return _error(
                400,
                "The proxy needs the rollout and attempt of each call: use the base URL "
                "/rollout/<rollout_id>/attempt/<attempt_id>/v1 or send x-rollout-id and x-attempt-id headers",
                code="missing_rollout_ids",
            )
        return await _handle(state, request, path, rollout_id, attempt_id)

    return app


async def _read_json(request: Any) -> tuple[Optional[dict[str, Any]], Optional[Any]]:
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > MAX_BODY_BYTES:
        return None, _error(413, f"Request body larger than {MAX_BODY_BYTES} bytes")
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        return None, _error(413, f"Request body larger than {MAX_BODY_BYTES} bytes")
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        return None, _error(400, f"The request body is not valid JSON: {exc}")
    if not isinstance(body, dict):
        return None, _error(400, "The request body must be a JSON object")
    return body, None


async def _handle(
    state: ProxyState,
    request: Any,
    path: str,
    rollout_id: str,
    attempt_id: str,
    *,
    body: Optional[dict[str, Any]] = None,
    client_api: Optional[str] = None,
) -> Any:
    """Serve one call; `body` is given when another API's request was translated into this one (`client_api`)."""
    path = path.strip("/")
    if path in MESSAGES_PATHS and body is None:
        request_body, problem = await _read_json(request)
        if request_body is None:
            assert problem is not None
            return as_anthropic_error(problem)

        async def chat(translated: dict[str, Any]) -> Any:
            return await _handle(
                state, request, "v1/chat/completions", rollout_id, attempt_id, body=translated, client_api=CLIENT_API
            )

        return await serve_messages(request_body, chat)
    kind = ROUTES.get(path[3:] if path.startswith("v1/") else path)
    if kind is None:
        return _error(
            404,
            f"The proxy does not serve /{path}; it serves /v1/chat/completions, /v1/completions, /v1/responses and "
            "/v1/messages",
        )
    if body is None:
        body, problem = await _read_json(request)
        if problem is not None or body is None:
            return problem
    model = body.get("model")
    if not isinstance(model, str):
        return _error(400, "The request needs a 'model' string")
    agent = request.headers.get(AGENT_HEADER)
    upstream = state.router.route(model, agent or None)
    if upstream is None and agent:
        return _error(
            404, f"No model entry serves agent {agent!r} (header {AGENT_HEADER}) for the model {model!r}; agents "
            f"served for it: {state.router.agents_of(model)}", code="agent_not_found",
        )  # fmt: skip
    if upstream is None and state.router.agents_of(model):
        return _error(
            404, f"The model {model!r} is served per agent here: send the header {AGENT_HEADER} with one of "
            f"{state.router.agents_of(model)}", code="agent_not_found",
        )  # fmt: skip
    if upstream is None:
        return _error(
            404, f"The model {model!r} is not served by this proxy; known models: {state.router.model_names}",
            code="model_not_found",
        )  # fmt: skip
    unknown = await state.known_attempts.check(state.store, rollout_id, attempt_id)
    if unknown is not None:
        return _error(404, unknown[1], code=unknown[0])
    sequence_id: Optional[int] = None
    try:
        sequence_id = await state.store.get_next_span_sequence_id(rollout_id, attempt_id)
    except (RolloutNotFoundError, AttemptNotFoundError) as exc:
        return _error(404, str(exc), code="rollout_not_found")
    except Exception as exc:  # the store is unreachable: serve the call, number the span when writing it
        logger.warning("LLM proxy: could not allocate a sequence id (%s); will retry when recording", exc)
    stream = bool(body.get("stream"))
    upstream_body = _upstream_body(state, upstream, body, stream, kind=kind)
    record = CallRecord(
        rollout_id=rollout_id, attempt_id=attempt_id, kind=kind, request=upstream_body,
        upstream=upstream.api_base, stream=stream, sequence_id=sequence_id, requested_model=model,
        client_api=client_api,
    )  # fmt: skip
    path_upstream = UPSTREAM_PATHS[kind]
    linked = {REQUEST_ID_HEADER: proxy_request_id(record.span_id)}  # names this call's record to the client
    assert state.upstream is not None and state.writer is not None
    result = await state.upstream.send(upstream, path_upstream, upstream_body)
    error_body: Optional[bytes] = None
    asked_for_ids = FIELD in upstream_body
    if asked_for_ids and result.response is not None and result.response.status_code in (400, 422):
        error_body = await result.response.read()
        if rejects_return_token_ids(result.response.status_code, error_body):
            await result.response.close()
            state.router.token_ids.rejected(token_id_server(upstream, kind), error_body.decode("utf-8", "replace"))
            upstream_body = _upstream_body(state, upstream, body, stream, kind=kind, token_ids=False)
            record.request = upstream_body
            asked_for_ids, error_body = False, None
            result = await state.upstream.send(upstream, path_upstream, upstream_body)
    if asked_for_ids and result.response is not None and result.response.status_code == 200:
        state.router.token_ids.accepted(token_id_server(upstream, kind))
    record.attempts = result.attempts
    if result.response is None:
        message = f"Upstream {upstream.api_base} is unreachable: {result.error}"
        record.fail(type(result.error).__name__, message, 502)
        state.writer.submit(record)
        return _error(502, message, kind="upstream_error", code="upstream_unreachable", headers=linked)
    response = result.response
    if response.status_code != 200:
        raw = error_body if error_body is not None else await response.read()
        await response.close()
        record.fail(
            "UpstreamHTTPError", f"Upstream answered {response.status_code}: {raw[:2000]!r}", response.status_code
        )
        state.writer.submit(record)
        return _passthrough_error(response.status_code, raw, linked)
    if stream:
        return _relay_stream(state, record, response, kind, wants_usage=_client_wants_usage(body), headers=linked)
    try:
        payload = json.loads(await response.read())
    except ValueError as exc:
        record.fail("UpstreamProtocolError", f"Upstream returned invalid JSON: {exc}", 502)
        state.writer.submit(record)
        return _error(502, "The upstream returned invalid JSON", kind="upstream_error", headers=linked)
    finally:
        await response.close()
    record.finish(response=payload, status_code=200)
    state.writer.submit(record)
    return JSONResponse(payload, headers=linked)


def _client_wants_usage(body: dict[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and bool(options.get("include_usage"))


def _upstream_body(
    state: ProxyState,
    upstream: Upstream,
    body: dict[str, Any],
    stream: bool,
    *,
    kind: str = "chat",
    token_ids: bool = True,
) -> dict[str, Any]:
    forwarded = {**upstream.extra_body, **body, "model": upstream.upstream_model}
    if token_ids and FIELD not in body and state.router.wants_token_ids(upstream, kind):
        forwarded[FIELD] = True
    elif not token_ids:
        forwarded.pop(FIELD, None)
    if kind == "responses":
        return forwarded  # no logprobs or stream_options in the Responses API; its stream ends with the response
    if state.request_logprobs and "logprobs" not in body:
        forwarded["logprobs"] = True if "messages" in body else 1
    if stream:
        options = dict(forwarded.get("stream_options") or {})
        options["include_usage"] = True
        forwarded["stream_options"] = options
    return forwarded


def _passthrough_error(status: int, raw: bytes, headers: dict[str, str]) -> Any:
    try:
        payload = json.loads(raw)
    except ValueError:
        return Response(content=raw, status_code=status, media_type="text/plain", headers=headers)
    return JSONResponse(payload, status_code=status, headers=headers)


def _relay_stream(
    state: ProxyState,
    record: CallRecord,
    response: UpstreamResponse,
    kind: str,
    *,
    wants_usage: bool,
    headers: dict[str, str],
) -> Any:
    assembler = StreamAssembler(kind)

    submitted = False

    def submit(failure: Optional[tuple[str, str]] = None) -> None:
        # Called before the final event reaches the client: once a client has read `[DONE]` (or the error event),
        # `proxy.flush()` finds the call's record already queued.
        nonlocal submitted
        if submitted:
            return
        submitted = True
        if failure is None:
            record.finish(response=assembler.response(), status_code=200)
        else:
            record.response = assembler.response()
            record.fail(failure[0], failure[1])
        assert state.writer is not None
        state.writer.submit(record)

    async def relay() -> AsyncIterator[bytes]:
        buffer = b""
        ended = False  # the upstream sent its end: `[DONE]`, or a Responses stream's terminal event
        try:
            try:
                async for piece in response.iter_chunks():
                    buffer += piece
                    while b"\n\n" in buffer:
                        event, buffer = buffer.split(b"\n\n", 1)
                        keep = _inspect_event(event, assembler, wants_usage)
                        if _is_done(event) or assembler.finished:
                            ended = True
                            submit()
                        if keep:
                            yield event + b"\n\n"
                if buffer.strip():
                    keep = _inspect_event(buffer, assembler, wants_usage)
                    if _is_done(buffer) or assembler.finished:
                        ended = True
                        submit()
                    if keep:
                        yield buffer + b"\n\n"
                failure = (
                    None if ended else ("UpstreamStreamIncomplete", "the upstream closed the stream before its end")
                )
            except Exception as exc:  # the upstream died mid-stream: connection lost, body cut short, read timeout
                failure = (type(exc).__name__, f"the upstream's stream broke off: {exc!r}")
            if failure is not None and not ended:
                logger.warning("LLM proxy: %s (%s); the client gets an error event", failure[1], record.upstream)
                submit((failure[0], f"Upstream {record.upstream}: {failure[1]}"))
                yield _stream_error_event(f"Upstream {record.upstream}: {failure[1]}")
        finally:
            await response.close()
            if not submitted:  # the client went away before the stream ended
                submit(("StreamInterrupted", "The client disconnected before the stream ended"))

    return StreamingResponse(relay(), media_type="text/event-stream", headers=headers)


def _stream_error_event(message: str) -> bytes:
    """The event that ends a stream the upstream broke off: an SSE `data:` object with an `error` object, which the
    OpenAI SDKs raise as `APIError` (Python: `openai.APIError`)."""
    error = {"message": message, "type": "upstream_error", "param": None, "code": "upstream_stream_interrupted"}
    return b"data: " + json.dumps({"error": error}, separators=(",", ":")).encode() + b"\n\n"


def _is_done(event: bytes) -> bool:
    return any(line.startswith(b"data:") and line[5:].strip() == b"[DONE]" for line in event.split(b"\n"))


def _inspect_event(event: bytes, assembler: StreamAssembler, wants_usage: bool) -> bool:
    """Feed one SSE event to the assembler; False for the usage-only chunk the client did not ask for."""
    for chunk in data_objects(event.split(b"\n")):
        assembler.add(chunk)
        if not wants_usage and chunk.get("usage") and not chunk.get("choices"):
            return False
    return True
