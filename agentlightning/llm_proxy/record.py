"""What the proxy records about one LLM call, and how a streamed response is reassembled.

Identity: a record draws its trace and span ids once, when the call arrives, and `to_span` converts it once (later
calls only renumber the cached span). A writer that retries a batch whose first write committed but whose answer
was lost therefore sends the very same span, and the store's duplicate check (rollout, attempt, span id) drops it.

Span format (one span per call; `docs/llm_proxy.md` lists it for adapter authors):
- name `openai.chat.completion` or `openai.completion`; status OK, or ERROR with a description.
- `gen_ai.system`, `gen_ai.operation.name`, `gen_ai.request.model`, `gen_ai.response.model`, `gen_ai.response.id`,
  `gen_ai.request.{max_tokens,temperature,top_p}`, `gen_ai.prompt.<i>.{role,content,tool_call_id,tool_calls}`,
  `gen_ai.request.functions.<i>.{name,description,parameters}`,
  `gen_ai.completion.<i>.{role,content,finish_reason,tool_calls,token_ids}`, `gen_ai.usage.*`.
- `prompt_token_ids` and `response_token_ids` (first choice) as integer lists; `logprobs.content` (JSON, first
  choice) when the upstream returned logprobs.
- `agentlightning.llm.request` / `agentlightning.llm.response`: the JSON sent upstream and the (reassembled)
  response; `agentlightning.llm.{stream,latency_ms,upstream,attempts}`; `http.status_code`; on failure
  `error.type` and `error.message`.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from agentlightning.types import OtelResource, Span, SpanContext, TraceStatus
from agentlightning.utils.responses_api import ResponsesInputError, input_messages, output_message

CHAT_SPAN_NAME = "openai.chat.completion"
COMPLETION_SPAN_NAME = "openai.completion"
RESPONSES_SPAN_NAME = "openai.responses"
SPAN_NAMES = {"chat": CHAT_SPAN_NAME, "completion": COMPLETION_SPAN_NAME, "responses": RESPONSES_SPAN_NAME}
RESPONSES_TERMINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _int_list(value: Any) -> Optional[list[int]]:
    if isinstance(value, list) and all(isinstance(item, int) and not isinstance(item, bool) for item in value):
        return list(value)
    return None


def _new_trace_id() -> str:
    return os.urandom(16).hex()


def _new_span_id() -> str:
    return os.urandom(8).hex()


@dataclass
class CallRecord:
    """Everything known about one proxied call, turned into a span by `to_span`.

    `trace_id` and `span_id` are fixed when the record is created, so every conversion yields the same span.
    """

    rollout_id: str
    attempt_id: str
    kind: str  # "chat", "completion" or "responses"
    request: dict[str, Any]
    upstream: str
    stream: bool
    start_time: float = field(default_factory=time.time)
    end_time: Optional[float] = None
    response: Optional[dict[str, Any]] = None
    status_code: Optional[int] = None
    error_type: Optional[str] = None
    error_message: Optional[str] = None
    attempts: int = 0
    sequence_id: Optional[int] = None
    requested_model: Optional[str] = None
    client_api: Optional[str] = None  # the API the client spoke when not the upstream's (e.g. "anthropic.messages")
    trace_id: str = field(default_factory=_new_trace_id)
    span_id: str = field(default_factory=_new_span_id)
    _span: Optional[Span] = field(default=None, init=False, repr=False, compare=False)

    def finish(self, *, response: Optional[dict[str, Any]] = None, status_code: Optional[int] = None) -> None:
        self.end_time = time.time()
        if response is not None:
            self.response = response
        if status_code is not None:
            self.status_code = status_code

    def fail(self, error_type: str, message: str, status_code: Optional[int] = None) -> None:
        self.error_type, self.error_message = error_type, message
        self.finish(status_code=status_code)

    def to_span(self, sequence_id: int) -> Span:
        """The call as a span numbered `sequence_id`.

        The span is built on the first call (an unfinished record is stamped as ending then) and reused afterwards:
        ids, times and attributes never change between conversions, only the sequence id may.
        """
        span = self._span
        if span is None:
            span = self._span = self._build_span(sequence_id)
        elif span.sequence_id != sequence_id:
            span = self._span = span.model_copy(update={"sequence_id": sequence_id})
        return span

    def _build_span(self, sequence_id: int) -> Span:
        if self.end_time is None:
            self.end_time = time.time()
        end_time = self.end_time
        failed = self.error_type is not None
        return Span(
            rollout_id=self.rollout_id,
            attempt_id=self.attempt_id,
            sequence_id=sequence_id,
            trace_id=self.trace_id,
            span_id=self.span_id,
            parent_id=None,
            name=SPAN_NAMES[self.kind],
            status=TraceStatus(status_code="ERROR", description=self.error_message)
            if failed
            else TraceStatus(status_code="OK"),
            attributes=self.attributes(end_time),
            events=[],
            links=[],
            start_time=self.start_time,
            end_time=end_time,
            context=SpanContext(trace_id=self.trace_id, span_id=self.span_id, is_remote=False, trace_state={}),
            parent=None,
            resource=OtelResource(attributes={"service.name": "agentlightning.llm_proxy"}, schema_url=""),
        )

    def attributes(self, end_time: float) -> dict[str, Any]:
        request = self.request
        attrs: dict[str, Any] = {
            "gen_ai.system": "openai",
            "gen_ai.operation.name": "text_completion" if self.kind == "completion" else "chat",
            "agentlightning.llm.request": _json(request),
            "agentlightning.llm.stream": self.stream,
            "agentlightning.llm.latency_ms": round((end_time - self.start_time) * 1000.0, 3),
            "agentlightning.llm.upstream": self.upstream,
            "agentlightning.llm.attempts": self.attempts,
        }
        if self.client_api is not None:
            attrs["agentlightning.llm.client_api"] = self.client_api
        requested = self.requested_model or request.get("model")
        if isinstance(requested, str):
            attrs["gen_ai.request.model"] = requested
        for key in ("max_tokens", "temperature", "top_p"):
            value = request.get("max_output_tokens" if key == "max_tokens" and self.kind == "responses" else key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                attrs[f"gen_ai.request.{key}"] = value
        self._prompt_attributes(attrs)
        if self.status_code is not None:
            attrs["http.status_code"] = self.status_code
        if self.error_type is not None:
            attrs["error.type"] = self.error_type
            attrs["error.message"] = self.error_message or ""
        if self.response is not None:
            if self.kind == "responses":
                self._responses_attributes(attrs, self.response)
            else:
                self._response_attributes(attrs, self.response)
        return attrs

    def _prompt_attributes(self, attrs: dict[str, Any]) -> None:
        request = self.request
        if self.kind in ("chat", "responses"):
            messages = request.get("messages") or [] if self.kind == "chat" else _responses_messages(request)
            for index, message in enumerate(messages):
                if not isinstance(message, dict):
                    continue
                prefix = f"gen_ai.prompt.{index}"
                attrs[f"{prefix}.role"] = str(message.get("role", ""))
                content = message.get("content")
                attrs[f"{prefix}.content"] = content if isinstance(content, str) else _json(content)
                if message.get("tool_call_id"):
                    attrs[f"{prefix}.tool_call_id"] = str(message["tool_call_id"])
                if message.get("tool_calls"):
                    attrs[f"{prefix}.tool_calls"] = _json(message["tool_calls"])
            for index, tool in enumerate(request.get("tools") or []):
                function = tool.get("function", tool) if isinstance(tool, dict) else {}
                prefix = f"gen_ai.request.functions.{index}"
                attrs[f"{prefix}.name"] = str(function.get("name", ""))
                if function.get("description"):
                    attrs[f"{prefix}.description"] = str(function["description"])
                if function.get("parameters") is not None:
                    attrs[f"{prefix}.parameters"] = _json(function["parameters"])
        else:
            prompt = request.get("prompt")
            attrs["gen_ai.prompt.0.role"] = "user"
            attrs["gen_ai.prompt.0.content"] = prompt if isinstance(prompt, str) else _json(prompt)

    @staticmethod
    def _response_attributes(attrs: dict[str, Any], response: dict[str, Any]) -> None:
        attrs["agentlightning.llm.response"] = _json(response)
        if isinstance(response.get("id"), str):
            attrs["gen_ai.response.id"] = response["id"]
        if isinstance(response.get("model"), str):
            attrs["gen_ai.response.model"] = response["model"]
        prompt_ids = prompt_token_ids_of(response)
        if prompt_ids is not None:
            attrs["prompt_token_ids"] = prompt_ids
        for choice in response.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            index = choice.get("index", 0)
            prefix = f"gen_ai.completion.{index}"
            message = choice.get("message") if isinstance(choice.get("message"), dict) else None
            if message is not None:
                attrs[f"{prefix}.role"] = str(message.get("role") or "assistant")
                content = message.get("content")
                attrs[f"{prefix}.content"] = (
                    content if isinstance(content, str) else ("" if content is None else _json(content))
                )
                if message.get("tool_calls"):
                    attrs[f"{prefix}.tool_calls"] = _json(message["tool_calls"])
            elif isinstance(choice.get("text"), str):
                attrs[f"{prefix}.role"] = "assistant"
                attrs[f"{prefix}.content"] = choice["text"]
            if choice.get("finish_reason") is not None:
                attrs[f"{prefix}.finish_reason"] = str(choice["finish_reason"])
            token_ids = _int_list(choice.get("token_ids"))
            if token_ids is not None:
                attrs[f"{prefix}.token_ids"] = token_ids
                if index == 0:
                    attrs["response_token_ids"] = token_ids
            logprobs = choice.get("logprobs")
            if isinstance(logprobs, dict) and logprobs.get("content") is not None and index == 0:
                attrs["logprobs.content"] = _json(logprobs["content"])
        usage = response.get("usage")
        if isinstance(usage, dict):
            for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
                if isinstance(usage.get(key), int):
                    attrs[f"gen_ai.usage.{key}"] = usage[key]
            if isinstance(usage.get("prompt_tokens"), int):
                attrs["gen_ai.usage.input_tokens"] = usage["prompt_tokens"]
            if isinstance(usage.get("completion_tokens"), int):
                attrs["gen_ai.usage.output_tokens"] = usage["completion_tokens"]

    @staticmethod
    def _responses_attributes(attrs: dict[str, Any], response: dict[str, Any]) -> None:
        """A Responses API answer: the output items as the assistant message they become, the status as the
        finish reason, and the token ids of our server's (and vLLM's) `return_token_ids` extension."""
        attrs["agentlightning.llm.response"] = _json(response)
        if isinstance(response.get("id"), str):
            attrs["gen_ai.response.id"] = response["id"]
        if isinstance(response.get("model"), str):
            attrs["gen_ai.response.model"] = response["model"]
        prompt_ids = _int_list(response.get("prompt_token_ids"))
        if prompt_ids is not None:
            attrs["prompt_token_ids"] = prompt_ids
        output_ids = _int_list(response.get("output_token_ids"))
        if output_ids is not None:
            attrs["response_token_ids"] = output_ids
            attrs["gen_ai.completion.0.token_ids"] = output_ids
        output = response.get("output")
        if isinstance(output, list):
            try:
                message = output_message([item for item in output if isinstance(item, dict)])
            except ResponsesInputError:
                message = None
            if message is not None:
                attrs["gen_ai.completion.0.role"] = "assistant"
                attrs["gen_ai.completion.0.content"] = message["content"] or ""
                if message.get("tool_calls"):
                    attrs["gen_ai.completion.0.tool_calls"] = _json(message["tool_calls"])
        if isinstance(response.get("status"), str):
            attrs["gen_ai.completion.0.finish_reason"] = response["status"]
        usage = response.get("usage")
        if isinstance(usage, dict):
            for key in ("input_tokens", "output_tokens", "total_tokens"):
                if isinstance(usage.get(key), int):
                    attrs[f"gen_ai.usage.{key}"] = usage[key]
            if isinstance(usage.get("input_tokens"), int):
                attrs["gen_ai.usage.prompt_tokens"] = usage["input_tokens"]
            if isinstance(usage.get("output_tokens"), int):
                attrs["gen_ai.usage.completion_tokens"] = usage["output_tokens"]


def _responses_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    """A Responses request's conversation as chat messages (its raw input when it has no chat equivalent)."""
    items = request.get("input")
    instructions = request.get("instructions")
    try:
        if isinstance(items, (str, list)):
            return input_messages(instructions if isinstance(instructions, str) else None, items)
    except (ResponsesInputError, AttributeError):
        pass
    return [{"role": "user", "content": items}]


