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

Rewards - any span with a reward (see `get_reward_value`). Each reward goes to the most recent call without a reward
made before it; later rewards back-fill older calls. "Before" is decided by time when the reward span and every
call carry times (a call before a reward ended when or before the reward was emitted): the proxy numbers a call when
it arrives while the runner's tracer numbers a reward when it writes it, usually at the end of the rollout, so
sequence ids alone would hand a reward emitted between two calls to the later one. This assumes the clocks of the
runner and the proxy agree to well within the time between a call's answer and the reward that follows it (one
machine, or machines synchronised by NTP). Without times, the sequence order decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from agentlightning.emitter.reward import get_reward_value
from agentlightning.types import Span, Triplet

from .attributes import parse_literal, token_id_list
from .call_identity import count_llm_calls
from .diagnostics import diagnose_trajectory
from .trace_tree import add_raw_content
from .triplet import TraceToTripletBase

__all__ = ["LlmProxyTraceToTriplet"]

RAW_REQUEST_SPAN = "raw_gen_ai_request"


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
    return any(key.startswith("gen_ai.") for key in span.attributes)


def _match_rewards(calls: list[tuple[Span, Triplet]], rewards: list[tuple[Span, float]]) -> dict[int, float]:
    """The reward of each call (by position): see the module docstring."""
    timed = all(span.end_time is not None for span, _ in calls) and all(
        span.start_time is not None for span, _ in rewards
    )

    def before(call: Span, reward: Span) -> bool:
        if timed:
            return call.end_time <= reward.start_time  # type: ignore[operator]
        return call.sequence_id < reward.sequence_id

    def reward_order(item: tuple[Span, float]) -> tuple[float, int]:
        span = item[0]
        return (span.start_time if timed else 0.0) or 0.0, span.sequence_id

    order = sorted(range(len(calls)), key=lambda i: ((calls[i][0].end_time or 0.0) if timed else 0.0, i))
    matched: dict[int, float] = {}
    for reward_span, value in sorted(rewards, key=reward_order):
        for index in reversed(order):
            if index in matched or not before(calls[index][0], reward_span):
                continue
            matched[index] = value
            break
    return matched


class LlmProxyTraceToTriplet(TraceToTripletBase):
    """Triplets from LLM-proxy spans, ordered by sequence id (see the module docstring)."""

    def __init__(self) -> None:
        self.last_diagnosis = None

    def adapt(self, source: Sequence[Span], /) -> list[Triplet]:  # type: ignore[override]
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
        triplets = [
            triplet.model_copy(update={"reward": matched.get(index)}) for index, (_, triplet) in enumerate(calls)
        ]
        self.last_diagnosis = diagnose_trajectory(
            spans,
            triplets,
            llm_call_match="raw_gen_ai_request, litellm_request or spans with gen_ai.* / token-id attributes",
            llm_call_spans=count_llm_calls([span for span in spans if _looks_like_llm_call(span)]),
            reward_spans=len(rewards),
            adapter=type(self).__name__,
        )
        return triplets
