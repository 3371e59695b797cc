"""Anthropic's Messages API (`POST /v1/messages`) in terms of OpenAI's chat completions, both ways.

The LLM proxy and `agl serve` speak chat completions to the model (that is where exact token ids come from); agents
written with the Anthropic SDK, and harnesses that speak only that API, send Messages requests. These pure
functions translate a Messages request into a chat request (`chat_request`), a chat completion into a Message
(`message_response`), a chat completion stream into Anthropic's server-sent events (`MessagesStream`) and errors
into Anthropic's error shape (`anthropic_error`). No I/O, no SDK needed.

What maps: a system prompt (text or text blocks); user and assistant turns of text blocks; an assistant's
`tool_use` blocks (tool calls, their `input` as JSON arguments) and the user's `tool_result` blocks (tool messages,
sent before the user's text of the same turn, since they answer the previous assistant turn); client tools
(`name`, `description`, `input_schema`) and `tool_choice` (`auto`, `any`, `tool`, `none`;
`disable_parallel_tool_use`); `max_tokens`, `temperature`, `top_p`, `top_k`, `stop_sequences`, `stream`. Thinking
blocks in the history are dropped (the model served here does not produce them). What does not map is refused
with the reason: images and documents, server tools (web search and the like), a request without `max_tokens`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any, Optional

from .sse import data_objects

__all__ = [
    "MessagesRequestError",
    "MessagesStream",
    "anthropic_error",
    "chat_request",
    "error_type_for_status",
    "message_response",
    "sse_event",
    "translate_chat_stream",
]

STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use"}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_DROPPED_BLOCKS = frozenset({"thinking", "redacted_thinking"})


class MessagesRequestError(ValueError):
    """A Messages request that cannot be served here; the message says what and why."""


def error_type_for_status(status: int) -> str:
    """Anthropic's error type for an HTTP status (`api_error` for other server errors)."""
    return _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def anthropic_error(status: int, message: str) -> dict[str, Any]:
    """An error body in Anthropic's shape, which its SDKs raise as the matching exception."""
    return {"type": "error", "error": {"type": error_type_for_status(status), "message": message}}


def sse_event(kind: str, data: Mapping[str, Any]) -> bytes:
    """One Anthropic server-sent event (`event:` line, then the JSON `data:` line)."""
    return f"event: {kind}\ndata: {json.dumps(data, separators=(',', ':'), ensure_ascii=False)}\n\n".encode()


