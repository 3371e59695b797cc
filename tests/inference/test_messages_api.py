"""Anthropic's Messages API on `agl serve` (`POST /v1/messages`), with the Anthropic SDK as the client: a two-turn
tool conversation, streamed and not, with the server's exact token ids; errors in Anthropic's shape."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("torch", reason="the inference extra (torch) is not installed")
anthropic = pytest.importorskip("anthropic")

from agentlightning.inference.server import InferenceServer  # noqa: E402

from .scripted import WEATHER_PARAMETERS, scripted_engine, weather_reply  # noqa: E402

TOOL = {"name": "get_weather", "description": "The current weather in a city", "input_schema": WEATHER_PARAMETERS}


@pytest.fixture(scope="module")
def server() -> Iterator[InferenceServer]:
    with InferenceServer(scripted_engine(weather_reply), api_key="secret") as running:
        yield running


@pytest.fixture()
def client(server: InferenceServer) -> Any:
    return anthropic.Anthropic(base_url=server.endpoint.removesuffix("/v1"), api_key="secret", max_retries=0)


def _turns(first: Any) -> list[dict[str, Any]]:
    call = next(block for block in first.content if block.type == "tool_use")
    return [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "sunny"}]},
    ]


def test_a_two_turn_tool_conversation_through_the_anthropic_sdk(client: Any) -> None:
    first = client.messages.create(
        model="scripted", max_tokens=300, tools=[TOOL], messages=[{"role": "user", "content": "Weather in Paris?"}]
    )
    assert first.stop_reason == "tool_use"
    text, call = first.content
    assert text.type == "text" and text.text.strip() == "Let me check."
    assert call.type == "tool_use" and call.name == "get_weather" and call.input == {"city": "Paris"}
    second = client.messages.create(model="scripted", max_tokens=300, tools=[TOOL], messages=_turns(first))
    assert second.stop_reason == "end_turn" and second.content[0].text == "The weather in Paris: sunny."


def test_a_message_carries_the_servers_exact_token_ids(client: Any) -> None:
    raw = client.messages.with_raw_response.create(
        model="scripted", max_tokens=300, messages=[{"role": "user", "content": "hi"}]
    )
    body = raw.http_response.json()
    assert body["prompt_token_ids"] and body["token_ids"]
    assert body["usage"] == {"input_tokens": len(body["prompt_token_ids"]), "output_tokens": len(body["token_ids"])}


def test_a_streamed_tool_call_assembles_in_the_sdk(client: Any) -> None:
    with client.messages.stream(
        model="scripted", max_tokens=300, tools=[TOOL], messages=[{"role": "user", "content": "Weather in Paris?"}]
    ) as stream:
        texts = list(stream.text_stream)
        message = stream.get_final_message()
    assert "".join(texts).strip() == "Let me check."
    assert message.stop_reason == "tool_use" and message.content[-1].input == {"city": "Paris"}
    assert message.usage.output_tokens > 0


def test_errors_reach_the_sdk_as_its_own_exceptions(server: InferenceServer, client: Any) -> None:
    with pytest.raises(anthropic.NotFoundError, match="does not exist"):
        client.messages.create(model="nope", max_tokens=8, messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(anthropic.BadRequestError, match="image blocks are not supported"):
        client.messages.create(
            model="scripted",
            max_tokens=8,
            messages=[{"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "http://x"}}]}],
        )
    wrong = anthropic.Anthropic(base_url=server.endpoint.removesuffix("/v1"), api_key="wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        wrong.messages.create(model="scripted", max_tokens=8, messages=[{"role": "user", "content": "hi"}])
