"""LlmProxyTraceToTriplet: calls recorded by the LLM proxy, ordered by sequence id; rewards matched by the spec's
sequence-id rule (runtime.md 5.5), never by time (training reads `adapter.rewards`, which uses times)."""

from __future__ import annotations

import json
from typing import Any, Optional

import pytest

from agentlightning.adapter import LlmProxyTraceToTriplet
from agentlightning.types import Span


def proxy_span(
    name: str, sequence_id: int, start: Optional[float] = None, end: Optional[float] = None, **attributes: Any
) -> Span:
    return Span.from_attributes(
        attributes={key.replace("__", "."): value for key, value in attributes.items()},
        rollout_id="ro",
        attempt_id="at",
        sequence_id=sequence_id,
        name=name,
        start_time=start,
        end_time=end if end is not None else start,
    )


def raw_request(sequence_id: int, prompt: list[int], response: list[int], request_id: Optional[str] = None) -> Span:
    attributes: dict[str, Any] = {
        "llm__hosted_vllm__prompt_token_ids": str(prompt),
        "llm__hosted_vllm__response_token_ids": str([response]),
    }
    if request_id:
        attributes["llm__hosted_vllm__id"] = request_id
    return proxy_span("raw_gen_ai_request", sequence_id, **attributes)


def reward_span(sequence_id: int, value: float, at: Optional[float] = None) -> Span:
    return proxy_span("agentlightning.reward", sequence_id, start=at, reward=value)


def timed_call(sequence_id: int, start: float, end: float, token: int) -> Span:
    return proxy_span(
        "openai.chat.completion",
        sequence_id,
        start=start,
        end=end,
        prompt_token_ids=[token],
        response_token_ids=[token],
    )


def test_triplet_rewards_follow_sequence_ids_even_when_times_say_otherwise() -> None:
    # the proxy numbers calls when they arrive (1, 2); the runner writes its rewards at the end (3, 4): by the spec,
    # reward 3 goes to the most recent unmatched call before it (2) and reward 4 back-fills call 1
    spans = [timed_call(1, 10.0, 11.0, 1), timed_call(2, 12.0, 13.0, 2), reward_span(3, 0.5, at=11.5)]
    spans.append(reward_span(4, 1.0, at=13.5))
    assert [t.reward for t in LlmProxyTraceToTriplet().adapt(spans)] == [1.0, 0.5]


def test_a_reward_numbered_before_a_call_never_attaches_to_it_even_when_emitted_after_it() -> None:
    spans = [timed_call(1, 10.0, 11.0, 1), reward_span(2, 0.7, at=20.0), timed_call(3, 12.0, 13.0, 2)]
    assert [t.reward for t in LlmProxyTraceToTriplet().adapt(spans)] == [0.7, None]


def test_without_times_the_sequence_order_decides() -> None:
    spans = [raw_request(1, [1], [1], "a"), reward_span(2, 0.5), raw_request(3, [2], [2], "b"), reward_span(4, 1.0)]
    assert [t.reward for t in LlmProxyTraceToTriplet().adapt(spans)] == [0.5, 1.0]


def test_two_calls_and_a_later_reward_give_the_reward_to_the_second_call() -> None:
    spans = [raw_request(1, [1, 2], [3], "a"), raw_request(4, [5], [6, 7], "b"), reward_span(6, 0.0)]
    triplets = LlmProxyTraceToTriplet().adapt(spans)
    assert [(t.prompt["token_ids"], t.response["token_ids"], t.reward) for t in triplets] == [
        ([1, 2], [3], None),
        ([5], [6, 7], 0.0),
    ]
    assert [t.metadata["response_id"] for t in triplets] == ["a", "b"]


def test_a_repeated_response_id_counts_once_and_a_later_reward_attaches_to_it() -> None:
    spans = [raw_request(1, [1], [2], "same"), raw_request(2, [1], [2], "same"), reward_span(3, 1.0)]
    [triplet] = LlmProxyTraceToTriplet().adapt(spans)
    assert triplet.reward == 1.0


def test_spans_without_token_ids_are_not_calls(caplog: pytest.LogCaptureFixture) -> None:
    spans = [proxy_span("litellm_request", 1, gen_ai__prompt__0__content="hi"), reward_span(2, 1.0)]
    adapter = LlmProxyTraceToTriplet()
    assert adapter.adapt(spans) == []
    assert "no token ids" in str(adapter.last_diagnosis.reason)  # type: ignore[union-attr]


