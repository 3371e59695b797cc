"""Thin mapping of third-party instrumentation attributes onto Agent Lightning's span conventions.

Applied to every span when it is converted for storage (on the writer thread, not on the agent's thread).

OpenInference OpenAI spans (instrumentation scope `openinference.instrumentation.openai`, kind LLM) become:
- span name `openai.chat.completion` (chat completions), `openai.completion`, `openai.responses` or
  `openai.embeddings`, which the default `llm_call_match` of the triplet adapter recognises;
- `gen_ai.prompt.<i>.role|content|name|tool_call_id`, `gen_ai.prompt.<i>.tool_calls.<j>.id|name|arguments`, and for
  multimodal messages `gen_ai.prompt.<i>.content_parts.<k>.type|text|image_url`;
- `gen_ai.completion.<i>.role|content|finish_reason` and `gen_ai.completion.<i>.tool_calls.<j>.id|name|arguments`;
- `gen_ai.request.model`, `gen_ai.request.<sampling parameter>`, `gen_ai.request.functions.<i>.name|description|
  parameters`, `gen_ai.response.model`, `gen_ai.usage.prompt_tokens|completion_tokens|total_tokens`,
  `gen_ai.system = "openai"`;
- `prompt_token_ids` / `response_token_ids` / `gen_ai.response.id` are recorded directly from the response by the
  token-id wrapper (`agentlightning.instrumentation.token_ids`).
The OpenInference message attributes (`llm.input_messages.*`, `llm.output_messages.*`, `llm.tools.*`) and the raw
`input.value` / `output.value` JSON are dropped once mapped (they repeat the same content); the other `llm.*`
attributes and `openinference.span.kind` are kept.

OpenInference LangChain spans of LangGraph nodes (a CHAIN or AGENT span whose `metadata.langgraph_node` equals its
name) get `agent.name = <node name>`, so `agent_match` can select the LLM calls made inside a node, and
`langgraph.node = <node name>`, which marks them as nodes: the span they hang under is their graph, and a graph
compiled with a name (`create_react_agent(name="calculator")`) is an agent of that name for the adapters
(`TraceTree.agent_name`) and the dashboard. A graph's own span cannot be told from the other chain spans of a node
by its attributes, only by its node children, so that is decided when the trace is read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Optional

from agentlightning.types import Attributes, Span

__all__ = ["OPENAI_LLM_SPAN_NAMES", "normalize_span"]

OPENINFERENCE_KIND = "openinference.span.kind"
OPENAI_SCOPE = "openinference.instrumentation.openai"
LANGCHAIN_SCOPE = "openinference.instrumentation.langchain"
LANGGRAPH_NODE = "langgraph.node"

OPENAI_LLM_SPAN_NAMES = {
    "ChatCompletion": "openai.chat.completion",
    "Completion": "openai.completion",
    "Response": "openai.responses",
    "CreateEmbeddings": "openai.embeddings",
}

_REQUEST_PARAMETERS = ("temperature", "top_p", "max_tokens", "max_completion_tokens", "seed", "n")
_DROPPED_PREFIXES = ("llm.input_messages.", "llm.output_messages.", "llm.tools.")
_DROPPED_KEYS = frozenset({"input.value", "output.value", "input.mime_type", "output.mime_type"})


def normalize_span(span: Span, scope_name: Optional[str]) -> Span:
    """Map the attributes of a span recorded by a known instrumentor (other spans are returned unchanged)."""
    attributes = span.attributes
    kind = attributes.get(OPENINFERENCE_KIND)
    if kind is None:
        return span
    if kind == "LLM" and scope_name == OPENAI_SCOPE:
        name = OPENAI_LLM_SPAN_NAMES.get(span.name, span.name)
        return span.model_copy(update={"name": name, "attributes": _map_openai_llm(attributes)})
    if kind in ("CHAIN", "AGENT") and scope_name == LANGCHAIN_SCOPE and LANGGRAPH_NODE not in attributes:
        node = _langgraph_node(attributes.get("metadata"))
        if node is not None and node == span.name:
            marked = {**attributes, LANGGRAPH_NODE: node}
            marked.setdefault("agent.name", node)
            return span.model_copy(update={"attributes": marked})
    return span


def _langgraph_node(metadata: Any) -> Optional[str]:
    if not isinstance(metadata, str) or "langgraph_node" not in metadata:
        return None
    try:
        parsed = json.loads(metadata)
    except ValueError:
        return None
    node = parsed.get("langgraph_node") if isinstance(parsed, dict) else None
    return node if isinstance(node, str) else None


def _map_openai_llm(attributes: Mapping[str, Any]) -> Attributes:
    mapped: Attributes = {}
    has_messages = False
    for key, value in attributes.items():
        if key.startswith("llm.input_messages."):
            has_messages = True
            target = _message_key("gen_ai.prompt", key[len("llm.input_messages.") :])
            if target is not None:
                mapped[target] = value
        elif key.startswith("llm.output_messages."):
            target = _message_key("gen_ai.completion", key[len("llm.output_messages.") :])
            if target is not None:
                mapped[target] = value
        elif key.startswith("llm.tools."):
            _map_tool(mapped, key, value)
    mapped["gen_ai.system"] = "openai"
    model = attributes.get("llm.model_name")
    if model is not None:
        mapped["gen_ai.response.model"] = model
    _map_invocation(mapped, attributes.get("llm.invocation_parameters"))
    for source, target in (
        ("llm.token_count.prompt", "gen_ai.usage.prompt_tokens"),
        ("llm.token_count.completion", "gen_ai.usage.completion_tokens"),
        ("llm.token_count.total", "gen_ai.usage.total_tokens"),
    ):
        if source in attributes:
            mapped[target] = attributes[source]
    finish = attributes.get("llm.finish_reason")
    if finish is not None and "gen_ai.completion.0.finish_reason" not in mapped:
        mapped["gen_ai.completion.0.finish_reason"] = finish
    result: Attributes = {}
    for key, value in attributes.items():
        if key.startswith(_DROPPED_PREFIXES):
            continue
        if has_messages and key in _DROPPED_KEYS:
            continue
        result[key] = value
    result.update(mapped)
    return result


def _message_key(prefix: str, rest: str) -> Optional[str]:
    """`0.message.role` -> `<prefix>.0.role`; tool calls and multimodal text parts are flattened as well."""
    index, _, path = rest.partition(".")
    if not index.isdigit() or not path.startswith("message."):
        return None
    field = path[len("message.") :]
    if field in ("role", "content", "name", "tool_call_id"):
        return f"{prefix}.{index}.{field}"
    if field.startswith("tool_calls."):
        call_index, _, call_field = field[len("tool_calls.") :].partition(".")
        short = {
            "tool_call.id": "id",
            "tool_call.function.name": "name",
            "tool_call.function.arguments": "arguments",
        }.get(call_field)
        if short is None or not call_index.isdigit():
            return None
        return f"{prefix}.{index}.tool_calls.{call_index}.{short}"
    if field.startswith("contents."):
        part, _, part_field = field[len("contents.") :].partition(".")
        short = {
            "message_content.text": "text",
            "message_content.type": "type",
            "message_content.image.image.url": "image_url",
        }.get(part_field)
        if short is None or not part.isdigit():
            return None
        return f"{prefix}.{index}.content_parts.{part}.{short}"
    return None


def _map_tool(mapped: Attributes, key: str, value: Any) -> None:
    # llm.tools.<i>.tool.json_schema = '{"type": "function", "function": {...}}'
    rest = key[len("llm.tools.") :]
    index, _, field = rest.partition(".")
    if field != "tool.json_schema" or not isinstance(value, str):
        return
    try:
        schema = json.loads(value)
    except ValueError:
        return
    function = schema.get("function", schema) if isinstance(schema, dict) else None
    if not isinstance(function, dict):
        return
    prefix = f"gen_ai.request.functions.{index}"
    if isinstance(function.get("name"), str):
        mapped[f"{prefix}.name"] = function["name"]
    if isinstance(function.get("description"), str):
        mapped[f"{prefix}.description"] = function["description"]
    if function.get("parameters") is not None:
        mapped[f"{prefix}.parameters"] = json.dumps(function["parameters"])


def _map_invocation(mapped: Attributes, raw: Any) -> None:
    if not isinstance(raw, str):
        return
    try:
        parameters = json.loads(raw)
    except ValueError:
        return
    if not isinstance(parameters, dict):
        return
    model = parameters.get("model")
    if isinstance(model, str):
        mapped["gen_ai.request.model"] = model
    for name in _REQUEST_PARAMETERS:
        value = parameters.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            mapped[f"gen_ai.request.{name}"] = value
