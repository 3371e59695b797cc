"""The OpenAI Responses API as chat messages: its input items (and an answer's output items) as a conversation.

Shared by the inference server, which renders the conversation with its chat template, and the LLM proxy, which
records Responses calls with the same `gen_ai.prompt.*` / `gen_ai.completion.*` attributes as chat completions.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

__all__ = ["ResponsesInputError", "input_messages", "item_text", "output_message"]


class ResponsesInputError(ValueError):
    """The input uses something that has no chat equivalent here; the message names it."""


def item_text(content: Any) -> str:
    """The text of a message item's content (a string, or a list of text parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") in ("input_text", "output_text", "text"):
                parts.append(str(part.get("text", "")))
            elif isinstance(part, dict) and part.get("type") == "refusal":
                parts.append(str(part.get("refusal", "")))
            else:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise ResponsesInputError(f"input: content part of type {kind!r} is not supported")
        return "".join(parts)
    raise ResponsesInputError(f"input: message content must be text or a list of parts, got {type(content).__name__}")


def input_messages(instructions: Optional[str], items: Union[str, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """The conversation `instructions` and the input `items` describe, as chat messages.

    `function_call` items join the assistant turn before them (its text, then its calls), as one chat turn;
    `function_call_output` items become tool messages; reasoning items are dropped.
    """
    messages: list[dict[str, Any]] = []
    if instructions:
        messages.append({"role": "system", "content": instructions})
    listed = [{"role": "user", "content": items}] if isinstance(items, str) else items
    for position, item in enumerate(listed):
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise ResponsesInputError(f"input[{position}].role: unsupported role {role!r}")
            messages.append(
                {"role": "system" if role == "developer" else role, "content": item_text(item.get("content"))}
            )
        elif kind == "function_call":
            call = {
                "id": item.get("call_id") or item.get("id") or f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": item.get("name"), "arguments": item.get("arguments") or "{}"},
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": item.get("call_id"),
                    "content": output if isinstance(output, str) else json.dumps(output),
                }
            )
        elif kind == "reasoning":
            continue  # reasoning summaries of other models carry nothing a chat template can use
        else:
            raise ResponsesInputError(f"input[{position}].type: unsupported item type {kind!r}")
    return messages


def output_message(output: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """An answer's output items as the assistant chat message they become when sent back."""
    text = "".join(item_text(item.get("content")) for item in output if item.get("type") == "message")
    calls = [
        {
            "id": item.get("call_id"),
            "type": "function",
            "function": {"name": item.get("name"), "arguments": item.get("arguments") or "{}"},
        }
        for item in output
        if item.get("type") == "function_call"
    ]
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    return message
