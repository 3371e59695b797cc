"""The LLM proxy: attribution to rollouts, token ids (streaming included), failures, configuration."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("torch", reason="the inference extra (torch) is not installed")
openai = pytest.importorskip("openai", reason="the OpenAI SDK is not installed")

import httpx  # noqa: E402

from agentlightning.inference.server import InferenceServer  # noqa: E402
from agentlightning.inference.tiny import build_tiny_engine  # noqa: E402
from agentlightning.llm_proxy import LLMProxy, get_active_llm_proxy  # noqa: E402
from agentlightning.store import InMemoryLightningStore  # noqa: E402
from agentlightning.types import LLM, AttemptedRollout, ProxyLLM, Span  # noqa: E402

from .fake_upstream import FakeUpstream  # noqa: E402

MESSAGES = [{"role": "user", "content": "ping"}]


@pytest.fixture(scope="module")
def upstream_server() -> Iterator[InferenceServer]:
    with InferenceServer(build_tiny_engine(seed=0)) as server:
        yield server


@pytest.fixture
def store() -> InMemoryLightningStore:
    return InMemoryLightningStore()


@pytest.fixture
def proxy(upstream_server: InferenceServer, store: InMemoryLightningStore) -> Iterator[LLMProxy]:
    model_list = [
        {
            "model_name": "tiny",
            "litellm_params": {"model": "hosted_vllm/tiny-chat", "api_base": upstream_server.endpoint},
        }
    ]
    llm_proxy = LLMProxy(model_list=model_list, store=store)  # type: ignore[arg-type]
    llm_proxy.start()
    yield llm_proxy
    if llm_proxy.is_running():
        llm_proxy.stop()


def rollout(store: InMemoryLightningStore) -> AttemptedRollout:
    return asyncio.run(store.start_rollout("task"))


def client_for(proxy: LLMProxy, attempted: AttemptedRollout) -> Any:
    base = proxy.as_resource().get_base_url(attempted.rollout_id, attempted.attempt.attempt_id)  # type: ignore[call-arg]
    return openai.OpenAI(base_url=base, api_key="unused", max_retries=0)


def spans_of(proxy: LLMProxy, store: InMemoryLightningStore, attempted: AttemptedRollout) -> list[Span]:
    proxy.flush()
    return list(asyncio.run(store.query_spans(attempted.rollout_id, attempted.attempt.attempt_id)))


def test_a_call_is_recorded_under_its_rollout_with_token_ids(proxy: LLMProxy, store: InMemoryLightningStore) -> None:
    attempted = rollout(store)
    reply = client_for(proxy, attempted).chat.completions.create(
        model="tiny", messages=MESSAGES, max_tokens=6, temperature=0
    )
    [span] = spans_of(proxy, store, attempted)
    assert (span.rollout_id, span.attempt_id, span.sequence_id) == (
        attempted.rollout_id,
        attempted.attempt.attempt_id,
        1,
    )
    assert span.name == "openai.chat.completion" and span.status.status_code == "OK"
    attrs = span.attributes
    assert attrs["gen_ai.request.model"] == "tiny" and attrs["gen_ai.response.model"] == "tiny-chat"
    assert attrs["gen_ai.prompt.0.role"] == "user" and attrs["gen_ai.prompt.0.content"] == "ping"
    assert attrs["gen_ai.completion.0.content"] == reply.choices[0].message.content
    assert attrs["prompt_token_ids"] == reply.model_extra["prompt_token_ids"]  # type: ignore[index]
    assert attrs["response_token_ids"] == reply.choices[0].model_extra["token_ids"]  # type: ignore[index]
    assert len(attrs["response_token_ids"]) == 6  # type: ignore[arg-type]
    assert attrs["gen_ai.usage.completion_tokens"] == 6
    assert json.loads(attrs["agentlightning.llm.request"])["return_token_ids"] is True  # type: ignore[arg-type]
    assert attrs["agentlightning.llm.latency_ms"] > 0  # type: ignore[operator]


def test_a_streamed_call_is_relayed_in_chunks_and_recorded_with_the_same_token_ids(
    proxy: LLMProxy, store: InMemoryLightningStore
) -> None:
    attempted = rollout(store)
    client = client_for(proxy, attempted)
    plain = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=6, temperature=0)
    chunks = list(
        client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=6, temperature=0, stream=True)
    )
    assert len(chunks) >= 6
    assert all(chunk.usage is None for chunk in chunks)  # the usage chunk the proxy asked for is not relayed
    streamed_text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed_text == plain.choices[0].message.content
    first, second = spans_of(proxy, store, attempted)
    assert (first.sequence_id, second.sequence_id) == (1, 2)
    assert second.attributes["agentlightning.llm.stream"] is True
    for key in (
        "prompt_token_ids",
        "response_token_ids",
        "gen_ai.completion.0.content",
        "gen_ai.usage.completion_tokens",
    ):
        assert second.attributes[key] == first.attributes[key], key


def test_a_streaming_client_that_asks_for_usage_receives_it(proxy: LLMProxy, store: InMemoryLightningStore) -> None:
    attempted = rollout(store)
    chunks = list(
        client_for(proxy, attempted).chat.completions.create(
            model="tiny", messages=MESSAGES, max_tokens=3, stream=True, stream_options={"include_usage": True}
        )
    )
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 3


def test_concurrent_calls_get_distinct_sequence_ids(proxy: LLMProxy, store: InMemoryLightningStore) -> None:
    attempted = rollout(store)
    base = proxy.as_resource().get_base_url(attempted.rollout_id, attempted.attempt.attempt_id)  # type: ignore[call-arg]

    async def call_many() -> None:
        client = openai.AsyncOpenAI(base_url=base, api_key="unused")
        await asyncio.gather(
            *(client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=2) for _ in range(10))  # type: ignore[arg-type]
        )
        await client.close()

    asyncio.run(call_many())
    assert sorted(span.sequence_id for span in spans_of(proxy, store, attempted)) == list(range(1, 11))


def test_completions_are_proxied_and_recorded(proxy: LLMProxy, store: InMemoryLightningStore) -> None:
    attempted = rollout(store)
    reply = client_for(proxy, attempted).completions.create(model="tiny", prompt="abc", max_tokens=3)
    [span] = spans_of(proxy, store, attempted)
    assert span.name == "openai.completion"
    assert span.attributes["gen_ai.prompt.0.content"] == "abc"
    assert span.attributes["gen_ai.completion.0.content"] == reply.choices[0].text


def test_rollout_ids_can_come_from_headers(proxy: LLMProxy, store: InMemoryLightningStore) -> None:
    attempted = rollout(store)
    response = httpx.post(
        f"{proxy.endpoint}/v1/chat/completions",
        json={"model": "tiny", "messages": MESSAGES, "max_tokens": 2},
        headers={"x-rollout-id": attempted.rollout_id, "x-attempt-id": attempted.attempt.attempt_id},
    )
    assert response.status_code == 200
    assert len(spans_of(proxy, store, attempted)) == 1


def test_a_call_without_rollout_ids_is_a_400(proxy: LLMProxy) -> None:
    response = httpx.post(f"{proxy.endpoint}/v1/chat/completions", json={"model": "tiny", "messages": MESSAGES})
    assert response.status_code == 400 and response.json()["error"]["code"] == "missing_rollout_ids"


def test_an_unknown_model_is_a_404(proxy: LLMProxy, store: InMemoryLightningStore) -> None:
    attempted = rollout(store)
    with pytest.raises(openai.NotFoundError, match="not served by this proxy"):
        client_for(proxy, attempted).chat.completions.create(model="gpt-9", messages=MESSAGES)


def test_an_unknown_rollout_is_a_404(proxy: LLMProxy) -> None:
    client = openai.OpenAI(base_url=f"{proxy.endpoint}/rollout/ro-nope/attempt/at-nope/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.NotFoundError, match="ro-nope"):
        client.chat.completions.create(model="tiny", messages=MESSAGES)


def test_malformed_json_is_a_400(proxy: LLMProxy, store: InMemoryLightningStore) -> None:
    attempted = rollout(store)
    response = httpx.post(
        f"{proxy.endpoint}/rollout/{attempted.rollout_id}/attempt/{attempted.attempt.attempt_id}/v1/chat/completions",
        content=b"{oops",
    )
    assert response.status_code == 400 and "not valid JSON" in response.json()["error"]["message"]


def fake_proxy(upstream: FakeUpstream, store: InMemoryLightningStore, **kwargs: Any) -> LLMProxy:
    model_list = [
        {"model_name": "fake", "litellm_params": {"model": "openai/fake-model", "api_base": upstream.api_base}}
    ]
    proxy = LLMProxy(model_list=model_list, store=store, **kwargs)  # type: ignore[arg-type]
    proxy.start()
    return proxy


def test_transient_upstream_failures_are_retried(store: InMemoryLightningStore) -> None:
    with FakeUpstream() as upstream:
        upstream.script.failures = [503, 429]
        proxy = fake_proxy(upstream, store)
        try:
            attempted = rollout(store)
            reply = client_for(proxy, attempted).chat.completions.create(model="fake", messages=MESSAGES)
            assert reply.choices[0].message.content == "pong"
            [span] = spans_of(proxy, store, attempted)
            assert span.attributes["agentlightning.llm.attempts"] == 3
            assert len(upstream.script.requests) == 3
            assert upstream.script.requests[0]["model"] == "fake-model"
        finally:
            proxy.stop()


def test_a_persistent_upstream_error_reaches_the_agent_and_is_recorded(store: InMemoryLightningStore) -> None:
    with FakeUpstream() as upstream:
        upstream.script.failures = [500] * 3
        proxy = fake_proxy(upstream, store, num_retries=2)
        try:
            attempted = rollout(store)
            with pytest.raises(openai.InternalServerError, match="scripted 500"):
                client_for(proxy, attempted).chat.completions.create(model="fake", messages=MESSAGES)
            [span] = spans_of(proxy, store, attempted)
            assert span.status.status_code == "ERROR"
            assert span.attributes["http.status_code"] == 500 and span.attributes["error.type"] == "UpstreamHTTPError"
        finally:
            proxy.stop()


def test_an_unreachable_upstream_is_a_502_and_is_recorded(store: InMemoryLightningStore) -> None:
    model_list = [{"model_name": "gone", "litellm_params": {"model": "gone", "api_base": "http://127.0.0.1:9/v1"}}]
    proxy = LLMProxy(model_list=model_list, store=store, num_retries=1)  # type: ignore[arg-type]
    proxy.start()
    try:
        attempted = rollout(store)
        with pytest.raises(openai.APIStatusError) as raised:
            client_for(proxy, attempted).chat.completions.create(model="gone", messages=MESSAGES)
        assert raised.value.status_code == 502
        [span] = spans_of(proxy, store, attempted)
        assert span.status.status_code == "ERROR" and span.attributes["agentlightning.llm.attempts"] == 2
    finally:
        proxy.stop()


def test_an_upstream_without_token_id_support_is_asked_again_without_them(store: InMemoryLightningStore) -> None:
    with FakeUpstream() as upstream:
        upstream.script.reject_token_ids = True
        proxy = fake_proxy(upstream, store)
        try:
            attempted = rollout(store)
            client = client_for(proxy, attempted)
            assert client.chat.completions.create(model="fake", messages=MESSAGES).choices[0].message.content == "pong"
            client.chat.completions.create(model="fake", messages=MESSAGES)
            assert ["return_token_ids" in request for request in upstream.script.requests] == [True, False, False]
        finally:
            proxy.stop()


def test_streamed_tool_calls_are_reassembled_in_the_record(store: InMemoryLightningStore) -> None:
    with FakeUpstream() as upstream:
        upstream.script.tool_call = True
        proxy = fake_proxy(upstream, store)
        try:
            attempted = rollout(store)
            list(client_for(proxy, attempted).chat.completions.create(model="fake", messages=MESSAGES, stream=True))
            [span] = spans_of(proxy, store, attempted)
            calls = json.loads(span.attributes["gen_ai.completion.0.tool_calls"])  # type: ignore[arg-type]
            assert calls == [
                {"type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}, "id": "call_1"}
            ]
            assert span.attributes["gen_ai.completion.0.finish_reason"] == "tool_calls"
        finally:
            proxy.stop()


class FlakyStore(InMemoryLightningStore):
    """A store whose span writes fail until `healthy` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.healthy = threading.Event()

    async def add_many_spans(self, spans: Any) -> Any:
        if not self.healthy.is_set():
            raise ConnectionError("store is down")
        return await super().add_many_spans(spans)


