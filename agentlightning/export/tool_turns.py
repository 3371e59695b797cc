"""How a record writes tool calls: OpenAI's shape (default), or as the text the model saw (`tool_turns="text"`).

A chat template that cannot render tool turns (SmolLM2's, plain ChatML: it concatenates `content`, so an assistant
turn whose calls are in `tool_calls` has no text, and `tools` are ignored) was given them by our inference server as
text: the tools in a system message, each call as a `<tool_call>` block, each result as a `<tool_response>` block
(`agentlightning.inference.tools.fallback_messages`). Writing a record's messages the same way lets a trainer that
renders messages again (TRL's DPOTrainer) rebuild the prompt the model really saw with such a template.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Optional

from agentlightning.inference.tools import fallback_messages

if TYPE_CHECKING:
    from .writers import RecordWriter

__all__ = ["TextToolTurnsWriter", "ToolTurns", "as_text_tool_turns"]

ToolTurns = Literal["openai", "text"]
"""`openai`: `tool_calls`, `role: "tool"` and a `tools` column (for templates that render tools: Qwen, Hermes, Llama
3.1, SmolLM3, ...); `text`: calls, results and tools written as text (for templates that do not: SmolLM2, ChatML)."""


def _tools(record: dict[str, Any]) -> Optional[list[dict[str, Any]]]:
    raw = record.get("tools")
    return json.loads(raw) if isinstance(raw, str) and raw else None


def as_text_tool_turns(record: dict[str, Any]) -> dict[str, Any]:
    """`record` (sft, rl or preference) with its tool calls, tool results and offered tools written as text the
    way the inference server renders them for a template without tool support; `tools` becomes null."""
    tools = _tools(record)
    result = dict(record)
    if "messages" in record:
        result["messages"] = fallback_messages(record["messages"], tools)
    else:  # a preference pair: the tools' system message goes with the shared prompt
        result["prompt"] = fallback_messages(record["prompt"], tools)
        result["chosen"] = fallback_messages(record["chosen"], None)
        result["rejected"] = fallback_messages(record["rejected"], None)
    result["tools"] = None
    return result


class TextToolTurnsWriter:
    """A `RecordWriter` that passes every record through `as_text_tool_turns` to `inner`."""

    def __init__(self, inner: RecordWriter) -> None:
        self.inner = inner
        self.path: Optional[Path] = inner.path

    def write(self, record: dict[str, Any]) -> None:
        self.inner.write(as_text_tool_turns(record))

    def close(self) -> None:
        self.inner.close()

    def abort(self) -> None:
        self.inner.abort()
