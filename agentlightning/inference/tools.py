"""Tool calls: offering tools in the prompt, and reading the model's calls back out of its text.

The format is the chat template's: when the template renders `tools` itself (Qwen, Hermes, SmolLM3, Llama 3.1...),
the tools go to the template and the model's output is parsed in the format the template announces: `<tool_call>`
blocks holding a JSON object (or a list of them), or, for Llama-3-style templates, a bare JSON object with `name` and
`parameters`. When the template ignores `tools` (SmolLM2, plain ChatML), the tools are described in a system
message in the Hermes format (`<tools>...</tools>`, answer with `<tool_call>{"name": ..., "arguments": ...}
</tool_call>`), and earlier calls and tool results in the conversation are written in the same format.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Optional

ToolFormat = Literal["hermes", "llama3_json"]

TOOL_CALL_START = "<tool_call>"
TOOL_CALL_END = "</tool_call>"
_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)

FALLBACK_SYSTEM_PROMPT = (
    "You may call one or more functions to assist with the user query. The functions are described in JSON within "
    "<tools></tools> tags:\n<tools>\n{tools}\n</tools>\n"
    "To call a function, answer with a JSON object holding its name and arguments within <tool_call></tool_call> "
    'tags:\n<tool_call>\n{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
)


@dataclass(frozen=True)
class ParsedToolCall:
    name: str
    arguments: str  # a JSON object, as text (the OpenAI wire format)

    def to_openai(self, call_id: Optional[str] = None) -> dict[str, Any]:
        return {
            "id": call_id or new_call_id(),
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def detect_format(chat_template: Optional[str]) -> ToolFormat:
    """The tool-call format a chat template announces (Hermes `<tool_call>` unless it is a Llama 3 template)."""
    template = chat_template or ""
    if TOOL_CALL_START not in template and ("<|python_tag|>" in template or "Environment: ipython" in template):
        return "llama3_json"
    return "hermes"


class ToolCallParser:
    """Splits generated text into content and tool calls, plain or while streaming."""

    def __init__(self, tool_format: ToolFormat = "hermes") -> None:
        self.format = tool_format

    def parse(self, text: str) -> tuple[str, list[ParsedToolCall]]:
        """(content, calls) of a finished generation; text that is not a valid call stays content."""
        if self.format == "llama3_json":
            stripped = text.strip().removeprefix("<|python_tag|>")
            calls = _calls_from_json(stripped)
            return ("", calls) if calls else (text, [])
        calls: list[ParsedToolCall] = []
        for match in _BLOCK.finditer(text):
            found = _calls_from_json(match.group(1))
            if not found:
                return text, []  # a malformed block: leave the whole answer as content, as vLLM does
            calls.extend(found)
        if not calls:
            return text, []
        content = text[: text.find(TOOL_CALL_START)].rstrip()
        return content, calls

    def visible_length(self, text: str, finished: bool) -> int:
        """How much of a growing `text` is content that can be streamed (never a tool call, nor its beginning)."""
        if self.format == "llama3_json":
            stripped = text.lstrip()
            if not stripped:
                return 0 if not finished else len(text)
            if stripped.startswith(("{", "[", "<|python_tag|>")) or "<|python_tag|>".startswith(stripped):
                if not finished:
                    return 0
                return 0 if self.parse(text)[1] else len(text)
            return len(text)
        position = text.find(TOOL_CALL_START)
        if position != -1:
            if finished and not self.parse(text)[1]:
                return len(text)
            return len(text[:position].rstrip())
        if finished:
            return len(text)
        for length in range(min(len(TOOL_CALL_START) - 1, len(text)), 0, -1):
            if text.endswith(TOOL_CALL_START[:length]):
                return len(text[: len(text) - length].rstrip())
        return len(text.rstrip())  # whitespace may precede a call, which the plain answer drops


def _calls_from_json(body: str) -> list[ParsedToolCall]:
    try:
        value = json.loads(body)
    except ValueError:
        return []
    items = value if isinstance(value, list) else [value]
    calls = []
    for item in items:
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            return []
        arguments = item.get("arguments", item.get("parameters", {}))
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                return []
        if not isinstance(arguments, Mapping):
            return []
        calls.append(ParsedToolCall(name=item["name"], arguments=json.dumps(arguments, ensure_ascii=False)))
    return calls


# ---------------------------------------------------------------------------------------------------- prompting
def template_renders_tools(tokenizer: Any) -> bool:
    """Whether the tokenizer's chat template puts `tools` into the prompt at all."""
    probe_tool = {
        "type": "function",
        "function": {"name": "agl_probe_tool", "description": "probe", "parameters": {"type": "object"}},
    }
    messages = [{"role": "user", "content": "hi"}]
    try:
        with_tools = tokenizer.apply_chat_template(messages, tools=[probe_tool], tokenize=False)
    except Exception:
        return False
    return "agl_probe_tool" in str(with_tools)


def fallback_messages(messages: list[dict[str, Any]], tools: Optional[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Messages for a template that ignores tools: tools in a system message, calls and results as text."""
    result: list[dict[str, Any]] = []
    for message in messages:
        message = dict(message)
        if message.get("role") == "assistant" and message.get("tool_calls"):
            blocks = []
            for call in message.pop("tool_calls"):
                function = call.get("function", {}) if isinstance(call, Mapping) else {}
                arguments = function.get("arguments", "{}")
                try:
                    parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
                except ValueError:
                    parsed = arguments
                payload = json.dumps({"name": function.get("name"), "arguments": parsed}, ensure_ascii=False)
                blocks.append(f"{TOOL_CALL_START}\n{payload}\n{TOOL_CALL_END}")
            content = message.get("content") or ""
            message["content"] = "\n".join(([content] if content else []) + blocks)
        elif message.get("role") == "tool":
            message.pop("tool_call_id", None)
            message["content"] = f"<tool_response>\n{message.get('content') or ''}\n</tool_response>"
        result.append(message)
    if tools:
        described = "\n".join(json.dumps(tool.get("function", tool), ensure_ascii=False) for tool in tools)
        prompt = FALLBACK_SYSTEM_PROMPT.format(tools=described)
        if result and result[0].get("role") == "system":
            result[0] = {**result[0], "content": f"{result[0].get('content') or ''}\n\n{prompt}"}
        else:
            result.insert(0, {"role": "system", "content": prompt})
    return result
