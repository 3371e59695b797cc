"""Anthropic's Messages API through the LLM proxy, with the Anthropic SDK as the client: a two-turn tool
conversation, streamed and not, recorded under its rollout with the upstream's exact token ids; errors reach the
SDK as its own exceptions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("torch", reason="the inference extra (torch) is not installed")
anthropic = pytest.importorskip("anthropic")

from agentlightning.inference.server import InferenceServer  # noqa: E402
from agentlightning.llm_proxy import LLMProxy  # noqa: E402
from agentlightning.store import InMemoryLightningStore  # noqa: E402
from agentlightning.types import AttemptedRollout  # noqa: E402

from ..inference.scripted import WEATHER_PARAMETERS, scripted_engine, weather_reply  # noqa: E402
from .conftest import base_url, rollout, spans_of  # noqa: E402

TOOL = {"name": "get_weather", "description": "The current weather in a city", "input_schema": WEATHER_PARAMETERS}
QUESTION = [{"role": "user", "content": "Weather in Paris?"}]


@pytest.fixture(scope="module")
def upstream_server() -> Iterator[InferenceServer]:
    with InferenceServer(scripted_engine(weather_reply)) as server:
        yield server


@pytest.fixture
def proxy(upstream_server: InferenceServer, store: InMemoryLightningStore) -> Iterator[LLMProxy]:
    model_list = [
        {
            "model_name": "policy",
            "litellm_params": {"model": "hosted_vllm/scripted", "api_base": upstream_server.endpoint},
        }
    ]
    running = LLMProxy(model_list=model_list, store=store)  # type: ignore[arg-type]
    running.start()
    yield running
    if running.is_running():
        running.stop()


def _client(proxy: LLMProxy, attempted: AttemptedRollout) -> Any:
    # The Anthropic SDK appends /v1/messages to its base URL: give it the rollout's URL without /v1.
    url = base_url(proxy, attempted).removesuffix("/v1")
    return anthropic.Anthropic(base_url=url, api_key=proxy.api_key or "unused", max_retries=0)


def _second_turn(first: Any) -> list[dict[str, Any]]:
    call = next(block for block in first.content if block.type == "tool_use")
    return [
        *QUESTION,
        {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "sunny"}]},
    ]


def test_a_two_turn_tool_conversation_is_recorded_with_exact_token_ids(
    proxy: LLMProxy, store: InMemoryLightningStore
) -> None:
    attempted = rollout(store)
    client = _client(proxy, attempted)
    first = client.messages.create(model="policy", max_tokens=300, tools=[TOOL], messages=QUESTION)
    assert first.stop_reason == "tool_use" and first.content[-1].input == {"city": "Paris"}
    second = client.messages.create(model="policy", max_tokens=300, tools=[TOOL], messages=_second_turn(first))
    assert second.content[0].text == "The weather in Paris: sunny."
    spans = spans_of(proxy, store, attempted)
    assert [span.name for span in spans] == ["openai.chat.completion", "openai.chat.completion"]
    for span in spans:
        attrs = span.attributes
        assert attrs["agentlightning.llm.client_api"] == "anthropic.messages"
        assert attrs["prompt_token_ids"] and attrs["response_token_ids"]
    first_span, second_span = spans
    # the second call's prompt continues the first call's conversation token for token (one multi-turn sample)
    whole = list(first_span.attributes["prompt_token_ids"]) + list(first_span.attributes["response_token_ids"])  # type: ignore[arg-type]
    assert list(second_span.attributes["prompt_token_ids"])[: len(whole)] == whole  # type: ignore[arg-type]
    assert json.loads(second_span.attributes["gen_ai.prompt.1.tool_calls"])[0]["function"]["name"] == "get_weather"  # type: ignore[arg-type]


def test_a_streamed_message_is_assembled_by_the_sdk_and_recorded_once(
    proxy: LLMProxy, store: InMemoryLightningStore
) -> None:
    attempted = rollout(store)
    with _client(proxy, attempted).messages.stream(
        model="policy", max_tokens=300, tools=[TOOL], messages=QUESTION
    ) as stream:
        message = stream.get_final_message()
    assert message.stop_reason == "tool_use" and message.content[-1].input == {"city": "Paris"}
    (span,) = spans_of(proxy, store, attempted)
    assert span.attributes["agentlightning.llm.stream"] is True and span.attributes["response_token_ids"]


def test_errors_reach_the_anthropic_sdk_as_its_own_exceptions(proxy: LLMProxy, store: InMemoryLightningStore) -> None:
    attempted = rollout(store)
    client = _client(proxy, attempted)
    with pytest.raises(anthropic.NotFoundError, match="not served by this proxy"):
        client.messages.create(model="nope", max_tokens=8, messages=QUESTION)
    with pytest.raises(anthropic.BadRequestError, match="needs 'max_tokens'"):
        client.post("/v1/messages", body={"model": "policy", "messages": QUESTION}, cast_to=object)
    unknown = anthropic.Anthropic(
        base_url=base_url(proxy, attempted).removesuffix("/v1").replace(attempted.attempt.attempt_id, "at-nope"),
        api_key="unused",
        max_retries=0,
    )
    with pytest.raises(anthropic.NotFoundError):
        unknown.messages.create(model="policy", max_tokens=8, messages=QUESTION)
