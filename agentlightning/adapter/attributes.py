"""Reading span attributes written by different recorders (lists, JSON text or Python-literal text), the image
URLs of multimodal prompts, and the agent an OpenTelemetry GenAI `invoke_agent` span names."""

from __future__ import annotations

import ast
import json
from typing import Any, Optional

__all__ = ["image_urls", "invoked_agent_name", "parse_literal", "token_id_list"]


def parse_literal(value: Any) -> Any:
    """Decode a JSON or Python-literal string (LiteLLM stores lists and dicts with `str()`); other values pass.

    An undecodable string is returned unchanged.
    """
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text or text[0] not in "[{(":
        return value
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return value


def token_id_list(value: Any) -> Optional[list[int]]:
    """`value` as a list of token ids, or None when it is missing or not a list of ints."""
    value = parse_literal(value)
    if isinstance(value, (list, tuple)) and all(
        isinstance(item, int) and not isinstance(item, bool)
        for item in value  # type: ignore[union-attr]
    ):
        return list(value)  # type: ignore[arg-type]
    return None


def _part_image_url(part: Any) -> Optional[str]:
    """The URL of one content part: OpenAI's `{"type": "image_url", "image_url": {"url": ...}}` (or a bare string
    `image_url`), or the mapped OpenInference form `{"type": "image", "image_url": "..."}`."""
    if not isinstance(part, dict):
        return None
    image = part.get("image_url")  # type: ignore[union-attr]
    if isinstance(image, dict):
        image = image.get("url")  # type: ignore[union-attr]
    return image if isinstance(image, str) and image else None


def image_urls(messages: Any) -> list[str]:
    """The image URLs of prompt messages, in order of appearance.

    Messages come from `gen_ai.prompt.<i>.*` attributes: a message's `content` may be a list of OpenAI content parts or
    its JSON text (the LLM proxy records it that way), and instrumented spans carry `content_parts`.
    """
    urls: list[str] = []
    if not isinstance(messages, list):
        return urls
    for message in messages:  # type: ignore[union-attr]
        if not isinstance(message, dict):
            continue
        for key in ("content", "content_parts"):
            parts = parse_literal(message.get(key))  # type: ignore[union-attr]
            if isinstance(parts, dict):  # unflattened `content_parts.<k>` with a gap stays a dict
                parts = [parts[k] for k in sorted(parts, key=str)]  # type: ignore[arg-type]
            if isinstance(parts, list):
                urls.extend(url for url in map(_part_image_url, parts) if url)  # type: ignore[arg-type]
    return urls


INVOKE_AGENT = "invoke_agent"
"""`gen_ai.operation.name` of an agent invocation in the OpenTelemetry GenAI conventions; its span is named
`invoke_agent {gen_ai.agent.name}` (or `invoke_agent` alone when the agent has no name)."""


def invoked_agent_name(span_name: str, attributes: dict[str, Any]) -> Optional[str]:
    """The agent an OpenTelemetry GenAI `invoke_agent` span invokes (by its operation or its span name), read from
    the span name, else from `gen_ai.agent.id`; None for other spans and for an invocation that names no agent."""
    operation = attributes.get("gen_ai.operation.name")
    if operation != INVOKE_AGENT and not span_name.startswith(f"{INVOKE_AGENT} "):
        return None
    if span_name.startswith(f"{INVOKE_AGENT} "):
        name = span_name[len(INVOKE_AGENT) + 1 :].strip()
        if name:
            return name
    agent_id = attributes.get("gen_ai.agent.id")
    return agent_id if isinstance(agent_id, str) and agent_id else None