def test_agent_and_tool_spans_of_the_genai_conventions_are_not_counted_as_calls() -> None:
    """Pydantic AI's own spans beside the proxy's record: its `chat` span of the call shares the response id (one
    call), its `invoke_agent` and `execute_tool` spans are no calls."""
    spans = [
        proxy_span("invoke_agent calculator", 1, gen_ai__operation__name="invoke_agent", gen_ai__agent__name="c"),
        proxy_span("chat scripted", 2, gen_ai__operation__name="chat", gen_ai__response__id="r1"),
        proxy_span("execute_tool add", 3, gen_ai__operation__name="execute_tool", gen_ai__tool__name="add"),
        proxy_span(
            "openai.chat.completion", 4, gen_ai__response__id="r1", prompt_token_ids=[1], response_token_ids=[2]
        ),
    ]
    adapter = LlmProxyTraceToTriplet()
    assert len(adapter.adapt(spans)) == 1
    assert adapter.last_diagnosis is not None and adapter.last_diagnosis.llm_call_spans == 1


def test_a_single_call_without_reward_keeps_its_response_id() -> None:
    [triplet] = LlmProxyTraceToTriplet().adapt([raw_request(1, [1], [2], "only")])
    assert triplet.reward is None and triplet.metadata == {"response_id": "only"}


def test_rewards_at_or_before_a_call_never_attach_to_it() -> None:
    spans = [reward_span(1, 0.9), raw_request(2, [1], [2], "a"), reward_span(2, 0.8), reward_span(5, 0.1)]
    [triplet] = LlmProxyTraceToTriplet().adapt(spans)
    assert triplet.reward == 0.1


def test_later_rewards_back_fill_older_unmatched_calls() -> None:
    spans = [
        raw_request(1, [1], [1], "a"),
        raw_request(2, [2], [2], "b"),
        raw_request(3, [3], [3], "c"),
        reward_span(4, 0.1),
        reward_span(5, 0.2),
        reward_span(6, 0.3),
    ]
    assert [t.reward for t in LlmProxyTraceToTriplet().adapt(spans)] == [0.3, 0.2, 0.1]


def test_ordering_uses_sequence_ids_not_timestamps() -> None:
    spans = [
        proxy_span(
            "raw_gen_ai_request",
            2,
            start=1.0,
            llm__hosted_vllm__prompt_token_ids="[2]",
            llm__hosted_vllm__response_token_ids="[[2]]",
        ),
        proxy_span(
            "raw_gen_ai_request",
            1,
            start=99.0,
            llm__hosted_vllm__prompt_token_ids="[1]",
            llm__hosted_vllm__response_token_ids="[[1]]",
        ),
    ]
    assert [t.prompt["token_ids"] for t in LlmProxyTraceToTriplet().adapt(spans)] == [[1], [2]]


def test_choices_token_ids_are_a_fallback_for_the_response() -> None:
    choices = json.dumps([{"index": 0, "token_ids": [9, 9]}])
    span = proxy_span(
        "raw_gen_ai_request", 1, llm__hosted_vllm__prompt_token_ids="[1]", llm__hosted_vllm__choices=choices
    )
    [triplet] = LlmProxyTraceToTriplet().adapt([span])
    assert triplet.response["token_ids"] == [9, 9]


def test_spans_of_our_proxy_with_plain_token_id_attributes_and_messages_are_calls() -> None:
    span = proxy_span(
        "chat fake-model",
        1,
        prompt_token_ids=[1, 2],
        response_token_ids=[3],
        gen_ai__response__id="chatcmpl-9",
        gen_ai__prompt__0__role="user",
        gen_ai__prompt__0__content="hi",
        gen_ai__completion__0__role="assistant",
        gen_ai__completion__0__content="yo",
    )
    [triplet] = LlmProxyTraceToTriplet().adapt([span, reward_span(2, 1.0)])
    assert triplet.prompt == {"token_ids": [1, 2], "raw_content": [{"role": "user", "content": "hi"}], "image_urls": []}
    assert triplet.response["raw_content"] == [{"role": "assistant", "content": "yo"}]
    assert triplet.metadata["response_id"] == "chatcmpl-9" and triplet.reward == 1.0


def test_agentops_reward_payloads_count_as_rewards() -> None:
    payload = str({"type": "reward", "value": 0.6})  # a Python-literal string, as LiteLLM records dicts
    spans = [
        raw_request(1, [1], [2], "a"),
        proxy_span("agentops_reward_operation.task", 2, agentops__task__output=payload),
    ]
    [triplet] = LlmProxyTraceToTriplet().adapt(spans)
    assert triplet.reward == 0.6
