"""An OpenAI-compatible inference server for `InferenceEngine`, answering like vLLM (token ids included).

Routes: `GET /health`, `GET /v1/models`, `POST /v1/chat/completions`, `POST /v1/completions`, `POST /v1/responses`,
`POST /v1/messages` (Anthropic's Messages API, see `messages.py`) (all streaming or not),
`GET /v1/weights` and `POST /v1/weights` (swap in new weights without a restart: `{"path": ..., "version": ...}`),
`POST /v1/load_lora_adapter` and `POST /v1/unload_lora_adapter` (vLLM's runtime LoRA API: `{"lora_name": ...,
"lora_path": <PEFT folder>}`, plus an optional `"version"`): a loaded adapter is served as a model of its own name,
beside the base model, and loading it again swaps its weights in place.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Optional, Union

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel

from .adapters import AdapterError
from .engine import InferenceEngine, SequenceState, StreamDelta, WeightsError
from .messages import serve_messages
from .protocol import (
    ChatCompletionRequest,
    CompletionRequest,
    chat_chunk,
    chat_response,
    completion_chunk,
    completion_response,
    error_body,
    new_id,
    usage,
)
from .responses import ResponsesRequest, remember_response_turn, response_body, stream_response
from .sampling import SamplingError, SamplingParams
from .tools import ToolCallParser

logger = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 256


class WeightsRequest(BaseModel):
    """Load new weights: a safetensors file (or a folder with model.safetensors) and its version label."""

    path: str
    version: str


class LoadAdapterRequest(BaseModel):
    """Serve (or replace) a LoRA adapter from a PEFT folder under the model name `lora_name`."""

    lora_name: str
    lora_path: str
    version: Optional[str] = None


class UnloadAdapterRequest(BaseModel):
    lora_name: str


def create_inference_app(
    engine: InferenceEngine, *, served_model_names: Optional[list[str]] = None, api_key: Optional[str] = None
) -> Any:
    """Build the FastAPI app serving `engine` under `served_model_names` (default: the engine's model name)."""
    names = served_model_names or [engine.model_name]
    app = FastAPI(title="Agent Lightning inference server")

    def error(status: int, message: str, **kwargs: Any) -> JSONResponse:
        return JSONResponse(error_body(message, **kwargs), status_code=status)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'][1:])}: {e['msg']}" for e in exc.errors())
        return error(400, f"Invalid request: {problems}")

    @app.middleware("http")
    async def authenticate(request: Request, call_next: Callable[[Request], Any]) -> Any:
        if api_key and request.url.path != "/health":
            given = request.headers.get("authorization", "")
            bearer = hmac.compare_digest(given.encode(), f"Bearer {api_key}".encode())
            # Anthropic's SDKs send the key as x-api-key
            keyed = hmac.compare_digest(request.headers.get("x-api-key", "").encode(), api_key.encode())
            if not (bearer or keyed):
                return error(401, "Missing or wrong API key", kind="authentication_error")
        return await call_next(request)

    def check_model(model: str) -> Optional[JSONResponse]:
        if model not in names and model not in engine.adapters:
            served = names + engine.adapters.names
            return error(
                404, f"The model {model!r} does not exist; this server serves {served}", code="model_not_found"
            )
        return None

    def adapter_of(model: str) -> Optional[str]:
        return model if model not in names and model in engine.adapters else None

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        created = int(time.time())
        return {
            "object": "list",
            "data": [
                {"id": name, "object": "model", "created": created, "owned_by": "agentlightning"} for name in names
            ]
            + [
                {
                    "id": name,
                    "object": "model",
                    "created": created,
                    "owned_by": "agentlightning",
                    "root": names[0],
                    "parent": names[0],
                }
                for name in engine.adapters.names
            ],
        }

    @app.get("/v1/weights")
    async def current_weights() -> dict[str, str]:
        return {"model": engine.model_name, "version": engine.weights_version}

    @app.post("/v1/weights")
    async def swap_weights(request: WeightsRequest) -> Any:
        try:
            await asyncio.to_thread(engine.load_weights, request.path, request.version)
        except WeightsError as exc:
            return error(400, str(exc))
        return {"model": engine.model_name, "version": engine.weights_version}

    @app.post("/v1/load_lora_adapter")
    async def load_adapter(request: LoadAdapterRequest) -> Any:
        if request.lora_name in names:
            return error(400, f"The adapter name {request.lora_name!r} is the base model's")
        version = request.version or request.lora_path
        try:
            await asyncio.to_thread(engine.load_adapter, request.lora_name, request.lora_path, version=version)
        except AdapterError as exc:
            return error(400, str(exc))
        return {"model": request.lora_name, "version": version}

    @app.post("/v1/unload_lora_adapter")
    async def unload_adapter(request: UnloadAdapterRequest) -> Any:
        try:
            await asyncio.to_thread(engine.unload_adapter, request.lora_name)
        except KeyError:
            return error(404, f"No LoRA adapter {request.lora_name!r} is loaded", code="model_not_found")
        return {"model": request.lora_name, "unloaded": True}

    @app.post("/v1/chat/completions")
    async def chat_completions(request: ChatCompletionRequest) -> Any:
        problem = check_model(request.model)
        if problem is not None:
            return problem
        try:
            prompt_ids = engine.chat_prompt(request.plain_messages(), request.offered_tools)
            params = request.sampling(
                logprobs=request.logprobs,
                top_logprobs=request.top_logprobs or 0,
                default_max_tokens=request.max_completion_tokens or DEFAULT_MAX_TOKENS,
            )
            params.adapter = adapter_of(request.model)
            params.validate(engine.max_context, len(prompt_ids))
        except (SamplingError, ValueError) as exc:
            return error(400, str(exc))
        if request.stream:
            return StreamingResponse(_stream_chat(engine, request, prompt_ids, params), media_type="text/event-stream")
        sequences = await _generate(engine, prompt_ids, params)
        parser = engine.tool_parser if request.offered_tools else None
        body = chat_response(request, request.model, prompt_ids, sequences, parser)
        for choice, sequence in zip(body["choices"], sequences, strict=True):
            message = choice["message"]
            calls = [call["id"] for call in message.get("tool_calls") or []]
            engine.remember_turn(prompt_ids, message.get("content"), calls, sequence.token_ids)
        return body

    @app.post("/v1/responses")
    async def responses(request: ResponsesRequest) -> Any:
        problem = check_model(request.model)
        if problem is not None:
            return problem
        try:
            tools = request.chat_tools()
            prompt_ids = engine.chat_prompt(request.chat_messages(), tools)
            params = request.sampling(DEFAULT_MAX_TOKENS)
            params.adapter = adapter_of(request.model)
            params.validate(engine.max_context, len(prompt_ids))
        except (SamplingError, ValueError) as exc:
            return error(400, str(exc))
        parser = engine.tool_parser if tools else None
        if request.stream:
            return StreamingResponse(
                stream_response(engine, request, prompt_ids, params, parser), media_type="text/event-stream"
            )
        sequences = await _generate(engine, prompt_ids, params)
        body = response_body(request, prompt_ids, sequences[0], parser)
        remember_response_turn(engine, prompt_ids, body["output"], sequences[0].token_ids)
        return body

    @app.post("/v1/messages")
    async def messages(request: Request) -> Any:
        return await serve_messages(await request.body(), chat_completions)

    @app.post("/v1/completions")
    async def completions(request: CompletionRequest) -> Any:
        problem = check_model(request.model)
        if problem is not None:
            return problem
        try:
            prompt_ids = engine.encode(request.prompt) if isinstance(request.prompt, str) else list(request.prompt)
            params = request.sampling(
                logprobs=request.logprobs is not None,
                top_logprobs=request.logprobs or 0,
                default_max_tokens=16,
            )
            params.adapter = adapter_of(request.model)
            params.validate(engine.max_context, len(prompt_ids))
            prompt_text = request.prompt if isinstance(request.prompt, str) else engine.decode(prompt_ids)
        except (SamplingError, ValueError) as exc:
            return error(400, str(exc))
        if request.stream:
            return StreamingResponse(
                _stream_completion(engine, request, prompt_ids, params), media_type="text/event-stream"
            )
        try:
            sequences = await _generate(engine, prompt_ids, params)
        except ValueError as exc:
            return error(400, str(exc))
        return completion_response(request, request.model, prompt_ids, prompt_text, sequences)

    return app


async def _generate(engine: InferenceEngine, prompt_ids: list[int], params: SamplingParams) -> list[SequenceState]:
    return await engine.agenerate(prompt_ids, params)


async def _deltas(
    engine: InferenceEngine, prompt_ids: list[int], params: SamplingParams, parser: Optional[ToolCallParser] = None
) -> AsyncIterator[Union[list[StreamDelta], list[SequenceState]]]:
    """Yield the deltas of each decoding step, then the final sequences (the request is cancelled if abandoned).

    With a tool-call `parser`, tool calls are held back from the text and sent parsed with the last delta.
    """
    final: list[SequenceState] = []
    visible = parser.visible_length if parser is not None else None
    async for sequences in engine.astream(prompt_ids, params):
        final = sequences
        deltas = engine.deltas(sequences, params, visible)
        if parser is not None:
            for delta in deltas:
                if delta.finish_reason is not None:
                    calls = parser.parse(sequences[delta.index].text)[1]
                    if calls:
                        delta.tool_calls = [call.to_openai() for call in calls]
                        delta.finish_reason = "tool_calls"
        if deltas:
            yield deltas
    yield final


def _sse(payload: Any) -> bytes:
    return f"data: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()


async def _stream_events(
    engine: InferenceEngine,
    prompt_ids: list[int],
    params: SamplingParams,
    *,
    prelude: list[dict[str, Any]],
    render: Callable[[StreamDelta, bool], dict[str, Any]],
    usage_chunk: Optional[Callable[[dict[str, int]], dict[str, Any]]],
    parser: Optional[ToolCallParser] = None,
    remember: bool = False,
) -> AsyncIterator[bytes]:
    """The SSE stream of a generation: prelude chunks, one chunk per delta, the usage chunk, then [DONE].

    With `remember`, each finished choice is recorded as a generated chat turn (the text and tool call ids the
    client assembled from the deltas, see `history.py`)."""
    for chunk in prelude:
        yield _sse(chunk)
    final: list[SequenceState] = []
    first = not prelude
    streamed: dict[int, tuple[list[str], list[str]]] = {}
    try:
        async for item in _deltas(engine, prompt_ids, params, parser):
            if item and isinstance(item[0], SequenceState):
                final = item  # type: ignore[assignment]
                continue
            for delta in item:
                texts, calls = streamed.setdefault(delta.index, ([], []))  # type: ignore[union-attr]
                texts.append(delta.text)  # type: ignore[union-attr]
                calls.extend(call["id"] for call in delta.tool_calls or [])  # type: ignore[union-attr]
                yield _sse(render(delta, first))  # type: ignore[arg-type]
                first = False
    except Exception as exc:
        logger.exception("Streaming generation failed")
        yield _sse(error_body(f"Generation failed: {exc}", kind="server_error"))
        return
    if remember:
        for sequence in final:
            texts, calls = streamed.get(sequence.index, ([], []))
            engine.remember_turn(prompt_ids, "".join(texts) or None, calls, sequence.token_ids)
    if usage_chunk is not None:
        yield _sse(usage_chunk(usage(len(prompt_ids), sum(len(s.token_ids) for s in final))))
    yield b"data: [DONE]\n\n"


def _stream_chat(
    engine: InferenceEngine, request: ChatCompletionRequest, prompt_ids: list[int], params: SamplingParams
) -> AsyncIterator[bytes]:
    common: dict[str, Any] = {"chunk_id": new_id("chatcmpl"), "model": request.model, "created": int(time.time())}
    prelude = [
        chat_chunk(request, role_for=index, prompt_ids=prompt_ids if index == 0 else None, **common)
        for index in range(params.n)
    ]
    return _stream_events(
        engine,
        prompt_ids,
        params,
        prelude=prelude,
        render=lambda delta, _first: chat_chunk(request, delta=delta, **common),
        usage_chunk=(lambda counts: {**chat_chunk(request, **common), "usage": counts})
        if request.include_usage
        else None,
        parser=engine.tool_parser if request.offered_tools else None,
        remember=True,
    )


def _stream_completion(
    engine: InferenceEngine, request: CompletionRequest, prompt_ids: list[int], params: SamplingParams
) -> AsyncIterator[bytes]:
    common: dict[str, Any] = {"chunk_id": new_id("cmpl"), "model": request.model, "created": int(time.time())}

    def usage_chunk(counts: dict[str, int]) -> dict[str, Any]:
        return {"id": common["chunk_id"], "object": "text_completion", "created": common["created"],
                "model": request.model, "choices": [], "usage": counts}  # fmt: skip

    return _stream_events(
        engine,
        prompt_ids,
        params,
        prelude=[],
        render=lambda delta, first: completion_chunk(
            request, delta=delta, prompt_ids=prompt_ids if first else None, **common
        ),
        usage_chunk=usage_chunk if request.include_usage else None,
    )


class InferenceServer:
    """Serves an engine on a background thread: `start()`, `endpoint`, `stop()`."""

    def __init__(
        self,
        engine: InferenceEngine,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        served_model_names: Optional[list[str]] = None,
        api_key: Optional[str] = None,
    ) -> None:
        from agentlightning.utils.hosts import guard_loopback
        from agentlightning.utils.uvicorn_thread import UvicornThread

        self.engine = engine
        self.app = create_inference_app(engine, served_model_names=served_model_names, api_key=api_key)
        # Keyless on loopback: only requests addressed to this machine (DNS rebinding; agentlightning/utils/hosts.py).
        self._thread = UvicornThread(
            guard_loopback(self.app, host, api_key), host=host, port=port, name="agl-inference"
        )

    @property
    def endpoint(self) -> str:
        """The OpenAI base URL (ends with /v1)."""
        return f"http://{self._thread.host}:{self._thread.port}/v1"

    def start(self) -> InferenceServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._thread.stop()

    def __enter__(self) -> InferenceServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