def prompt_token_ids_of(response: dict[str, Any]) -> Optional[list[int]]:
    """The prompt token ids of a response: top level (vLLM chat completions, our inference server) or in the first
    choice that has them (vLLM `/v1/completions`, where each choice carries its prompt's ids)."""
    prompt_ids = _int_list(response.get("prompt_token_ids"))
    if prompt_ids is not None:
        return prompt_ids
    for choice in response.get("choices") or []:
        if isinstance(choice, dict):
            prompt_ids = _int_list(choice.get("prompt_token_ids"))
            if prompt_ids is not None:
                return prompt_ids
    return None


class StreamAssembler:
    """Rebuilds the non-streaming response from `chat.completion.chunk` / `text_completion` chunks, or takes the
    final response object of a Responses API stream from its terminal event."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.final: Optional[dict[str, Any]] = None  # the Responses API's terminal response object
        self.header: dict[str, Any] = {}
        self.prompt_token_ids: Optional[list[int]] = None
        self.usage: Optional[dict[str, Any]] = None
        self.choices: dict[int, dict[str, Any]] = {}

    @property
    def finished(self) -> bool:
        """Whether a Responses API stream delivered its terminal event."""
        return self.final is not None

    def add(self, chunk: dict[str, Any]) -> None:
        if self.kind == "responses":
            response = chunk.get("response")
            if isinstance(response, dict):
                self.header = response  # the latest snapshot (created, in progress, then the terminal one)
                if chunk.get("type") in RESPONSES_TERMINAL_EVENTS:
                    self.final = response
            return
        for key in ("id", "created", "model", "system_fingerprint"):
            if key in chunk and key not in self.header:
                self.header[key] = chunk[key]
        prompt_ids = _int_list(chunk.get("prompt_token_ids"))
        if prompt_ids is not None:
            self.prompt_token_ids = prompt_ids
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if isinstance(choice, dict):
                self._add_choice(choice)

    def _add_choice(self, choice: dict[str, Any]) -> None:
        index = int(choice.get("index", 0))
        state = self.choices.setdefault(
            index, {"index": index, "content": "", "role": "assistant", "token_ids": [], "logprobs": [], "tools": {}}
        )
        prompt_ids = _int_list(choice.get("prompt_token_ids"))  # vLLM completions: first chunk of each choice
        if prompt_ids is not None and "prompt_token_ids" not in state:
            state["prompt_token_ids"] = prompt_ids
        delta = choice.get("delta") if self.kind == "chat" else None
        if isinstance(delta, dict):
            if delta.get("role"):
                state["role"] = delta["role"]
            if isinstance(delta.get("content"), str):
                state["content"] += delta["content"]
            for call in delta.get("tool_calls") or []:
                self._add_tool_call(state["tools"], call)
        elif isinstance(choice.get("text"), str):
            state["content"] += choice["text"]
        token_ids = _int_list(choice.get("token_ids"))
        if token_ids is not None:
            state["token_ids"].extend(token_ids)
            state["has_token_ids"] = True
        logprobs = choice.get("logprobs")
        if isinstance(logprobs, dict) and isinstance(logprobs.get("content"), list):
            state["logprobs"].extend(logprobs["content"])
            state["has_logprobs"] = True
        if choice.get("finish_reason") is not None:
            state["finish_reason"] = choice["finish_reason"]

    @staticmethod
    def _add_tool_call(tools: dict[int, dict[str, Any]], call: Any) -> None:
        if not isinstance(call, dict):
            return
        entry = tools.setdefault(
            int(call.get("index", 0)), {"type": "function", "function": {"name": "", "arguments": ""}}
        )
        if call.get("id"):
            entry["id"] = call["id"]
        function = call.get("function") or {}
        if function.get("name"):
            entry["function"]["name"] += function["name"]
        if function.get("arguments"):
            entry["function"]["arguments"] += function["arguments"]

    def response(self) -> dict[str, Any]:
        if self.kind == "responses":
            return self.final if self.final is not None else dict(self.header)
        choices = []
        for index in sorted(self.choices):
            state = self.choices[index]
            choice: dict[str, Any] = {"index": index, "finish_reason": state.get("finish_reason")}
            if self.kind == "chat":
                message: dict[str, Any] = {"role": state["role"], "content": state["content"]}
                if state["tools"]:
                    message["tool_calls"] = [state["tools"][i] for i in sorted(state["tools"])]
                choice["message"] = message
                if state.get("has_logprobs"):
                    choice["logprobs"] = {"content": state["logprobs"]}
            else:
                choice["text"] = state["content"]
            if state.get("has_token_ids"):
                choice["token_ids"] = state["token_ids"]
            if "prompt_token_ids" in state:
                choice["prompt_token_ids"] = state["prompt_token_ids"]
            choices.append(choice)
        body: dict[str, Any] = {
            **self.header,
            "object": "chat.completion" if self.kind == "chat" else "text_completion",
            "choices": choices,
        }
        if self.usage is not None:
            body["usage"] = self.usage
        if self.prompt_token_ids is not None:
            body["prompt_token_ids"] = self.prompt_token_ids
        return body
