"""Anthropic's Messages API on the proxy (`POST .../v1/messages`): agents written with the Anthropic SDK, and
harnesses that speak only that API, are served and recorded like any chat call.

The request is translated into a chat completion (`agentlightning.utils.anthropic_messages`) and handled by the
proxy's chat path: routed to the model's upstream, asked for token ids, recorded as one chat span with the exact
prompt and response ids (marked `agentlightning.llm.client_api = "anthropic.messages"`). The answer goes back as a
Message, as Anthropic's stream events, or as an error in Anthropic's shape (same status code and headers).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi.responses import JSONResponse, Response, StreamingResponse

from agentlightning.utils.anthropic_messages import (
    MessagesRequestError,
    anthropic_error,
    chat_request,
    message_response,
    translate_chat_stream,
)

__all__ = ["CLIENT_API", "MESSAGES_PATHS", "as_anthropic_error", "serve_messages"]

CLIENT_API = "anthropic.messages"
MESSAGES_PATHS = frozenset({"messages", "v1/messages"})

ChatHandler = Callable[[dict[str, Any]], Awaitable[Any]]


def _headers(response: Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.lower() not in ("content-length", "content-type")}


def as_anthropic_error(response: Response) -> JSONResponse:
    """A chat-path error answer in Anthropic's shape, keeping its status code and headers."""
    try:
        payload = json.loads(bytes(response.body))
        detail = payload.get("error", payload) if isinstance(payload, dict) else payload
        message = str(detail.get("message", detail)) if isinstance(detail, dict) else str(detail)
    except (ValueError, AttributeError):
        message = bytes(getattr(response, "body", b"")).decode("utf-8", "replace") or "request failed"
    return JSONResponse(anthropic_error(response.status_code, message), response.status_code, _headers(response))


async def serve_messages(body: dict[str, Any], handle_chat: ChatHandler) -> Any:
    """Answer the Messages request `body` through `handle_chat` (the proxy's chat path for the same call)."""
    try:
        chat = chat_request(body)
    except MessagesRequestError as exc:
        return JSONResponse(anthropic_error(400, str(exc)), 400)
    answer = await handle_chat(chat)
    model = str(body["model"])
    if isinstance(answer, StreamingResponse):
        return StreamingResponse(
            translate_chat_stream(answer.body_iterator, model), media_type="text/event-stream", headers=_headers(answer)
        )
    if answer.status_code != 200:
        return as_anthropic_error(answer)
    return JSONResponse(message_response(json.loads(bytes(answer.body)), model), headers=_headers(answer))