def test_spans_are_kept_and_retried_while_the_store_is_down(upstream_server: InferenceServer) -> None:
    store = FlakyStore()
    model_list = [
        {"model_name": "tiny", "litellm_params": {"model": "tiny-chat", "api_base": upstream_server.endpoint}}
    ]
    proxy = LLMProxy(model_list=model_list, store=store)  # type: ignore[arg-type]
    proxy.start()
    try:
        attempted = rollout(store)
        client_for(proxy, attempted).chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=2)
        with pytest.raises(TimeoutError):
            proxy.flush(timeout=0.3)
        store.healthy.set()
        assert len(spans_of(proxy, store, attempted)) == 1
    finally:
        proxy.stop()


def test_resources_point_agents_at_the_proxy(proxy: LLMProxy, store: InMemoryLightningStore) -> None:
    resource = proxy.as_resource(sampling_parameters={"temperature": 0.5})
    assert type(resource) is ProxyLLM and resource.model == "tiny"
    attempted = rollout(store)
    bound = resource.with_attempted_rollout(attempted)
    direct = proxy.as_resource(attempted.rollout_id, attempted.attempt.attempt_id)
    assert type(bound) is LLM and type(direct) is LLM
    assert bound.endpoint == f"{proxy.endpoint}/rollout/{attempted.rollout_id}/attempt/{attempted.attempt.attempt_id}"
    assert direct.endpoint == bound.endpoint and bound.sampling_parameters == {"temperature": 0.5}
    reply = openai.OpenAI(base_url=bound.endpoint, api_key="x").chat.completions.create(
        model=bound.model,
        messages=MESSAGES,
        max_tokens=2,  # type: ignore[arg-type]
    )
    assert reply.choices and len(spans_of(proxy, store, attempted)) == 1
    with pytest.raises(ValueError, match="both"):
        proxy.as_resource(rollout_id="ro-1")


