"""Zero-code capture of OpenAI SDK calls: an unchanged client's calls become `openai.chat.completion` spans with
prompt, response, model, usage and the token ids the server returned (sync, async, streaming, tools, raw responses)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agentlightning.adapter import TracerTraceToTriplet
from agentlightning.types import Span

from ..fake_openai_server import FakeOpenAIServer, encode, prompt_text
from .conftest import Capture

openai = pytest.importorskip("openai", reason="the openai extra is not installed")

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather of a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]


def llm_spans(spans: list[Span]) -> list[Span]:
    return [span for span in spans if span.name == "openai.chat.completion"]


def assert_chat_span(span: Span, *, response_text: str = "reply to: hello") -> None:
    attributes = span.attributes
    assert attributes["gen_ai.prompt.0.role"] == "system"
    assert attributes["gen_ai.prompt.0.content"] == "be brief"
    assert attributes["gen_ai.prompt.1.content"] == "hello"
    assert attributes["gen_ai.completion.0.role"] == "assistant"
    assert attributes["gen_ai.completion.0.content"] == response_text
    assert attributes["gen_ai.request.model"] == "fake-model"
    assert attributes["gen_ai.response.model"] == "fake-model"
    assert str(attributes["gen_ai.response.id"]).startswith("chatcmpl-")
    assert attributes["prompt_token_ids"] == encode(prompt_text(MESSAGES))
    assert attributes["response_token_ids"] == encode(response_text)
    assert "llm.input_messages.0.message.content" not in attributes  # mapped, not duplicated


async def test_sync_client_calls_are_captured_with_token_ids(llm_server: FakeOpenAIServer, capture: Capture) -> None:
    client = openai.OpenAI(base_url=llm_server.base_url, api_key="test")

    async def agent() -> str:
        response = await asyncio.to_thread(client.chat.completions.create, model="fake-model", messages=MESSAGES)
        return response.choices[0].message.content or ""

    result, spans = await capture(agent)
    assert result == "reply to: hello"
    [span] = llm_spans(spans)
    assert_chat_span(span)
    assert span.attributes["gen_ai.usage.prompt_tokens"] == len(encode(prompt_text(MESSAGES)))
    assert span.attributes["gen_ai.usage.completion_tokens"] == len(encode("reply to: hello"))


async def test_async_client_calls_are_captured(llm_server: FakeOpenAIServer, capture: Capture) -> None:
    client = openai.AsyncOpenAI(base_url=llm_server.base_url, api_key="test")

    async def agent() -> None:
        await client.chat.completions.create(model="fake-model", messages=MESSAGES)
        await client.chat.completions.create(model="fake-model", messages=MESSAGES)

    _, spans = await capture(agent)
    calls = llm_spans(spans)
    assert len(calls) == 2
    for span in calls:
        assert_chat_span(span)
    assert calls[0].attributes["gen_ai.response.id"] != calls[1].attributes["gen_ai.response.id"]


async def test_streamed_responses_accumulate_token_ids_across_chunks(
    llm_server: FakeOpenAIServer, capture: Capture
) -> None:
    client = openai.AsyncOpenAI(base_url=llm_server.base_url, api_key="test")

    async def agent() -> str:
        stream = await client.chat.completions.create(
            model="fake-model", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
        return "".join([chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices])

    result, spans = await capture(agent)
    assert result == "reply to: hello"
    [span] = llm_spans(spans)
    assert_chat_span(span)


async def test_sync_streaming_is_captured(llm_server: FakeOpenAIServer, capture: Capture) -> None:
    client = openai.OpenAI(base_url=llm_server.base_url, api_key="test")

    def consume() -> str:
        stream = client.chat.completions.create(model="fake-model", messages=MESSAGES, stream=True)
        return "".join(chunk.choices[0].delta.content or "" for chunk in stream)

    async def agent() -> str:
        return await asyncio.to_thread(consume)

    result, spans = await capture(agent)
    assert result == "reply to: hello"
    assert_chat_span(llm_spans(spans)[0])


async def test_tool_calls_and_offered_functions_are_recorded(llm_server: FakeOpenAIServer, capture: Capture) -> None:
    client = openai.AsyncOpenAI(base_url=llm_server.base_url, api_key="test")

    async def agent() -> Any:
        return await client.chat.completions.create(
            model="fake-model",
            messages=[{"role": "user", "content": "weather?"}],
            tools=TOOLS,  # type: ignore[arg-type]
        )

    response, spans = await capture(agent)
    call = response.choices[0].message.tool_calls[0]
    [span] = llm_spans(spans)
    attributes = span.attributes
    assert attributes["gen_ai.completion.0.tool_calls.0.name"] == "get_weather"
    assert attributes["gen_ai.completion.0.tool_calls.0.id"] == call.id
    assert json.loads(str(attributes["gen_ai.completion.0.tool_calls.0.arguments"])) == {"city": "test"}
    assert attributes["gen_ai.completion.0.finish_reason"] == "tool_calls"
    assert attributes["gen_ai.request.functions.0.name"] == "get_weather"
    assert json.loads(str(attributes["gen_ai.request.functions.0.parameters"]))["required"] == ["city"]


async def test_raw_responses_are_captured_with_token_ids(llm_server: FakeOpenAIServer, capture: Capture) -> None:
    client = openai.AsyncOpenAI(base_url=llm_server.base_url, api_key="test")

    async def agent() -> str:
        raw = await client.chat.completions.with_raw_response.create(model="fake-model", messages=MESSAGES)
        return raw.parse().choices[0].message.content or ""

    result, spans = await capture(agent)
    assert result == "reply to: hello"
    assert_chat_span(llm_spans(spans)[0])


async def test_without_token_ids_from_the_server_the_adapter_explains_the_empty_trajectory(
    llm_server_without_token_ids: FakeOpenAIServer, capture: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    client = openai.AsyncOpenAI(base_url=llm_server_without_token_ids.base_url, api_key="test")

    async def agent() -> None:
        await client.chat.completions.create(model="fake-model", messages=MESSAGES)

    _, spans = await capture(agent)
    [span] = llm_spans(spans)
    assert "prompt_token_ids" not in span.attributes and span.attributes["gen_ai.completion.0.content"]
    adapter = TracerTraceToTriplet(_skip_empty_token_spans=True)
    assert adapter.adapt(spans) == []
    assert adapter.last_diagnosis is not None and "no token ids" in str(adapter.last_diagnosis.reason)
    assert "no token ids on the calls" in caplog.text


async def test_captured_calls_become_triplets_with_the_servers_token_ids(
    llm_server: FakeOpenAIServer, capture: Capture
) -> None:
    import agentlightning as agl

    client = openai.AsyncOpenAI(base_url=llm_server.base_url, api_key="test")

    async def agent() -> None:
        await client.chat.completions.create(model="fake-model", messages=MESSAGES)
        agl.emit_reward(0.8)

    _, spans = await capture(agent)
    [triplet] = TracerTraceToTriplet().adapt(spans)
    assert triplet.prompt["token_ids"] == encode(prompt_text(MESSAGES))
    assert triplet.response["token_ids"] == encode("reply to: hello")
    assert triplet.reward == 0.8
    assert triplet.prompt["raw_content"][1] == {"role": "user", "content": "hello"}


async def test_calls_outside_a_trace_context_are_not_stored(llm_server: FakeOpenAIServer, capture: Capture) -> None:
    client = openai.AsyncOpenAI(base_url=llm_server.base_url, api_key="test")
    await client.chat.completions.create(model="fake-model", messages=MESSAGES)

    async def agent() -> None:
        return None

    _, spans = await capture(agent)
    assert spans == []


def test_uninstrument_all_restores_the_client() -> None:
    from agentlightning.instrumentation import instrument_all, uninstrument_all

    original = openai.OpenAI.request
    instrument_all(["openai"])
    assert openai.OpenAI.request is not original
    uninstrument_all(["openai"])
    assert openai.OpenAI.request is original


async def test_the_image_urls_of_a_multimodal_prompt_reach_the_triplet(
    llm_server: FakeOpenAIServer, capture: Capture
) -> None:
    client = openai.AsyncOpenAI(base_url=llm_server.base_url, api_key="test")
    content = [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
    ]

    async def agent() -> None:
        await client.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": content}])  # type: ignore[misc,list-item]

    _, spans = await capture(agent)
    [triplet] = TracerTraceToTriplet().adapt(spans)
    assert triplet.prompt["image_urls"] == ["https://example.com/cat.png"]
