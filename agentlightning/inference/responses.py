"""The OpenAI Responses API (`POST /v1/responses`) over the chat engine: the OpenAI Agents SDK's default path.

A request's `instructions` and `input` items (messages, `function_call`, `function_call_output`) become a chat
conversation, function tools become chat tools, and the answer becomes `message` and `function_call` output items,
plain or as the Responses API's stream of events. Stateless: `previous_response_id` and `conversation` are refused.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

from agentlightning.utils.responses_api import ResponsesInputError, input_messages, output_message

from .engine import InferenceEngine, SequenceState
from .sampling import SamplingParams
from .tools import ToolCallParser, new_call_id

ResponsesRequestError = ResponsesInputError
"""The request uses something this server does not support; the message names it."""


class ResponsesRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str
    input: Union[str, list[dict[str, Any]]]
    instructions: Optional[str] = None
    tools: Optional[list[dict[str, Any]]] = None
    tool_choice: Union[str, dict[str, Any], None] = None
    max_output_tokens: Optional[int] = Field(default=None, ge=1)
    temperature: Optional[float] = Field(default=None, ge=0, le=100)
    top_p: Optional[float] = Field(default=None, gt=0, le=1)
    stream: bool = False
    previous_response_id: Optional[str] = None
    conversation: Optional[Any] = None
    parallel_tool_calls: Optional[bool] = None
    metadata: Optional[dict[str, Any]] = None
    seed: Optional[int] = None
    return_token_ids: bool = False  # as vLLM's extension: the prompt and output ids in the response object

    def sampling(self, default_max_tokens: int) -> SamplingParams:
        return SamplingParams(
            max_tokens=self.max_output_tokens or default_max_tokens,
            temperature=1.0 if self.temperature is None else float(self.temperature),
            top_p=1.0 if self.top_p is None else float(self.top_p),
            seed=self.seed,
        )

    def chat_tools(self) -> Optional[list[dict[str, Any]]]:
        """Function tools in the chat format (other tool types are refused)."""
        if not self.tools or self.tool_choice == "none":
            return None
        result = []
        for tool in self.tools:
            if tool.get("type") != "function":
                raise ResponsesRequestError(f"tools: only function tools are supported, got type {tool.get('type')!r}")
            function = {key: tool[key] for key in ("name", "description", "parameters") if key in tool}
            result.append({"type": "function", "function": function})
        return result

    def chat_messages(self) -> list[dict[str, Any]]:
        """The conversation the input items describe, as chat messages."""
        if self.previous_response_id or self.conversation:
            raise ResponsesRequestError(
                "previous_response_id/conversation: this server is stateless; send the whole conversation as input"
            )
        messages = input_messages(self.instructions, self.input)
        if not messages or all(m["role"] == "system" for m in messages):
            raise ResponsesRequestError("input: the conversation has no user or assistant message")
        return messages


def _message_item(text: str, item_id: str, status: str = "completed") -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id,
        "status": status,
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    }


def _call_item(name: str, arguments: str, item_id: str, call_id: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


def _envelope(
    request: ResponsesRequest, response_id: str, created: int, status: str, output: list[dict[str, Any]],
    usage: Optional[dict[str, Any]],
) -> dict[str, Any]:  # fmt: skip
    return {
        "id": response_id,
        "object": "response",
        "created_at": created,
        "status": status,
        "model": request.model,
        "output": output,
        "usage": usage,
        "instructions": request.instructions,
        "tools": request.tools or [],
        "tool_choice": request.tool_choice or "auto",
        "parallel_tool_calls": True if request.parallel_tool_calls is None else request.parallel_tool_calls,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "max_output_tokens": request.max_output_tokens,
        "metadata": request.metadata or {},
        "error": None,
        "incomplete_details": None if status != "incomplete" else {"reason": "max_output_tokens"},
        "text": {"format": {"type": "text"}},
    }


def _usage(prompt_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt_tokens + output_tokens,
    }


def _output_items(sequence: SequenceState, parser: Optional[ToolCallParser]) -> list[dict[str, Any]]:
    content, calls = parser.parse(sequence.text) if parser is not None else (sequence.text, [])
    items: list[dict[str, Any]] = []
    if content or not calls:
        items.append(_message_item(content, _item_id("msg")))
    for call in calls:
        items.append(_call_item(call.name, call.arguments, _item_id("fc"), new_call_id()))
    return items


def remember_response_turn(
    engine: InferenceEngine, prompt_ids: list[int], output: list[dict[str, Any]], token_ids: list[int]
) -> None:
    """Record the answer as the chat turn its output items become when sent back (see `chat_messages`)."""
    message = output_message(output)
    calls = [str(call["id"]) for call in message.get("tool_calls") or []]
    engine.remember_turn(prompt_ids, message["content"], calls, token_ids)


def _item_id(prefix: str) -> str:
    return new_call_id().replace("call", prefix, 1)


def response_body(
    request: ResponsesRequest, prompt_ids: list[int], sequence: SequenceState, parser: Optional[ToolCallParser]
) -> dict[str, Any]:
    """The `response` object of a finished generation."""
    output = _output_items(sequence, parser)
    body = _envelope(
        request,
        _item_id("resp"),
        int(time.time()),
        _status(sequence, output),
        output,
        _usage(len(prompt_ids), len(sequence.token_ids)),
    )
    return _with_token_ids(request, body, prompt_ids, sequence)


def _status(sequence: SequenceState, output: list[dict[str, Any]]) -> str:
    """ "incomplete" only when the length limit cut the answer: a complete tool call is a complete answer."""
    calls = any(item.get("type") == "function_call" for item in output)
    return "incomplete" if sequence.finish_reason == "length" and not calls else "completed"


def _with_token_ids(
    request: ResponsesRequest, body: dict[str, Any], prompt_ids: list[int], sequence: SequenceState
) -> dict[str, Any]:
    if request.return_token_ids:
        body["prompt_token_ids"] = list(prompt_ids)
        body["output_token_ids"] = list(sequence.token_ids)
    return body


async def stream_response(
    engine: InferenceEngine,
    request: ResponsesRequest,
    prompt_ids: list[int],
    params: SamplingParams,
    parser: Optional[ToolCallParser],
) -> AsyncIterator[bytes]:
    """The Responses API event stream: created, text deltas of one message item, function-call items, completed."""
    response_id, created = _item_id("resp"), int(time.time())
    sequence_number = 0

    def event(kind: str, **payload: Any) -> bytes:
        nonlocal sequence_number
        body = {"type": kind, "sequence_number": sequence_number, **payload}
        sequence_number += 1
        return f"event: {kind}\ndata: {json.dumps(body, separators=(',', ':'))}\n\n".encode()

    yield event("response.created", response=_envelope(request, response_id, created, "in_progress", [], None))
    yield event("response.in_progress", response=_envelope(request, response_id, created, "in_progress", [], None))
    message_id = _item_id("msg")
    message_open = False
    text = ""
    visible = parser.visible_length if parser is not None else None
    final: Optional[SequenceState] = None
    try:
        async for sequences in engine.astream(prompt_ids, params):
            final = sequences[0]
            for delta in engine.deltas(sequences, params, visible):
                if not delta.text:
                    continue
                if not message_open:
                    message_open = True
                    yield event("response.output_item.added", output_index=0,
                                item=_message_item("", message_id, "in_progress"))  # fmt: skip
                    yield event("response.content_part.added", item_id=message_id, output_index=0, content_index=0,
                                part={"type": "output_text", "text": "", "annotations": []})  # fmt: skip
                text += delta.text
                yield event("response.output_text.delta", item_id=message_id, output_index=0, content_index=0,
                            delta=delta.text, logprobs=[])  # fmt: skip
    except Exception as exc:
        failed = _envelope(request, response_id, created, "failed", [], None)
        failed["error"] = {"code": "server_error", "message": f"Generation failed: {exc}"}
        yield event("response.failed", response=failed)
        return
    assert final is not None
    calls = parser.parse(final.text)[1] if parser is not None else []
    output: list[dict[str, Any]] = []
    if message_open or not calls:
        if not message_open:
            yield event("response.output_item.added", output_index=0, item=_message_item("", message_id, "in_progress"))
            yield event("response.content_part.added", item_id=message_id, output_index=0, content_index=0,
                        part={"type": "output_text", "text": "", "annotations": []})  # fmt: skip
        part = {"type": "output_text", "text": text, "annotations": []}
        yield event("response.output_text.done", item_id=message_id, output_index=0, content_index=0, text=text,
                    logprobs=[])  # fmt: skip
        yield event("response.content_part.done", item_id=message_id, output_index=0, content_index=0, part=part)
        output.append(_message_item(text, message_id))
        yield event("response.output_item.done", output_index=0, item=output[-1])
    for call in calls:
        index = len(output)
        item = _call_item(call.name, call.arguments, _item_id("fc"), new_call_id())
        yield event("response.output_item.added", output_index=index, item={**item, "arguments": "",
                                                                            "status": "in_progress"})  # fmt: skip
        yield event("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                    delta=call.arguments)  # fmt: skip
        yield event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                    arguments=call.arguments, name=call.name)  # fmt: skip
        output.append(item)
        yield event("response.output_item.done", output_index=index, item=item)
    status = _status(final, output)
    body = _envelope(request, response_id, created, status, output, _usage(len(prompt_ids), len(final.token_ids)))
    body = _with_token_ids(request, body, prompt_ids, final)
    remember_response_turn(engine, prompt_ids, output, final.token_ids)
    yield event("response.completed" if status == "completed" else "response.incomplete", response=body)
