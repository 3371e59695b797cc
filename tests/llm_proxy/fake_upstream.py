"""A scriptable OpenAI-compatible upstream for proxy tests: failures, token-id rejection, streamed tool calls."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from agentlightning.utils.uvicorn_thread import UvicornThread


@dataclass
class Script:
    failures: list[int] = field(default_factory=list)  # statuses to answer before succeeding
    reject_token_ids: bool = False
    tool_call: bool = False
    requests: list[dict[str, Any]] = field(default_factory=list)


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
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1,
        "model": body.get("model"),
        "choices": [choice],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }
    if body.get("return_token_ids"):
        payload["prompt_token_ids"] = [1, 2, 3]
        choice["token_ids"] = [7, 8]
    return payload


def stream_events(body: dict[str, Any], script: Script) -> list[dict[str, Any]]:
    with_ids = bool(body.get("return_token_ids"))
    head = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "model": body.get("model")}
    events: list[dict[str, Any]] = [
        {**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
         **({"prompt_token_ids": [1, 2, 3]} if with_ids else {})},
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
        for token, text in ((7, "po"), (8, "ng")):
            choice: dict[str, Any] = {"index": 0, "delta": {"content": text}, "finish_reason": None}
            if with_ids:
                choice["token_ids"] = [token]
            events.append({**head, "choices": [choice]})
        events.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append({**head, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})
    return events


def build_app(script: Script) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        body = await request.json()
        script.requests.append(body)
        if script.failures:
            status = script.failures.pop(0)
            return JSONResponse(
                {"error": {"message": f"scripted {status}", "type": "server_error"}}, status_code=status
            )
        if script.reject_token_ids and "return_token_ids" in body:
            return JSONResponse(
                {"error": {"message": "Unrecognized request argument supplied: return_token_ids"}}, status_code=400
            )
        if body.get("stream"):

            async def events() -> AsyncIterator[bytes]:
                for event in stream_events(body, script):
                    yield f"data: {json.dumps(event)}\n\n".encode()
                yield b"data: [DONE]\n\n"

            return StreamingResponse(events(), media_type="text/event-stream")
        return completion(body, script)

    return app


class FakeUpstream:
    def __init__(self) -> None:
        self.script = Script()
        self._server = UvicornThread(build_app(self.script), name="fake-upstream")

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self._server.port}/v1"

    def __enter__(self) -> FakeUpstream:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()
