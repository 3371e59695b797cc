"""OpenAI-compatible request models and response payloads, with vLLM's token-id extensions.

With `return_token_ids: true` a response carries `prompt_token_ids` and `token_ids` on each choice, as vLLM
(>= 0.10.2) does: chat completions carry the prompt ids at the top level; completions carry them inside each choice
(and, for compatibility with earlier versions of this server, at the top level too). Streaming chunks carry the new
`token_ids` of each delta, and the first chunk the prompt ids (for completions: in its choice).
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

from .engine import SequenceState, StreamDelta, TokenLogprob
from .sampling import SamplingParams
from .tools import ToolCallParser

ObjectKind = Literal["chat", "completion"]


class _SamplingRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str
    max_tokens: Optional[int] = Field(default=None, ge=1)
    temperature: Optional[float] = Field(default=None, ge=0, le=100)
    top_p: Optional[float] = Field(default=None, gt=0, le=1)
    top_k: Optional[int] = None
    n: int = Field(default=1, ge=1, le=64)
    stop: Union[str, list[str], None] = None
    stop_token_ids: Optional[list[int]] = None
    seed: Optional[int] = None
    stream: bool = False
    stream_options: Optional[dict[str, Any]] = None
    return_token_ids: bool = False
    ignore_eos: bool = False

    def sampling(self, *, logprobs: bool, top_logprobs: int, default_max_tokens: int) -> SamplingParams:
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        return SamplingParams(
            max_tokens=self.max_tokens or default_max_tokens,
            temperature=1.0 if self.temperature is None else float(self.temperature),
            top_p=1.0 if self.top_p is None else float(self.top_p),
            top_k=-1 if self.top_k in (None, 0) else int(self.top_k),  # type: ignore[arg-type]
            n=self.n,
            stop=stop,
            stop_token_ids=list(self.stop_token_ids or []),
            seed=self.seed,
            logprobs=logprobs,
            top_logprobs=top_logprobs,
            ignore_eos=self.ignore_eos,
        )

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.get("include_usage"))


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: Union[str, list[dict[str, Any]], None] = None


class ChatCompletionRequest(_SamplingRequest):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: Optional[int] = Field(default=None, ge=1)
    logprobs: bool = False
    top_logprobs: Optional[int] = Field(default=None, ge=0, le=20)
    tools: Optional[list[dict[str, Any]]] = None
    tool_choice: Union[str, dict[str, Any], None] = None

    @property
    def offered_tools(self) -> Optional[list[dict[str, Any]]]:
        """The tools the model may call (none with `tool_choice: "none"`)."""
        return None if self.tool_choice == "none" else self.tools

    def plain_messages(self) -> list[dict[str, Any]]:
        """Messages for the chat template; list-of-parts content is flattened to its text parts."""
        result = []
        for message in self.messages:
            data = message.model_dump(exclude_none=True)
            content = data.get("content")
            if isinstance(content, list):
                data["content"] = "".join(part.get("text", "") for part in content if isinstance(part, dict))
            elif content is None:
                data["content"] = ""
            result.append(data)
        return result


class CompletionRequest(_SamplingRequest):
    prompt: Union[str, list[int]]
    logprobs: Optional[int] = Field(default=None, ge=0, le=20)
    echo: bool = False


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _chat_logprob(entry: TokenLogprob) -> dict[str, Any]:
    return {
        "token": entry.token,
        "logprob": entry.logprob,
        "bytes": list(entry.token.encode("utf-8")),
        "top_logprobs": [
            {"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8"))}
            for _, token, logprob in entry.top
        ],
    }


def _completion_logprobs(entries: list[TokenLogprob]) -> dict[str, Any]:
    offsets, position = [], 0
    for entry in entries:
        offsets.append(position)
        position += len(entry.token)
    return {
        "tokens": [entry.token for entry in entries],
        "token_logprobs": [entry.logprob for entry in entries],
        "top_logprobs": [{token: logprob for _, token, logprob in entry.top} for entry in entries],
        "text_offset": offsets,
    }


def _response(
    request: _SamplingRequest, *, kind: ObjectKind, model: str, prompt_ids: list[int], choices: list[dict[str, Any]],
    sequences: list[SequenceState],
) -> dict[str, Any]:  # fmt: skip
    """The envelope shared by chat and completion responses, with vLLM's token ids when asked."""
    if request.return_token_ids:
        for choice, sequence in zip(choices, sequences, strict=True):
            choice["token_ids"] = list(sequence.token_ids)
    body: dict[str, Any] = {
        "id": new_id("chatcmpl" if kind == "chat" else "cmpl"),
        "object": "chat.completion" if kind == "chat" else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": usage(len(prompt_ids), sum(len(s.token_ids) for s in sequences)),
    }
    if request.return_token_ids:
        body["prompt_token_ids"] = list(prompt_ids)
    return body