def _text_of(content: Any, where: str) -> str:
    """The text of a string or of a list of text blocks."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise MessagesRequestError(f"{where} must be a string or a list of content blocks, got {content!r}")
    parts = []
    for index, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind in _DROPPED_BLOCKS:
            continue
        else:
            raise MessagesRequestError(f"{where}[{index}]: only text blocks are supported here, got {kind!r}")
    return "".join(parts)


def _user_turn(content: Any, position: int) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    if not isinstance(content, list):
        raise MessagesRequestError(f"messages[{position}].content must be a string or a list of blocks")
    results: list[dict[str, Any]] = []
    texts: list[str] = []
    for index, block in enumerate(content):
        where = f"messages[{position}].content[{index}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "tool_result":
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str) or not call_id:
                raise MessagesRequestError(f"{where}: a tool_result needs its tool_use_id")
            result = _text_of(block.get("content", ""), f"{where}.content")
            if block.get("is_error"):
                result = f"Error: {result}"
            results.append({"role": "tool", "tool_call_id": call_id, "content": result})
        elif kind in ("image", "document"):
            raise MessagesRequestError(f"{where}: {kind} blocks are not supported by this server (text models only)")
        elif kind in _DROPPED_BLOCKS:
            continue
        else:
            raise MessagesRequestError(f"{where}: unsupported content block type {kind!r} in a user turn")
    turn = list(results)
    if texts or not results:
        turn.append({"role": "user", "content": "".join(texts)})
    return turn


def _assistant_turn(content: Any, position: int) -> dict[str, Any]:
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    if not isinstance(content, list):
        raise MessagesRequestError(f"messages[{position}].content must be a string or a list of blocks")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for index, block in enumerate(content):
        where = f"messages[{position}].content[{index}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            name, call_id = block.get("name"), block.get("id")
            if not isinstance(name, str) or not isinstance(call_id, str):
                raise MessagesRequestError(f"{where}: a tool_use block needs an id and a name")
            arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
            calls.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}})
        elif kind in _DROPPED_BLOCKS:
            continue
        else:
            raise MessagesRequestError(f"{where}: unsupported content block type {kind!r} in an assistant turn")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    return message


def _tools(tools: Any) -> list[dict[str, Any]]:
    if not isinstance(tools, list):
        raise MessagesRequestError("tools must be a list")
    converted = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise MessagesRequestError(f"tools[{index}] needs a name")
        kind = tool.get("type")
        if kind not in (None, "custom"):
            raise MessagesRequestError(
                f"tools[{index}] ({tool['name']!r}) is a server tool of type {kind!r}: only client tools with an "
                "input_schema are supported here"
            )
        function: dict[str, Any] = {"name": tool["name"], "parameters": tool.get("input_schema") or {"type": "object"}}
        if tool.get("description"):
            function["description"] = tool["description"]
        converted.append({"type": "function", "function": function})
    return converted


def _tool_choice(choice: Any, body: dict[str, Any]) -> None:
    if not isinstance(choice, dict):
        raise MessagesRequestError(f"tool_choice must be an object such as {{'type': 'auto'}}, got {choice!r}")
    kind = choice.get("type")
    if kind == "auto":
        body["tool_choice"] = "auto"
    elif kind == "any":
        body["tool_choice"] = "required"
    elif kind == "none":
        body["tool_choice"] = "none"
    elif kind == "tool" and isinstance(choice.get("name"), str):
        body["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    else:
        raise MessagesRequestError(f"unsupported tool_choice {choice!r}")
    if choice.get("disable_parallel_tool_use"):
        body["parallel_tool_calls"] = False


def chat_request(request: Mapping[str, Any]) -> dict[str, Any]:
    """The chat-completions request that serves the Messages request `request`.

    Raises:
        MessagesRequestError: naming what cannot be served (see the module docstring).
    """
    model = request.get("model")
    if not isinstance(model, str) or not model:
        raise MessagesRequestError("the request needs a 'model' string")
    max_tokens = request.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise MessagesRequestError(f"the request needs 'max_tokens', a positive integer (got {max_tokens!r})")
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        raise MessagesRequestError("the request needs a non-empty 'messages' list")
    chat: list[dict[str, Any]] = []
    system = request.get("system")
    if system:
        chat.append({"role": "system", "content": _text_of(system, "system")})
    for position, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role == "user":
            chat.extend(_user_turn(message.get("content"), position))
        elif role == "assistant":
            chat.append(_assistant_turn(message.get("content"), position))
        else:
            raise MessagesRequestError(f"messages[{position}].role must be 'user' or 'assistant', got {role!r}")
    body: dict[str, Any] = {"model": model, "messages": chat, "max_tokens": max_tokens}
    for name in ("temperature", "top_p", "top_k"):
        if request.get(name) is not None:
            body[name] = request[name]
    stop = request.get("stop_sequences")
    if stop:
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise MessagesRequestError("stop_sequences must be a list of strings")
        body["stop"] = list(stop)
    if request.get("tools"):
        body["tools"] = _tools(request["tools"])
    if request.get("tool_choice") is not None:
        _tool_choice(request["tool_choice"], body)
    if request.get("stream"):
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def _tool_input(arguments: Any) -> dict[str, Any]:
    """A tool call's arguments as the object Anthropic's `input` must be (unparsable text kept under `_raw`)."""
    if isinstance(arguments, dict):
        return arguments
    try:
        parsed = json.loads(arguments or "{}")
    except (TypeError, ValueError):
        return {"_raw": arguments}
    return parsed if isinstance(parsed, dict) else {"_raw": arguments}


def _message_id(chat_id: Any) -> str:
    text = str(chat_id or uuid.uuid4().hex)
    return text if text.startswith("msg_") else f"msg_{text}"


def message_response(chat: Mapping[str, Any], model: Optional[str] = None) -> dict[str, Any]:
    """The Message for a (non-streamed) chat completion; token ids the server added are kept as extra fields."""
    choices = chat.get("choices") or []
    if not choices:
        raise MessagesRequestError("the model returned no choice")
    choice = choices[0]
    message = choice.get("message") or {}
    content: list[dict[str, Any]] = []
    if message.get("content"):
        content.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        content.append(
            {
                "type": "tool_use",
                "id": call.get("id") or f"toolu_{uuid.uuid4().hex[:24]}",
                "name": function.get("name", ""),
                "input": _tool_input(function.get("arguments")),
            }
        )
    usage = chat.get("usage") or {}
    result: dict[str, Any] = {
        "id": _message_id(chat.get("id")),
        "type": "message",
        "role": "assistant",
        "model": model or chat.get("model", ""),
        "content": content,
        "stop_reason": STOP_REASONS.get(choice.get("finish_reason") or "stop", "end_turn"),
        "stop_sequence": None,
        "usage": {
            "input_tokens": int(usage.get("prompt_tokens") or 0),
            "output_tokens": int(usage.get("completion_tokens") or 0),
        },
    }
    if chat.get("prompt_token_ids") is not None:
        result["prompt_token_ids"] = chat["prompt_token_ids"]
    if choice.get("token_ids") is not None:
        result["token_ids"] = choice["token_ids"]
    return result


class MessagesStream:
    """Turns the chunks of a streamed chat completion into Anthropic's stream events, in order: `message_start`,
    for each content block `content_block_start`, its deltas (`text_delta`, or `input_json_delta` for a tool's
    input) and `content_block_stop`, then `message_delta` (stop reason, output tokens) and `message_stop`."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.started = False
        self.finished = False
        self._block: Optional[tuple[str, int]] = None  # (kind, tool-call index) of the open block
        self._blocks = 0
        self._stop_reason = "end_turn"
        self._usage = {"input_tokens": 0, "output_tokens": 0}

    def _start(self, chat_id: Any) -> list[bytes]:
        self.started = True
        message = {
            "id": _message_id(chat_id),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": dict(self._usage),
        }
        return [sse_event("message_start", {"type": "message_start", "message": message})]

    def _close_block(self) -> list[bytes]:
        if self._block is None:
            return []
        self._block = None
        self._blocks += 1
        return [sse_event("content_block_stop", {"type": "content_block_stop", "index": self._blocks - 1})]

    def _open(self, block: dict[str, Any], key: tuple[str, int]) -> list[bytes]:
        events = self._close_block()
        self._block = key
        start = {"type": "content_block_start", "index": self._blocks, "content_block": block}
        return [*events, sse_event("content_block_start", start)]

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return sse_event("content_block_delta", {"type": "content_block_delta", "index": self._blocks, "delta": delta})

    def feed(self, chunk: Mapping[str, Any]) -> list[bytes]:
        """The events for one chat completion chunk (possibly none)."""
        events: list[bytes] = [] if self.started else self._start(chunk.get("id"))
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._usage = {
                "input_tokens": int(usage.get("prompt_tokens") or 0),
                "output_tokens": int(usage.get("completion_tokens") or 0),
            }
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            text = delta.get("content")
            if text:
                if self._block is None or self._block[0] != "text":
                    events += self._open({"type": "text", "text": ""}, ("text", -1))
                events.append(self._delta({"type": "text_delta", "text": text}))
            for call in delta.get("tool_calls") or []:
                index = int(call.get("index", 0))
                function = call.get("function") or {}
                if self._block != ("tool_use", index):
                    block = {
                        "type": "tool_use",
                        "id": call.get("id") or f"toolu_{uuid.uuid4().hex[:24]}",
                        "name": function.get("name", ""),
                        "input": {},
                    }
                    events += self._open(block, ("tool_use", index))
                if function.get("arguments"):
                    events.append(self._delta({"type": "input_json_delta", "partial_json": function["arguments"]}))
            if choice.get("finish_reason"):
                self._stop_reason = STOP_REASONS.get(choice["finish_reason"], "end_turn")
        return events

    def finish(self) -> list[bytes]:
        """The closing events (after the last chunk)."""
        if self.finished:
            return []
        events = [] if self.started else self._start(None)
        events += self._close_block()
        self.finished = True
        delta = {"stop_reason": self._stop_reason, "stop_sequence": None}
        message_delta = {
            "type": "message_delta",
            "delta": delta,
            "usage": {"output_tokens": self._usage["output_tokens"]},
        }
        return [*events, sse_event("message_delta", message_delta), sse_event("message_stop", {"type": "message_stop"})]

    @staticmethod
    def error(status: int, message: str) -> bytes:
        """An `error` event (the stream failed after it started; the SDK raises it)."""
        return sse_event("error", anthropic_error(status, message))


async def translate_chat_stream(chunks: AsyncIterable[Any], model: str) -> AsyncIterator[bytes]:
    """Anthropic's stream events for a chat completion's server-sent events (`bytes` or `str` pieces); an error
    event of the chat stream (`data: {"error": ...}`) ends it with Anthropic's `error` event."""
    stream = MessagesStream(model)
    buffer = b""
    async for piece in chunks:
        buffer += piece if isinstance(piece, bytes) else str(piece).encode()
        while b"\n\n" in buffer:
            event, buffer = buffer.split(b"\n\n", 1)
            for chunk in data_objects(event.split(b"\n")):
                if "error" in chunk and not chunk.get("choices"):
                    error = chunk["error"]
                    message = error.get("message", error) if isinstance(error, dict) else error
                    yield MessagesStream.error(502, str(message))
                    return
                for out in stream.feed(chunk):
                    yield out
    for out in stream.finish():
        yield out
