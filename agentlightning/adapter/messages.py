"""`TraceToMessages`: LLM spans as OpenAI chat conversations (fine-tuning format), e.g. to show rollouts to a critic.

Each span with `gen_ai.prompt.*`, `gen_ai.completion.*`, `gen_ai.request.*` or `gen_ai.response.*` attributes
becomes one conversation: the prompt messages followed by the assistant's completion, with the offered functions as
`tools`. Tool calls of the completion are read from `gen_ai.completion.<i>.tool_calls.<j>.id|name|arguments` and
from child spans carrying `tool.name`, `tool.parameters`, `tool.call.id`, `tool.call.type` (AgentOps style).
Needs the `openai` package (its message types validate the output).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Optional, Union, cast

from typing_extensions import TypedDict

from agentlightning.types import Span
from agentlightning.utils.otel import unflatten_attributes

from .attributes import image_urls, parse_literal
from .base import TraceAdapter

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionMessageParam

__all__ = [
    "OpenAIMessages",
    "TraceToMessages",
    "add_raw_content",
    "convert_to_openai_messages",
    "group_genai_dict",
    "openai_tool_calls",
    "openai_tools",
]


class OpenAIMessages(TypedDict):
    """One conversation: its messages and the tools that were offered (None when there were none)."""

    messages: list[ChatCompletionMessageParam]
    tools: Optional[list[ChatCompletionFunctionToolParam]]


def group_genai_dict(data: dict[str, Any], prefix: str) -> Union[dict[str, Any], list[Any]]:
    """The attributes under `prefix.` rebuilt into nested data.

    A level whose keys are numeric becomes a list ordered by index (non-numeric keys at that level are dropped);
    otherwise a dict. `gen_ai.prompt.0.role` and `.content` give `[{"role": ..., "content": ...}]`.
    """
    head = prefix + "."
    selected = {key[len(head) :]: value for key, value in data.items() if key.startswith(head)}
    if not selected:
        return {}
    if any(key.split(".", 1)[0].isdigit() for key in selected):
        selected = {key: value for key, value in selected.items() if key.split(".", 1)[0].isdigit()}
    return unflatten_attributes(selected)


def _message_adapter() -> Any:
    try:
        from openai.types.chat import ChatCompletionMessageParam
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("TraceToMessages needs the openai package: pip install 'agentlightning[openai]'") from exc
    from pydantic import TypeAdapter

    return TypeAdapter(ChatCompletionMessageParam)


def _tool_call(call: dict[str, Any]) -> dict[str, Any]:
    """A tool call in OpenAI's shape, from the flat form (`id`, `name`, `arguments`) or OpenAI's own shape."""
    nested = call.get("function")
    function: dict[str, Any] = nested if isinstance(nested, dict) else call
    arguments = function.get("arguments", function.get("parameters", ""))
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    return {
        "id": str(call.get("id", "")),
        "type": str(call.get("type") or "function"),
        "function": {"name": str(function.get("name", "")), "arguments": arguments},
    }


def _tool_calls(value: Any) -> list[dict[str, Any]]:
    """Tool calls recorded as a list, or as JSON text (as the LLM proxy records them)."""
    value = parse_literal(value)
    if not isinstance(value, list):
        return []
    return [call for call in value if isinstance(call, dict)]


def openai_tool_calls(value: Any) -> list[dict[str, Any]]:
    """Recorded tool calls (a list in OpenAI's or the flat shape, or their JSON text) in OpenAI's shape."""
    return [_tool_call(call) for call in _tool_calls(value)]


def openai_tools(functions: Any) -> Optional[list[dict[str, Any]]]:
    """The offered functions recorded as `gen_ai.request.functions.<i>.name|description|parameters` (parameters as
    JSON text or a mapping) as OpenAI tools; None when there were none."""
    if not isinstance(functions, list) or not functions:
        return None
    tools: list[dict[str, Any]] = []
    for function in functions:
        if not isinstance(function, dict):
            continue
        parameters = function.get("parameters")
        if isinstance(parameters, str):
            try:
                parameters = json.loads(parameters)
            except ValueError:
                pass
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": function.get("name", ""),
                    "description": function.get("description", ""),
                    "parameters": parameters,
                },
            }
        )
    return tools


def convert_to_openai_messages(
    prompt: list[dict[str, Any]],
    completion: list[dict[str, Any]],
    request: dict[str, Any],
    tool_calls: Sequence[dict[str, Any]] = (),
) -> OpenAIMessages:
    """Build one OpenAI conversation from grouped `gen_ai` attributes (see the module docstring)."""
    adapter = _message_adapter()
    messages: list[Any] = []
    for entry in prompt:
        role = entry.get("role")
        calls = _tool_calls(entry.get("tool_calls"))
        if role == "assistant" and calls:
            messages.append({"role": "assistant", "content": None, "tool_calls": [_tool_call(call) for call in calls]})
            continue
        message = {"role": role, "content": entry.get("content") or ""}
        if entry.get("tool_call_id") is not None:
            message["tool_call_id"] = entry["tool_call_id"]
        messages.append(adapter.validate_python(message))
    for entry in completion:
        if entry.get("role", "assistant") != "assistant":
            continue
        message: dict[str, Any] = {"role": "assistant", "content": entry.get("content")}
        calls = _tool_calls(entry.get("tool_calls")) + list(tool_calls)
        if calls:
            message["tool_calls"] = [_tool_call(call) for call in calls]
        messages.append(message)
    tools = openai_tools(request.get("functions"))
    return OpenAIMessages(messages=cast(Any, messages), tools=cast(Any, tools))


class TraceToMessages(TraceAdapter[list[OpenAIMessages]]):
    """One OpenAI conversation per LLM span, in span order."""

    def get_tool_calls(self, completion: Span, all_spans: Sequence[Span]) -> Iterator[dict[str, Any]]:
        """Tool calls recorded as child spans of `completion` (AgentOps style: `tool.*` attributes)."""
        for span in all_spans:
            if span.parent_id != completion.span_id:
                continue
            tool = group_genai_dict(span.attributes, "tool")
            if not tool:
                continue
            if not isinstance(tool, dict):
                raise ValueError(f"Tool attributes of span {span.span_id} are not a mapping: {tool!r}")
            raw_call = tool.get("call")
            call: dict[str, Any] = raw_call if isinstance(raw_call, dict) else {}
            yield {
                "id": call.get("id", ""),
                "type": call.get("type", "function"),
                "name": tool.get("name", ""),
                "arguments": tool.get("parameters", ""),
            }

    def adapt(self, source: Sequence[Span], /) -> list[OpenAIMessages]:  # type: ignore[override]
        conversations: list[OpenAIMessages] = []
        for span in source:
            prompt = group_genai_dict(span.attributes, "gen_ai.prompt")
            completion = group_genai_dict(span.attributes, "gen_ai.completion")
            request = group_genai_dict(span.attributes, "gen_ai.request")
            response = group_genai_dict(span.attributes, "gen_ai.response")
            if not isinstance(prompt, list) and prompt:
                raise ValueError(f"gen_ai.prompt of span {span.span_id} is not a list: {prompt!r}")
            if not isinstance(completion, list) and completion:
                raise ValueError(f"gen_ai.completion of span {span.span_id} is not a list: {completion!r}")
            if not isinstance(request, dict) or not isinstance(response, dict):
                raise ValueError(f"gen_ai.request/response of span {span.span_id} must be mappings")
            if not (prompt or completion or request or response):
                continue
            conversations.append(
                convert_to_openai_messages(
                    cast(list[dict[str, Any]], prompt or []),
                    cast(list[dict[str, Any]], completion or []),
                    request,
                    list(self.get_tool_calls(span, source)),
                )
            )
        return conversations


def add_raw_content(attributes: dict[str, Any], prompt: dict[str, Any], response: dict[str, Any]) -> None:
    """Copy the `gen_ai.prompt.*` / `gen_ai.completion.*` messages of a call into a triplet's `raw_content`, the
    prompt's image URLs (multimodal calls) into `image_urls` (always present, as in v0.3), and the offered functions
    (`gen_ai.request.functions.*`), when there were any, into the prompt's `tools` as OpenAI tools."""
    prompt_messages = _messages(attributes, "gen_ai.prompt")
    prompt["image_urls"] = image_urls(prompt_messages)
    if prompt_messages:
        prompt["raw_content"] = prompt_messages
    tools = openai_tools(_messages(attributes, "gen_ai.request.functions"))
    if tools:
        prompt["tools"] = tools
    completion_messages = _messages(attributes, "gen_ai.completion")
    if completion_messages:
        response["raw_content"] = completion_messages


def _messages(attributes: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """The `<prefix>.<i>.*` attributes as a list of message dicts (a bare value becomes `{"content": value}`)."""
    tree = group_genai_dict(attributes, prefix)
    if isinstance(tree, list):
        return [item if isinstance(item, dict) else {"content": item} for item in tree]
    return [tree] if tree else []