def chat_response(
    request: ChatCompletionRequest,
    model: str,
    prompt_ids: list[int],
    sequences: list[SequenceState],
    parser: Optional[ToolCallParser] = None,
) -> dict[str, Any]:
    """A `chat.completion`; with a `parser`, tool calls in the text become `tool_calls` (finish reason too)."""
    choices = []
    for sequence in sequences:
        message: dict[str, Any] = {"role": "assistant", "content": sequence.text}
        finish_reason = sequence.finish_reason
        if parser is not None:
            content, calls = parser.parse(sequence.text)
            if calls:
                message = {"role": "assistant", "content": content or None,
                           "tool_calls": [call.to_openai() for call in calls]}  # fmt: skip
                finish_reason = "tool_calls"
        choices.append(
            {
                "index": sequence.index,
                "message": message,
                "finish_reason": finish_reason,
                "logprobs": {"content": [_chat_logprob(e) for e in sequence.logprobs]} if request.logprobs else None,
            }
        )
    return _response(request, kind="chat", model=model, prompt_ids=prompt_ids, choices=choices, sequences=sequences)


def completion_response(
    request: CompletionRequest, model: str, prompt_ids: list[int], prompt_text: str, sequences: list[SequenceState]
) -> dict[str, Any]:
    choices = [
        {
            "index": sequence.index,
            "text": (prompt_text if request.echo else "") + sequence.text,
            "finish_reason": sequence.finish_reason,
            "logprobs": _completion_logprobs(sequence.logprobs) if request.logprobs is not None else None,
        }
        for sequence in sequences
    ]
    if request.return_token_ids:  # vLLM puts the prompt ids inside each completion choice
        for choice in choices:
            choice["prompt_token_ids"] = list(prompt_ids)
    return _response(
        request, kind="completion", model=model, prompt_ids=prompt_ids, choices=choices, sequences=sequences
    )


def chat_chunk(
    request: ChatCompletionRequest,
    *,
    chunk_id: str,
    model: str,
    created: int,
    delta: Optional[StreamDelta] = None,
    role_for: Optional[int] = None,
    prompt_ids: Optional[list[int]] = None,
) -> dict[str, Any]:
    """One `chat.completion.chunk`: a role announcement (`role_for`), or a content `delta`."""
    choices: list[dict[str, Any]] = []
    if role_for is not None:
        choices.append({"index": role_for, "delta": {"role": "assistant", "content": ""}, "finish_reason": None})
    if delta is not None:
        content: dict[str, Any] = {"content": delta.text} if delta.text or delta.finish_reason is None else {}
        if delta.tool_calls:
            content["tool_calls"] = [{"index": i, **call} for i, call in enumerate(delta.tool_calls)]
        choice: dict[str, Any] = {
            "index": delta.index,
            "delta": content,
            "finish_reason": delta.finish_reason,
            "logprobs": {"content": [_chat_logprob(e) for e in delta.logprobs]} if request.logprobs else None,
        }
        if request.return_token_ids:
            choice["token_ids"] = list(delta.token_ids)
        choices.append(choice)
    body: dict[str, Any] = {
        "id": chunk_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": choices,
    }
    if prompt_ids is not None and request.return_token_ids:
        body["prompt_token_ids"] = list(prompt_ids)
    return body


def completion_chunk(
    request: CompletionRequest, *, chunk_id: str, model: str, created: int, delta: StreamDelta,
    prompt_ids: Optional[list[int]] = None,
) -> dict[str, Any]:  # fmt: skip
    choice: dict[str, Any] = {
        "index": delta.index,
        "text": delta.text,
        "finish_reason": delta.finish_reason,
        "logprobs": _completion_logprobs(delta.logprobs) if request.logprobs is not None else None,
    }
    if request.return_token_ids:
        choice["token_ids"] = list(delta.token_ids)
        if prompt_ids is not None:  # as vLLM: in the choice of the first chunk
            choice["prompt_token_ids"] = list(prompt_ids)
    body: dict[str, Any] = {
        "id": chunk_id,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [choice],
    }
    if prompt_ids is not None and request.return_token_ids:
        body["prompt_token_ids"] = list(prompt_ids)
    return body


def error_body(message: str, *, kind: str = "invalid_request_error", code: Optional[str] = None,
               param: Optional[str] = None) -> dict[str, Any]:  # fmt: skip
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}
