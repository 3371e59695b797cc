"""A deterministic OpenAI-compatible chat server for tests and benchmarks (loopback only, no model).

Behaviour of `POST /v1/chat/completions`:
- Token ids imitate vLLM's `return_token_ids`: the response carries `prompt_token_ids` at the top level and
  `token_ids` in each choice (for streaming: `prompt_token_ids` in the first chunk, `token_ids` in each delta chunk).
  Ids are the UTF-8 bytes of the text plus 1000, so tests can predict them. Started with `token_ids="on_request"`
  the server only returns them when the request sets `return_token_ids: true` (as vLLM does); with `"never"` it
  never does; with `"reject"` it answers a request carrying the field with OpenAI's 400 "Unrecognized request
  argument supplied: return_token_ids" (as api.openai.com does) and otherwise returns no ids.
- Tool calls: while the request offers a tool that the conversation has not called yet, the reply calls one (the
  one named in the user text if any, else the first such tool) with arguments made from its JSON schema. Once every
  offered tool was called it answers in text (`final answer: <last tool result>` after a tool message).
- Text replies: `"reply to: <last user text>"` by default; a user text containing `REPLY:` makes the server answer
  with what follows it verbatim.
- `stream: true` returns server-sent events; `stream_options.include_usage` adds a final usage chunk.

`POST /v1/completions` answers `"reply to: <prompt>"` in vLLM's shape: `prompt_token_ids` and `token_ids` inside
each choice; streamed, only the first chunk's choice carries `prompt_token_ids`. `GET /debug/requests` returns the
bodies of the last 100 completion requests (tests check what clients sent).

Run it in a subprocess with `FakeOpenAIServer().start()` (used as a context manager) or `python -m
tests.fake_openai_server --port N`.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, Optional

TokenIdMode = Literal["always", "on_request", "never", "reject"]

TOKEN_OFFSET = 1000


def encode(text: str) -> list[int]:
    """The fake tokenizer: UTF-8 bytes shifted by TOKEN_OFFSET."""
    return [byte + TOKEN_OFFSET for byte in text.encode("utf-8")]


def prompt_text(messages: list[dict[str, Any]]) -> str:
    """The text the fake server "tokenizes" as the prompt: role and content of every message."""
    parts = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(
                str(part.get("text", ""))
                for part in content
                if isinstance(part, dict)  # type: ignore[misc]
            )
        parts.append(f"<{message.get('role')}>{content or ''}")
    return "".join(parts)


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
            return str(content or "")
    return ""


def _called_tools(messages: list[dict[str, Any]]) -> set[str]:
    names: set[str] = set()
    for message in messages:
        for call in message.get("tool_calls") or []:
            names.add(str((call.get("function") or {}).get("name")))
    return names


def _next_tool(messages: list[dict[str, Any]], tools: Optional[list[dict[str, Any]]]) -> Optional[dict[str, Any]]:
    """The tool to call now: the one named in the user text, else the first offered tool not called yet."""
    if not tools:
        return None
    called = _called_tools(messages)
    pending = [tool for tool in tools if tool.get("function", {}).get("name") not in called]
    if not pending:
        return None
    user_text = _last_user_text(messages)
    for tool in pending:
        name = tool.get("function", {}).get("name", "")
        if name and name in user_text:
            return tool
    return pending[0]


def _example_value(schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((item for item in kind if item != "null"), "string")
    if schema.get("enum"):
        return schema["enum"][0]
    if kind in ("integer", "number"):
        return 2
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return {}
    return "test"


def _tool_arguments(tool: dict[str, Any]) -> dict[str, Any]:
    parameters = tool.get("function", {}).get("parameters") or {}
    properties = parameters.get("properties") or {}
    required = parameters.get("required") or list(properties)
    return {name: _example_value(properties.get(name, {})) for name in required}


def _reply_text(messages: list[dict[str, Any]]) -> str:
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return f"final answer: {last.get('content')}"
    user_text = _last_user_text(messages)
    if "REPLY:" in user_text:
        return user_text.split("REPLY:", 1)[1].strip()
    return f"reply to: {user_text}"


def create_app(token_ids: TokenIdMode = "always", delay: float = 0.0) -> Any:
    """The ASGI application (Starlette; only build it in the server process or in a test)."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    counter = itertools.count(1)
    received: list[dict[str, Any]] = []

    def wants_ids(body: dict[str, Any]) -> bool:
        return token_ids == "always" or (token_ids == "on_request" and bool(body.get("return_token_ids")))

    def rejection(body: dict[str, Any]) -> Optional[Any]:
        if token_ids != "reject" or "return_token_ids" not in body:
            return None
        error = {
            "message": "Unrecognized request argument supplied: return_token_ids",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
        return JSONResponse({"error": error}, status_code=400)

    async def read(request: Any) -> dict[str, Any]:
        body = await request.json()
        received.append(body)
        del received[:-100]
        if delay > 0:
            await asyncio.sleep(delay)
        return body

    async def requests(request: Any) -> Any:
        return JSONResponse(received)

    async def completions(request: Any) -> Any:
        body = await read(request)
        refused = rejection(body)
        if refused is not None:
            return refused
        prompt = body.get("prompt")
        prompt = prompt if isinstance(prompt, str) else json.dumps(prompt)
        text = f"reply to: {prompt}"
        with_ids = wants_ids(body)
        response_id = f"cmpl-{next(counter)}"
        usage = {
            "prompt_tokens": len(encode(prompt)),
            "completion_tokens": len(encode(text)),
            "total_tokens": len(encode(prompt)) + len(encode(text)),
        }
        head = {"id": response_id, "object": "text_completion", "created": int(time.time()), "model": body.get("model")}

        def choice(piece: str, first: bool, finish: Optional[str]) -> dict[str, Any]:
            item: dict[str, Any] = {"index": 0, "text": piece, "finish_reason": finish, "logprobs": None}
            if with_ids:
                if first:
                    item["prompt_token_ids"] = encode(prompt)
                item["token_ids"] = encode(piece)
            return item

        if body.get("stream"):
            middle = len(text) // 2
            chunks = [
                {**head, "choices": [choice(text[:middle], True, None)]},
                {**head, "choices": [choice(text[middle:], False, "stop")]},
            ]
            if (body.get("stream_options") or {}).get("include_usage"):
                chunks.append({**head, "choices": [], "usage": usage})
            return StreamingResponse(_sse(chunks), media_type="text/event-stream")
        return JSONResponse({**head, "choices": [choice(text, True, "stop")], "usage": usage})

    async def models(request: Any) -> Any:
        return JSONResponse({"object": "list", "data": [{"id": "fake-model", "object": "model", "owned_by": "tests"}]})

    async def health(request: Any) -> Any:
        return JSONResponse({"status": "ok"})

    async def chat(request: Any) -> Any:
        body = await read(request)
        refused = rejection(body)
        if refused is not None:
            return refused
        messages: list[dict[str, Any]] = body.get("messages") or []
        tools: Optional[list[dict[str, Any]]] = body.get("tools")
        model = body.get("model", "fake-model")
        with_ids = wants_ids(body)
        response_id = f"chatcmpl-{next(counter)}"
        prompt_ids = encode(prompt_text(messages))
        tool = _next_tool(messages, tools)
        if tool is not None:
            name = tool.get("function", {}).get("name", "tool")
            arguments = json.dumps(_tool_arguments(tool))
            call_id = f"call_{response_id.split('-')[1]}"
            message: dict[str, Any] = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}],
            }
            completion_ids = encode(f"<tool_call>{name}{arguments}")
            finish_reason = "tool_calls"
        else:
            text = _reply_text(messages)
            message = {"role": "assistant", "content": text}
            completion_ids = encode(text)
            finish_reason = "stop"
        usage = {
            "prompt_tokens": len(prompt_ids),
            "completion_tokens": len(completion_ids),
            "total_tokens": len(prompt_ids) + len(completion_ids),
        }
        created = int(time.time())
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            chunks = _stream_chunks(
                response_id, created, model, message, completion_ids, prompt_ids, finish_reason, with_ids
            )
            if include_usage:
                chunks = itertools.chain(
                    chunks,
                    [
                        {
                            "id": response_id,
                            "object": "chat.completion.chunk",
                            "created": created,
                            "model": model,
                            "choices": [],
                            "usage": usage,
                        }
                    ],
                )
            return StreamingResponse(_sse(chunks), media_type="text/event-stream")
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}
        payload: dict[str, Any] = {
            "id": response_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [choice],
            "usage": usage,
        }
        if with_ids:
            payload["prompt_token_ids"] = prompt_ids
            choice["token_ids"] = completion_ids
        return JSONResponse(payload)

    return Starlette(
        routes=[
            Route("/v1/models", models, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/debug/requests", requests, methods=["GET"]),
        ]
    )


def _stream_chunks(
    response_id: str,
    created: int,
    model: str,
    message: dict[str, Any],
    completion_ids: list[int],
    prompt_ids: list[int],
    finish_reason: str,
    with_ids: bool,
) -> Iterator[dict[str, Any]]:
    def chunk(delta: dict[str, Any], finish: Optional[str] = None, ids: Optional[list[int]] = None) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        if with_ids and ids is not None:
            choice["token_ids"] = ids
        return {
            "id": response_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [choice],
        }

    first = chunk({"role": "assistant", "content": ""}, ids=[])
    if with_ids:
        first["prompt_token_ids"] = prompt_ids
    yield first
    if message.get("tool_calls"):
        call = message["tool_calls"][0]
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["function"]["name"], "arguments": ""},
                    }
                ]
            },
            ids=[],
        )
        yield chunk(
            {"tool_calls": [{"index": 0, "function": {"arguments": call["function"]["arguments"]}}]},
            ids=completion_ids,
        )
    else:
        text = message["content"]
        middle = len(text) // 2
        pieces = [text[:middle], text[middle:]] if middle else [text]
        for piece in pieces:
            yield chunk({"content": piece}, ids=encode(piece))
    yield chunk({}, finish=finish_reason, ids=[])


