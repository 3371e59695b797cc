"""`LlmProxyTraceToTriplet`: triplets from spans recorded by the LLM proxy (server side).

Proxy spans come from another process (or machine), so timestamps are not trusted: spans are ordered by their
store sequence id only. Attributes read (documented in docs/capture.md for the proxy implementers):

LLM calls - a span counts when it yields both a non-empty prompt and a non-empty response token-id list from
- `prompt_token_ids` and `response_token_ids` (lists, or their JSON / Python-literal text) on any span (our proxy,
  LiteLLM's `litellm_request`, client-side spans), or
- on spans named `raw_gen_ai_request` (LiteLLM + vLLM): `llm.hosted_vllm.prompt_token_ids`, and
  `llm.hosted_vllm.response_token_ids` (a list of lists, first used) or `llm.hosted_vllm.choices[0]["token_ids"]`.
The call is identified by `gen_ai.response.id` (or `llm.hosted_vllm.id`); a repeated id is ignored (first wins).
Prompt and completion messages (`gen_ai.prompt.*`, `gen_ai.completion.*`) are copied as `raw_content` when present.

Rewards - any span with a reward (see `get_reward_value`). In ascending sequence order each reward goes to the most
recent call without a reward whose sequence id is strictly smaller than the reward's (spec: a reward at or before a
call's sequence never attaches to it; later rewards back-fill older calls). The proxy numbers a call when it arrives
while the runner numbers a reward when it writes it, so a reward emitted between two calls can land on the later one:
training does not read these triplet rewards but `agentlightning.adapter.rewards` (attribution by time, and the
outcome always on the final call).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from agentlightning.emitter.reward import get_reward_value
from agentlightning.types import Span, Triplet

from .attributes import INVOKE_AGENT, parse_literal, token_id_list
from .call_identity import count_llm_calls
from .diagnostics import diagnose_trajectory
from .messages import add_raw_content
from .triplet import TraceToTripletBase

__all__ = ["LlmProxyTraceToTriplet"]

RAW_REQUEST_SPAN = "raw_gen_ai_request"
NOT_MODEL_CALLS = frozenset({INVOKE_AGENT, "create_agent", "execute_tool"})
"""`gen_ai.operation.name`s of the OpenTelemetry GenAI conventions that are not model calls (agent runs, tool runs:
Pydantic AI's and AutoGen's own spans), so their `gen_ai.*` attributes do not count them as calls."""


def _raw_request_ids(attributes: dict[str, Any]) -> tuple[Optional[list[int]], Optional[list[int]]]:
    prompt = token_id_list(attributes.get("llm.hosted_vllm.prompt_token_ids"))
    response: Optional[list[int]] = None
    nested = parse_literal(attributes.get("llm.hosted_vllm.response_token_ids"))
    if isinstance(nested, (list, tuple)) and nested:
        response = token_id_list(nested[0])
    if response is None:
        choices = parse_literal(attributes.get("llm.hosted_vllm.choices"))
        if isinstance(choices, (list, tuple)) and choices and isinstance(choices[0], dict):
            response = token_id_list(choices[0].get("token_ids"))  # type: ignore[union-attr]
    return prompt, response


def _call_ids(span: Span) -> tuple[Optional[list[int]], Optional[list[int]]]:
    attributes = span.attributes
    prompt = token_id_list(attributes.get("prompt_token_ids"))
    response = token_id_list(attributes.get("response_token_ids"))
    if (not prompt or not response) and span.name == RAW_REQUEST_SPAN:
        prompt, response = _raw_request_ids(attributes)
    return prompt, response


def _looks_like_llm_call(span: Span) -> bool:
    if span.name in (RAW_REQUEST_SPAN, "litellm_request") or "prompt_token_ids" in span.attributes:
        return True
    if span.attributes.get("gen_ai.operation.name") in NOT_MODEL_CALLS:
        return False
    return any(key.startswith("gen_ai.") for key in span.attributes)


def _match_rewards(calls: list[tuple[Span, Triplet]], rewards: list[tuple[Span, float]]) -> dict[int, float]:
    """The reward of each call (by position), by the spec's sequence-id rule (see the module docstring)."""
    matched: dict[int, float] = {}
    for reward_span, value in sorted(rewards, key=lambda item: item[0].sequence_id):
        for index in range(len(calls) - 1, -1, -1):
            if index not in matched and calls[index][0].sequence_id < reward_span.sequence_id:
                matched[index] = value
                break
    return matched


class LlmProxyTraceToTriplet(TraceToTripletBase):
    """Triplets from LLM-proxy spans, ordered by sequence id (see the module docstring)."""

    def __init__(self) -> None:
        self.last_diagnosis = None

    def adapt(self, source: Sequence[Span], /) -> list[Triplet]:  # type: ignore[override]
        return [triplet for _, triplet in self._calls(source)]

    def _training_calls(self, source: list[Span], /) -> list[tuple[Optional[Span], Triplet]]:
        if type(self).adapt is not LlmProxyTraceToTriplet.adapt:  # a subclass making triplets its own way
            return super()._training_calls(source)
        return list(self._calls(source))

    def _calls(self, source: Sequence[Span]) -> list[tuple[Span, Triplet]]:
        spans = sorted(source, key=lambda span: (span.sequence_id, span.start_time or 0.0))
        calls: list[tuple[Span, Triplet]] = []
        seen: set[str] = set()
        rewards: list[tuple[Span, float]] = []
        for span in spans:
            value = get_reward_value(span)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                rewards.append((span, float(value)))
                continue
            prompt, response = _call_ids(span)
            if not prompt or not response:
                continue
            attributes = span.attributes
            request_id = attributes.get("gen_ai.response.id") or attributes.get("llm.hosted_vllm.id")
            if request_id:
                if str(request_id) in seen:
                    continue
                seen.add(str(request_id))
            prompt_part: dict[str, Any] = {"token_ids": prompt}
            response_part: dict[str, Any] = {"token_ids": response}
            add_raw_content(attributes, prompt_part, response_part)
            triplet = Triplet(
                prompt=prompt_part, response=response_part, reward=None, metadata={"response_id": request_id}
            )
            calls.append((span, triplet))

        matched = _match_rewards(calls, rewards)
        paired = [
            (span, triplet.model_copy(update={"reward": matched.get(index)}))
            for index, (span, triplet) in enumerate(calls)
        ]
        triplets = [triplet for _, triplet in paired]
        self.last_diagnosis = diagnose_trajectory(
            spans,
            triplets,
            llm_call_match="raw_gen_ai_request, litellm_request or spans with gen_ai.* / token-id attributes",
            llm_call_spans=count_llm_calls([span for span in spans if _looks_like_llm_call(span)]),
            reward_spans=len(rewards),
            adapter=type(self).__name__,
        )
        return paired