def test_restart_and_model_list_updates_keep_serving(proxy: LLMProxy, store: InMemoryLightningStore,
                                                     upstream_server: InferenceServer) -> None:  # fmt: skip
    proxy.restart()
    assert proxy.is_running() and get_active_llm_proxy() is proxy
    proxy.update_model_list(
        [{"model_name": "renamed", "litellm_params": {"model": "tiny-chat", "api_base": upstream_server.endpoint}}]
    )
    attempted = rollout(store)
    reply = client_for(proxy, attempted).chat.completions.create(model="renamed", messages=MESSAGES, max_tokens=2)
    assert reply.choices


def test_the_proxy_refuses_to_start_without_a_store() -> None:
    with pytest.raises(ValueError, match="needs a store"):
        LLMProxy(model_list=[]).start()


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"model_name": "x"}, "litellm_params"),
        ({"model_name": "x", "litellm_params": {"model": "m", "api_base": "localhost:1"}}, "api_base"),
        ({"litellm_params": {"model": "m", "api_base": "http://h"}}, "model_name"),
    ],
)
def test_a_malformed_model_list_is_rejected(entry: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LLMProxy(model_list=[entry])  # type: ignore[list-item]


def test_start_and_stop_can_be_awaited(store: InMemoryLightningStore, upstream_server: InferenceServer) -> None:
    model_list = [
        {"model_name": "tiny", "litellm_params": {"model": "tiny-chat", "api_base": upstream_server.endpoint}}
    ]
    proxy = LLMProxy(model_list=model_list, store=store)  # type: ignore[arg-type]

    async def lifecycle() -> None:
        await proxy.start()
        assert proxy.is_running()
        await proxy.stop()

    asyncio.run(lifecycle())
    assert not proxy.is_running()