def _sse(chunks: Any) -> Iterator[bytes]:
    for item in chunks:
        yield f"data: {json.dumps(item)}\n\n".encode()
    yield b"data: [DONE]\n\n"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve(port: int, token_ids: TokenIdMode = "always", delay: float = 0.0) -> None:
    """Serve on 127.0.0.1:port until killed (`delay` seconds of simulated generation time per completion)."""
    import uvicorn

    uvicorn.run(create_app(token_ids, delay), host="127.0.0.1", port=port, log_level="warning", access_log=False)


class FakeOpenAIServer:
    """Runs the fake server in a child process; `base_url` ends with `/v1`."""

    def __init__(self, token_ids: TokenIdMode = "always", port: Optional[int] = None, delay: float = 0.0) -> None:
        self.token_ids: TokenIdMode = token_ids
        self.delay = delay
        self.port = port or free_port()
        self._process: Optional[subprocess.Popen[bytes]] = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def received(self) -> list[dict[str, Any]]:
        """The bodies of the last 100 completion requests the server received, oldest first."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/debug/requests", timeout=5) as response:
            return json.loads(response.read())

    def start(self, timeout: float = 30.0) -> FakeOpenAIServer:
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--port",
            str(self.port),
            "--token-ids",
            self.token_ids,
            "--delay",
            str(self.delay),
        ]
        self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError("the fake OpenAI server exited during start-up")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=1) as response:
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"the fake OpenAI server did not start within {timeout} s")

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(5)
            self._process = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--token-ids", choices=["always", "on_request", "never", "reject"], default="always")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds of simulated generation per completion")
    args = parser.parse_args()
    serve(args.port, args.token_ids, args.delay)


if __name__ == "__main__":
    main()
