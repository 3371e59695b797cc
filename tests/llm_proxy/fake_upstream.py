"""A scriptable OpenAI-compatible upstream for proxy tests (in-process, no model, no torch).

It answers in vLLM's shapes when asked for token ids (`return_token_ids: true`):
- `/v1/chat/completions`: `prompt_token_ids` at the top level, `token_ids` in each choice; streamed, the first chunk
  carries `prompt_token_ids` at the top level and every content chunk its choice's `token_ids`;
- `/v1/completions`: `prompt_token_ids` *inside each choice* next to `token_ids`; streamed, only the first chunk's
  choice carries `prompt_token_ids`.

The script decides failures (statuses answered before succeeding), tool calls, and how the server reacts to
`return_token_ids` (`token_id_error`): `None` (vLLM: supported), `"openai"` (OpenAI's "Unrecognized request
argument" 400), `"pydantic"` (a FastAPI 422 whose detail rejects the extra field), or `"echo"` (a 400 about another
field whose message quotes the text `return_token_ids`, as vLLM does for a bad value).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Optional

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from agentlightning.utils.uvicorn_thread import UvicornThread

PROMPT_IDS = [1, 2, 3]
COMPLETION_IDS = [7, 8]


@dataclass
class Script:
    failures: list[int] = field(default_factory=list)  # statuses to answer before succeeding
    token_id_error: Optional[str] = None
    tool_call: bool = False
    requests: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)


def _id(prefix: str, script: Script) -> str:
    return f"{prefix}-{len(script.requests)}"


def completion(body: dict[str, Any], script: Script) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": "pong"}
    if script.tool_call:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}
            ],
        }
    choice: dict[str, Any] = {
        "index": 0,
        "message": message,
        "finish_reason": "tool_calls" if script.tool_call else "stop",
    }
    payload: dict[str, Any] = {
        "id": _id("chatcmpl-fake", script),
        "object": "chat.completion",
        "created": 1,
        "model": body.get("model"),
        "choices": [choice],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }
    if body.get("return_token_ids"):
        payload["prompt_token_ids"] = PROMPT_IDS
        choice["token_ids"] = COMPLETION_IDS
    return payload


def text_completion(body: dict[str, Any], script: Script) -> dict[str, Any]:
    n = int(body.get("n") or 1)
    with_ids = bool(body.get("return_token_ids"))
    choices = []
    for index in range(n):
        choice: dict[str, Any] = {"index": index, "text": "pong", "finish_reason": "stop", "logprobs": None}
        # vLLM: the prompt's ids travel in each choice, None when not asked for
        choice["prompt_token_ids"] = PROMPT_IDS if with_ids else None
        choice["token_ids"] = COMPLETION_IDS if with_ids else None
        choices.append(choice)
    return {
        "id": _id("cmpl-fake", script),
        "object": "text_completion",
        "created": 1,
        "model": body.get("model"),
        "choices": choices,
        "usage": {"prompt_tokens": 3, "completion_tokens": 2 * n, "total_tokens": 3 + 2 * n},
    }


def stream_events(body: dict[str, Any], script: Script) -> list[dict[str, Any]]:
    with_ids = bool(body.get("return_token_ids"))
    head = {
        "id": _id("chatcmpl-fake", script),
        "object": "chat.completion.chunk",
        "created": 1,
        "model": body.get("model"),
    }
    events: list[dict[str, Any]] = [
        {**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
         **({"prompt_token_ids": PROMPT_IDS} if with_ids else {})},
    ]  # fmt: skip
    if script.tool_call:
        pieces = [
            {"index": 0, "id": "call_1", "type": "function", "function": {"name": "look", "arguments": ""}},
            {"index": 0, "function": {"name": "up", "arguments": '{"q": '}},
            {"index": 0, "function": {"arguments": '"x"}'}},
        ]
        for piece in pieces:
            events.append({**head, "choices": [{"index": 0, "delta": {"tool_calls": [piece]}, "finish_reason": None}]})
        events.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    else:
        for token, text in zip(COMPLETION_IDS, ("po", "ng"), strict=True):
            choice: dict[str, Any] = {"index": 0, "delta": {"content": text}, "finish_reason": None}
            if with_ids:
                choice["token_ids"] = [token]
            events.append({**head, "choices": [choice]})
        events.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append({**head, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})
    return events


def text_stream_events(body: dict[str, Any], script: Script) -> list[dict[str, Any]]:
    with_ids = bool(body.get("return_token_ids"))
    head = {"id": _id("cmpl-fake", script), "object": "text_completion", "created": 1, "model": body.get("model")}
    events = []
    for position, (token, text) in enumerate(zip(COMPLETION_IDS, ("po", "ng"), strict=True)):
        choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": None, "logprobs": None}
        if with_ids:
            if position == 0:  # vLLM: only the first chunk's choice carries the prompt's ids
                choice["prompt_token_ids"] = PROMPT_IDS
            choice["token_ids"] = [token]
        events.append({**head, "choices": [choice]})
    events.append(
        {**head, "choices": [{"index": 0, "text": "", "finish_reason": "stop", "logprobs": None,
                              **({"token_ids": []} if with_ids else {})}]}
    )  # fmt: skip
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append({**head, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})
    return events


def token_id_error(kind: str) -> JSONResponse:
    if kind == "openai":
        return JSONResponse(
            {"error": {"message": "Unrecognized request argument supplied: return_token_ids",
                       "type": "invalid_request_error", "param": None, "code": None}},
            status_code=400,
        )  # fmt: skip
    if kind == "pydantic":
        return JSONResponse(
            {"detail": [{"type": "extra_forbidden", "loc": ["body", "return_token_ids"],
                         "msg": "Extra inputs are not permitted", "input": True}]},
            status_code=422,
        )  # fmt: skip
    # vLLM's answer to a bad value of another field: the message quotes the offending input
    message = (
        "1 validation error for ChatCompletionRequest\nseed\n  Input should be a valid integer, unable to parse "
        "string as an integer [type=int_parsing, input_value='return_token_ids', input_type=str] "
        "[{'type': 'int_parsing', 'loc': ('body', 'seed'), 'msg': 'bad', 'input': 'return_token_ids'}]"
    )
    return JSONResponse(
        {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}}, status_code=400
    )


def _sse(events: list[dict[str, Any]]) -> StreamingResponse:
    async def generate() -> AsyncIterator[bytes]:
        for event in events:
            yield f"data: {json.dumps(event)}\n\n".encode()
        yield b"data: [DONE]\n\n"

    return StreamingResponse(generate(), media_type="text/event-stream")


def build_app(script: Script) -> FastAPI:
    app = FastAPI()

    async def answer(request: Request, kind: str) -> Any:
        body = await request.json()
        script.requests.append(body)
        script.paths.append(request.url.path)
        if script.failures:
            status = script.failures.pop(0)
            return JSONResponse(
                {"error": {"message": f"scripted {status}", "type": "server_error"}}, status_code=status
            )
        if script.token_id_error == "echo" and isinstance(body.get("seed"), str):
            return token_id_error("echo")
        if script.token_id_error in ("openai", "pydantic") and "return_token_ids" in body:
            return token_id_error(script.token_id_error)
        if kind == "chat":
            return _sse(stream_events(body, script)) if body.get("stream") else completion(body, script)
        return _sse(text_stream_events(body, script)) if body.get("stream") else text_completion(body, script)

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        return await answer(request, "chat")

    @app.post("/v1/completions")
    async def completions(request: Request) -> Any:
        return await answer(request, "completion")

    return app


class FakeUpstream:
    def __init__(self) -> None:
        self.script = Script()
        self._server = UvicornThread(build_app(self.script), name="fake-upstream")

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self._server.port}/v1"

    def reset(self) -> None:
        """Forget the script and the requests seen (the server keeps running)."""
        fresh = Script()
        for name in vars(fresh):
            setattr(self.script, name, getattr(fresh, name))

    def __enter__(self) -> FakeUpstream:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()
