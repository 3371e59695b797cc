"""`POST /v1/messages`: Anthropic's Messages API on the inference server, served by its chat-completions route.

A Messages request is translated into a chat request (`agentlightning.utils.anthropic_messages`), answered by the
server's own chat handler (the same prompt ids, sampling and tool parsing), and its answer translated back: a
Message (with the server's `prompt_token_ids` and `token_ids` as extra fields), Anthropic's stream events, or an
error in Anthropic's shape. Agents written with the Anthropic SDK point `base_url` at the server (or at the LLM
proxy, which records the call with its token ids).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import ValidationError

from agentlightning.utils.anthropic_messages import (
    MessagesRequestError,
    anthropic_error,
    chat_request,
    message_response,
    translate_chat_stream,
)

from .protocol import ChatCompletionRequest

__all__ = ["serve_messages"]

ChatHandler = Callable[[ChatCompletionRequest], Awaitable[Any]]


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse(anthropic_error(status, message), status_code=status)


async def serve_messages(raw: bytes, chat: ChatHandler) -> Any:
    """Answer the Messages request `raw` (the request body) through the chat handler `chat`."""
    try:
        request = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        return _error(400, f"The request body is not valid JSON: {exc}")
    if not isinstance(request, dict):
        return _error(400, "The request body must be a JSON object")
    try:
        body = {**chat_request(request), "return_token_ids": True}
        chat_body = ChatCompletionRequest.model_validate(body)
    except MessagesRequestError as exc:
        return _error(400, str(exc))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        return _error(400, f"Invalid request: {problems}")
    answer = await chat(chat_body)
    model = str(request["model"])
    if isinstance(answer, StreamingResponse):
        return StreamingResponse(translate_chat_stream(answer.body_iterator, model), media_type="text/event-stream")
    if isinstance(answer, JSONResponse):
        if answer.status_code != 200:
            detail = json.loads(bytes(answer.body)).get("error", {})
            return _error(answer.status_code, str(detail.get("message", "request failed")))
        answer = json.loads(bytes(answer.body))
    return message_response(answer, model)
