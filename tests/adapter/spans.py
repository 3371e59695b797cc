"""Building spans for adapter tests."""

from __future__ import annotations

from typing import Any, Optional

from agentlightning.types import Span

_counter = [0]


def span(
    name: str,
    span_id: str,
    parent_id: Optional[str] = None,
    start: Optional[float] = 0.0,
    end: Optional[float] = 1.0,
    sequence_id: int = 0,
    **attributes: Any,
) -> Span:
    """A span with readable ids; attribute names use `__` for dots (`gen_ai__response__id` -> `gen_ai.response.id`)."""
    _counter[0] += 1
    return Span.from_attributes(
        attributes={key.replace("__", "."): value for key, value in attributes.items()},
        rollout_id="ro-1",
        attempt_id="at-1",
        sequence_id=sequence_id or _counter[0],
        name=name,
        trace_id="t" * 32,
        span_id=span_id,
        parent_id=parent_id,
        start_time=start,
        end_time=end,
    )


def llm(
    span_id: str, parent_id: Optional[str], start: float, end: float, response_id: Optional[str] = None, **attrs: Any
) -> Span:
    """An LLM-call span with token ids derived from its id."""
    attributes: dict[str, Any] = {
        "prompt_token_ids": [1, 2, len(span_id)],
        "response_token_ids": [3, ord(span_id[-1])],
    }
    if response_id is not None:
        attributes["gen_ai.response.id"] = response_id
    attributes.update({key.replace("__", "."): value for key, value in attrs.items()})
    return Span.from_attributes(
        attributes=attributes,
        rollout_id="ro-1",
        attempt_id="at-1",
        sequence_id=int(start * 10) + 1,
        name="openai.chat.completion",
        trace_id="t" * 32,
        span_id=span_id,
        parent_id=parent_id,
        start_time=start,
        end_time=end,
    )


def reward(span_id: str, parent_id: Optional[str], at: float, value: float) -> Span:
    return span("agentlightning.reward", span_id, parent_id, at, at, sequence_id=int(at * 10) + 1, reward=value)
