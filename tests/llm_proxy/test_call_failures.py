"""Calls the proxy cannot serve in full: an attempt the store does not know (refused before forwarding) and an
upstream that breaks a stream off (the client gets an error event the OpenAI SDK raises; the call is recorded)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

openai = pytest.importorskip("openai", reason="the OpenAI SDK is not installed")

from agentlightning.llm_proxy import LLMProxy  # noqa: E402
from agentlightning.store import InMemoryLightningStore  # noqa: E402

from .broken_upstream import BrokenStreamUpstream, Mode  # noqa: E402
from .conftest import MESSAGES, client_for, rollout, spans_of  # noqa: E402
from .fake_upstream import FakeUpstream  # noqa: E402


def test_a_call_for_an_unknown_attempt_of_a_known_rollout_is_a_404_and_not_forwarded(
    proxy: LLMProxy, store: InMemoryLightningStore, upstream: FakeUpstream
) -> None:
    attempted = rollout(store)
    url = f"{proxy.endpoint}/rollout/{attempted.rollout_id}/attempt/at-nope/v1"
    client = openai.OpenAI(base_url=url, api_key="x", max_retries=0)
    with pytest.raises(openai.NotFoundError, match="no attempt 'at-nope'") as raised:
        client.chat.completions.create(model="fake", messages=MESSAGES)
    assert raised.value.code == "attempt_not_found"
    assert upstream.script.requests == []


def test_a_call_for_an_earlier_attempt_of_a_rollout_is_served(
    proxy: LLMProxy, store: InMemoryLightningStore, upstream: FakeUpstream
) -> None:
    first = rollout(store)
    asyncio.run(store.update_attempt(first.rollout_id, first.attempt.attempt_id, status="failed"))
    asyncio.run(store.start_attempt(first.rollout_id))  # the first attempt is no longer the latest
    reply = client_for(proxy, first).chat.completions.create(model="fake", messages=MESSAGES)
    assert reply.choices[0].message.content == "pong"
    assert len(spans_of(proxy, store, first)) == 1


def _broken_proxy(server: BrokenStreamUpstream, store: InMemoryLightningStore) -> LLMProxy:
    model_list: Any = [{"model_name": "broken", "litellm_params": {"model": "broken", "api_base": server.api_base}}]
    proxy = LLMProxy(model_list=model_list, store=store, num_retries=0)
    proxy.start()
    return proxy


@pytest.mark.parametrize("mode", ["die", "eof"])
def test_a_stream_the_upstream_breaks_off_raises_an_api_error_in_the_openai_client(
    mode: Mode, store: InMemoryLightningStore
) -> None:
    with BrokenStreamUpstream(mode) as server:
        proxy = _broken_proxy(server, store)
        try:
            attempted = rollout(store)
            received: list[str] = []
            stream = client_for(proxy, attempted).chat.completions.create(
                model="broken", messages=MESSAGES, stream=True
            )
            with pytest.raises(openai.APIError, match="upstream") as raised:
                for chunk in stream:
                    received.append(chunk.choices[0].delta.content or "")
            assert "".join(received) == "pong"  # what the upstream sent before it broke off is relayed
            assert isinstance(raised.value.body, dict) and raised.value.body["code"] == "upstream_stream_interrupted"
        finally:
            proxy.stop()


def test_a_stream_the_upstream_breaks_off_is_recorded_as_a_failed_call(store: InMemoryLightningStore) -> None:
    with BrokenStreamUpstream("die") as server:
        proxy = _broken_proxy(server, store)
        try:
            attempted = rollout(store)
            stream = client_for(proxy, attempted).chat.completions.create(
                model="broken", messages=MESSAGES, stream=True
            )
            with pytest.raises(openai.APIError):
                list(stream)
            [span] = spans_of(proxy, store, attempted)
        finally:
            proxy.stop()
    assert span.status.status_code == "ERROR" and "broke off" in (span.status.description or "")
    assert span.attributes["error.type"] != "StreamInterrupted"
    assert span.attributes["gen_ai.completion.0.content"] == "pong"  # the part that arrived


def test_a_stream_that_reaches_done_is_recorded_ok(proxy: LLMProxy, store: InMemoryLightningStore) -> None:
    attempted = rollout(store)
    list(client_for(proxy, attempted).chat.completions.create(model="fake", messages=MESSAGES, stream=True))
    [span] = spans_of(proxy, store, attempted)
    assert span.status.status_code == "OK" and "error.type" not in span.attributes
