"""Zero code change means the tracer asks for token ids: inside a trace context, chat completions and completions
requests made through the OpenAI SDK carry vLLM's `return_token_ids`, unless turned off, already chosen by the agent,
or refused by the server (then the call is sent again without it). The framework tests in this folder run against a
server that returns ids only when asked, so each of them shows the request reaches the server from that framework."""

from __future__ import annotations

import logging

import pytest

from agentlightning.adapter import TracerTraceToTriplet

from ..fake_openai_server import FakeOpenAIServer, encode
from .conftest import Capture, capturing

openai = pytest.importorskip("openai", reason="the openai extra is not installed")

MESSAGES = [{"role": "user", "content": "hello"}]


def asked(server: FakeOpenAIServer) -> object:
    """The `return_token_ids` value of the last request the server received (None when absent)."""
    return server.received()[-1].get("return_token_ids")


async def test_a_plain_sdk_call_asks_for_token_ids_and_gets_a_trainable_triplet(
    llm_server: FakeOpenAIServer, capture: Capture
) -> None:
    client = openai.AsyncOpenAI(base_url=llm_server.base_url, api_key="test")

    async def agent() -> None:
        await client.chat.completions.create(model="fake-model", messages=MESSAGES)  # type: ignore[arg-type]

    _, spans = await capture(agent)
    assert asked(llm_server) is True
    [triplet] = TracerTraceToTriplet().adapt(spans)
    assert triplet.prompt["token_ids"] and triplet.response["token_ids"] == encode("reply to: hello")


async def test_calls_outside_a_trace_context_are_sent_unchanged(llm_server: FakeOpenAIServer, capture: Capture) -> None:
    client = openai.AsyncOpenAI(base_url=llm_server.base_url, api_key="test")
    await client.chat.completions.create(model="fake-model", messages=MESSAGES)  # type: ignore[arg-type]
    assert asked(llm_server) is None


async def test_a_tracer_can_turn_the_request_off(llm_server: FakeOpenAIServer) -> None:
    client = openai.AsyncOpenAI(base_url=llm_server.base_url, api_key="test")

    async def agent() -> None:
        await client.chat.completions.create(model="fake-model", messages=MESSAGES)  # type: ignore[arg-type]

    async with capturing(request_token_ids=False) as run:
        _, spans = await run(agent)
    assert asked(llm_server) is None
    assert all("prompt_token_ids" not in span.attributes for span in spans)


async def test_the_environment_can_turn_the_request_off(
    llm_server: FakeOpenAIServer, capture: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGL_REQUEST_TOKEN_IDS", "0")
    client = openai.AsyncOpenAI(base_url=llm_server.base_url, api_key="test")

    async def agent() -> None:
        await client.chat.completions.create(model="fake-model", messages=MESSAGES)  # type: ignore[arg-type]

    await capture(agent)
    assert asked(llm_server) is None


async def test_the_agents_own_choice_is_kept(llm_server: FakeOpenAIServer, capture: Capture) -> None:
    client = openai.AsyncOpenAI(base_url=llm_server.base_url, api_key="test")

    async def agent() -> None:
        await client.chat.completions.create(
            model="fake-model",
            messages=MESSAGES,  # type: ignore[arg-type]
            extra_body={"return_token_ids": False},
        )

    await capture(agent)
    assert asked(llm_server) is False


async def test_a_server_that_refuses_the_field_gets_the_call_again_without_it_and_is_not_asked_again(
    llm_server_refusing_token_ids: FakeOpenAIServer, capture: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    server = llm_server_refusing_token_ids
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0)

    async def agent() -> list[str]:
        replies = []
        for _ in range(2):
            reply = await client.chat.completions.create(model="fake-model", messages=MESSAGES)  # type: ignore[arg-type]
            replies.append(reply.choices[0].message.content or "")
        return replies

    with caplog.at_level(logging.WARNING):
        replies, spans = await capture(agent)
    assert replies == ["reply to: hello"] * 2
    assert [body.get("return_token_ids") for body in server.received()[-3:]] == [True, None, None]
    assert "TOKEN-ID CAPTURE IS OFF" in caplog.text
    assert [span.status.status_code for span in spans if span.name == "openai.chat.completion"] == ["OK", "OK"]


async def test_completions_record_the_prompt_ids_vllm_puts_in_the_choice(
    llm_server: FakeOpenAIServer, capture: Capture
) -> None:
    client = openai.AsyncOpenAI(base_url=llm_server.base_url, api_key="test")

    async def agent() -> str:
        plain = await client.completions.create(model="fake-model", prompt="abc")
        stream = await client.completions.create(model="fake-model", prompt="abc", stream=True)
        streamed = "".join([chunk.choices[0].text async for chunk in stream if chunk.choices])
        assert streamed == plain.choices[0].text
        return plain.choices[0].text

    text, spans = await capture(agent)
    calls = [span for span in spans if span.name == "openai.completion"]
    assert len(calls) == 2
    for span in calls:
        assert span.attributes["prompt_token_ids"] == encode("abc")
        assert span.attributes["response_token_ids"] == encode(text)
