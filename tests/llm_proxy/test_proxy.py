"""The LLM proxy against a scriptable fake upstream (no torch needed): attribution to rollouts, token ids in vLLM's
shapes (streaming included), failures, storage and configuration."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

openai = pytest.importorskip("openai", reason="the OpenAI SDK is not installed")

import httpx  # noqa: E402

from agentlightning.adapter import LlmProxyTraceToTriplet  # noqa: E402
from agentlightning.llm_proxy import LLMProxy, get_active_llm_proxy  # noqa: E402
from agentlightning.store import InMemoryLightningStore  # noqa: E402
from agentlightning.types import LLM, ProxyLLM, Span  # noqa: E402

from .conftest import MESSAGES, base_url, client_for, rollout, spans_of, start_proxy  # noqa: E402
from .fake_upstream import COMPLETION_IDS, PROMPT_IDS, FakeUpstream  # noqa: E402


def test_a_call_is_recorded_under_its_rollout_with_token_ids(
    proxy: LLMProxy, store: InMemoryLightningStore, upstream: FakeUpstream
) -> None:
    attempted = rollout(store)
    reply = client_for(proxy, attempted).chat.completions.create(model="fake", messages=MESSAGES, max_tokens=6)
    [span] = spans_of(proxy, store, attempted)
    assert (span.rollout_id, span.attempt_id, span.sequence_id) == (
        attempted.rollout_id,
        attempted.attempt.attempt_id,
        1,
    )
    assert span.name == "openai.chat.completion" and span.status.status_code == "OK"
    attrs = span.attributes
    assert attrs["gen_ai.request.model"] == "fake" and attrs["gen_ai.response.model"] == "fake-model"
    assert attrs["gen_ai.prompt.0.content"] == "ping" and attrs["gen_ai.completion.0.content"] == "pong"
    assert reply.choices[0].message.content == "pong"
    assert (attrs["prompt_token_ids"], attrs["response_token_ids"]) == (PROMPT_IDS, COMPLETION_IDS)
    assert upstream.script.requests[0]["return_token_ids"] is True
    assert upstream.script.requests[0]["model"] == "fake-model"


def test_a_running_proxy_can_be_told_to_ask_for_logprobs_on_every_call(
    proxy: LLMProxy, store: InMemoryLightningStore, upstream: FakeUpstream
) -> None:
    attempted = rollout(store)
    client_for(proxy, attempted).chat.completions.create(model="fake", messages=MESSAGES)
    proxy.request_logprobs_on_every_call()
    client_for(proxy, attempted).chat.completions.create(model="fake", messages=MESSAGES)
    assert "logprobs" not in upstream.script.requests[0] and upstream.script.requests[1]["logprobs"] is True


def test_a_streamed_chat_is_relayed_and_recorded_with_the_same_token_ids(
    proxy: LLMProxy, store: InMemoryLightningStore
) -> None:
    attempted = rollout(store)
    chunks = list(client_for(proxy, attempted).chat.completions.create(model="fake", messages=MESSAGES, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "pong"
    assert all(chunk.usage is None for chunk in chunks)  # the usage chunk the proxy asked for is not relayed
    [span] = spans_of(proxy, store, attempted)
    assert span.attributes["agentlightning.llm.stream"] is True
    assert (span.attributes["prompt_token_ids"], span.attributes["response_token_ids"]) == (PROMPT_IDS, COMPLETION_IDS)
    assert span.attributes["gen_ai.usage.completion_tokens"] == 2


def test_a_streaming_client_that_asks_for_usage_receives_it(proxy: LLMProxy, store: InMemoryLightningStore) -> None:
    attempted = rollout(store)
    chunks = list(
        client_for(proxy, attempted).chat.completions.create(
            model="fake", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
    )
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 2


def test_completions_record_the_prompt_ids_vllm_puts_inside_each_choice(
    proxy: LLMProxy, store: InMemoryLightningStore
) -> None:
    attempted = rollout(store)
    reply = client_for(proxy, attempted).completions.create(model="fake", prompt="abc", max_tokens=3)
    assert reply.choices[0].model_extra["prompt_token_ids"] == PROMPT_IDS  # type: ignore[index]
    [span] = spans_of(proxy, store, attempted)
    assert span.name == "openai.completion"
    assert span.attributes["gen_ai.prompt.0.content"] == "abc"
    assert span.attributes["gen_ai.completion.0.content"] == "pong"
    assert (span.attributes["prompt_token_ids"], span.attributes["response_token_ids"]) == (PROMPT_IDS, COMPLETION_IDS)


def test_streamed_completions_record_the_prompt_ids_of_the_first_chunks_choice(
    proxy: LLMProxy, store: InMemoryLightningStore
) -> None:
    attempted = rollout(store)
    chunks = list(
        client_for(proxy, attempted).completions.create(model="fake", prompt="abc", max_tokens=3, stream=True)
    )
    assert "".join(chunk.choices[0].text for chunk in chunks if chunk.choices) == "pong"
    [span] = spans_of(proxy, store, attempted)
    assert (span.attributes["prompt_token_ids"], span.attributes["response_token_ids"]) == (PROMPT_IDS, COMPLETION_IDS)


def test_completion_calls_become_triplets(proxy: LLMProxy, store: InMemoryLightningStore) -> None:
    attempted = rollout(store)
    client = client_for(proxy, attempted)
    client.completions.create(model="fake", prompt="abc", max_tokens=3)
    list(client.completions.create(model="fake", prompt="abc", max_tokens=3, stream=True))
    triplets = LlmProxyTraceToTriplet().adapt(spans_of(proxy, store, attempted))
    assert [(t.prompt["token_ids"], t.response["token_ids"]) for t in triplets] == [(PROMPT_IDS, COMPLETION_IDS)] * 2


def test_concurrent_calls_get_distinct_sequence_ids(proxy: LLMProxy, store: InMemoryLightningStore) -> None:
    attempted = rollout(store)

    async def call_many() -> None:
        client = openai.AsyncOpenAI(base_url=base_url(proxy, attempted), api_key="unused")
        await asyncio.gather(
            *(client.chat.completions.create(model="fake", messages=MESSAGES, max_tokens=2) for _ in range(10))  # type: ignore[arg-type]
        )
        await client.close()

    asyncio.run(call_many())
    assert sorted(span.sequence_id for span in spans_of(proxy, store, attempted)) == list(range(1, 11))


def test_rollout_ids_can_come_from_headers(proxy: LLMProxy, store: InMemoryLightningStore) -> None:
    attempted = rollout(store)
    response = httpx.post(
        f"{proxy.endpoint}/v1/chat/completions",
        json={"model": "fake", "messages": MESSAGES, "max_tokens": 2},
        headers={"x-rollout-id": attempted.rollout_id, "x-attempt-id": attempted.attempt.attempt_id},
    )
    assert response.status_code == 200
    assert len(spans_of(proxy, store, attempted)) == 1


def test_a_call_without_rollout_ids_is_a_400(proxy: LLMProxy) -> None:
    response = httpx.post(f"{proxy.endpoint}/v1/chat/completions", json={"model": "fake", "messages": MESSAGES})
    assert response.status_code == 400 and response.json()["error"]["code"] == "missing_rollout_ids"


def test_an_unknown_model_is_a_404(proxy: LLMProxy, store: InMemoryLightningStore) -> None:
    attempted = rollout(store)
    with pytest.raises(openai.NotFoundError, match="not served by this proxy"):
        client_for(proxy, attempted).chat.completions.create(model="gpt-9", messages=MESSAGES)


def test_an_unknown_rollout_is_a_404(proxy: LLMProxy) -> None:
    client = openai.OpenAI(base_url=f"{proxy.endpoint}/rollout/ro-nope/attempt/at-nope/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.NotFoundError, match="ro-nope"):
        client.chat.completions.create(model="fake", messages=MESSAGES)


def test_malformed_json_is_a_400(proxy: LLMProxy, store: InMemoryLightningStore) -> None:
    attempted = rollout(store)
    response = httpx.post(f"{base_url(proxy, attempted)}/v1/chat/completions", content=b"{oops")
    assert response.status_code == 400 and "not valid JSON" in response.json()["error"]["message"]


def test_transient_upstream_failures_are_retried(
    upstream: FakeUpstream, store: InMemoryLightningStore, proxy: LLMProxy
) -> None:
    upstream.script.failures = [503, 429]
    attempted = rollout(store)
    reply = client_for(proxy, attempted).chat.completions.create(model="fake", messages=MESSAGES)
    assert reply.choices[0].message.content == "pong"
    [span] = spans_of(proxy, store, attempted)
    assert span.attributes["agentlightning.llm.attempts"] == 3
    assert len(upstream.script.requests) == 3


def test_a_persistent_upstream_error_reaches_the_agent_and_is_recorded(
    upstream: FakeUpstream, store: InMemoryLightningStore
) -> None:
    upstream.script.failures = [500] * 3
    proxy = start_proxy(upstream, store, num_retries=2)
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


def test_streamed_tool_calls_are_reassembled_in_the_record(
    upstream: FakeUpstream, proxy: LLMProxy, store: InMemoryLightningStore
) -> None:
    upstream.script.tool_call = True
    attempted = rollout(store)
    list(client_for(proxy, attempted).chat.completions.create(model="fake", messages=MESSAGES, stream=True))
    [span] = spans_of(proxy, store, attempted)
    calls = json.loads(span.attributes["gen_ai.completion.0.tool_calls"])  # type: ignore[arg-type]
    assert calls == [{"type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}, "id": "call_1"}]
    assert span.attributes["gen_ai.completion.0.finish_reason"] == "tool_calls"


class FlakyStore(InMemoryLightningStore):
    """A store whose span writes fail until `healthy` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.healthy = threading.Event()

    async def add_many_spans(self, spans: Any) -> Any:
        if not self.healthy.is_set():
            raise ConnectionError("store is down")
        return await super().add_many_spans(spans)


def test_spans_are_kept_and_retried_while_the_store_is_down(upstream: FakeUpstream) -> None:
    store = FlakyStore()
    proxy = start_proxy(upstream, store)
    try:
        attempted = rollout(store)
        client_for(proxy, attempted).chat.completions.create(model="fake", messages=MESSAGES, max_tokens=2)
        with pytest.raises(TimeoutError):
            proxy.flush(timeout=0.3)
        store.healthy.set()
        assert len(spans_of(proxy, store, attempted)) == 1
    finally:
        proxy.stop()


class LostAnswerStore(InMemoryLightningStore):
    """A store whose first span write commits but whose answer is lost (the caller sees a connection error)."""

    def __init__(self) -> None:
        super().__init__()
        self.lost = 0

    async def add_many_spans(self, spans: Any) -> Any:
        added = await super().add_many_spans(spans)
        if self.lost == 0:
            self.lost += 1
            raise ConnectionError("connection reset after the write committed")
        return added


def test_a_write_whose_answer_was_lost_is_not_stored_twice(upstream: FakeUpstream) -> None:
    store = LostAnswerStore()
    proxy = start_proxy(upstream, store)
    try:
        attempted = rollout(store)
        client_for(proxy, attempted).chat.completions.create(model="fake", messages=MESSAGES)
        spans = spans_of(proxy, store, attempted)
        assert store.lost == 1
        assert len(spans) == 1
    finally:
        proxy.stop()


def test_a_call_record_becomes_the_same_span_every_time(upstream: FakeUpstream) -> None:
    from agentlightning.llm_proxy.record import CallRecord

    record = CallRecord(
        rollout_id="ro-1", attempt_id="at-1", kind="chat", request={"model": "m", "messages": MESSAGES},
        upstream=upstream.api_base, stream=False,
    )  # fmt: skip
    record.finish(response={"id": "x", "choices": []}, status_code=200)
    first, again, renumbered = record.to_span(3), record.to_span(3), record.to_span(4)
    assert isinstance(first, Span) and first == again
    assert (renumbered.trace_id, renumbered.span_id, renumbered.sequence_id) == (first.trace_id, first.span_id, 4)
    assert renumbered.model_dump(exclude={"sequence_id"}) == first.model_dump(exclude={"sequence_id"})


def test_resources_point_agents_at_the_proxy(proxy: LLMProxy, store: InMemoryLightningStore) -> None:
    resource = proxy.as_resource(sampling_parameters={"temperature": 0.5})
    assert type(resource) is ProxyLLM and resource.model == "fake"
    attempted = rollout(store)
    bound = resource.with_attempted_rollout(attempted)
    direct = proxy.as_resource(attempted.rollout_id, attempted.attempt.attempt_id)
    assert type(bound) is LLM and type(direct) is LLM
    assert bound.endpoint == f"{proxy.endpoint}/rollout/{attempted.rollout_id}/attempt/{attempted.attempt.attempt_id}"
    assert direct.endpoint == bound.endpoint and bound.sampling_parameters == {"temperature": 0.5}
    reply = openai.OpenAI(base_url=bound.endpoint, api_key="x").chat.completions.create(
        model=bound.model,
        messages=MESSAGES,  # type: ignore[arg-type]
    )
    assert reply.choices and len(spans_of(proxy, store, attempted)) == 1
    with pytest.raises(ValueError, match="both"):
        proxy.as_resource(rollout_id="ro-1")


def test_restart_and_model_list_updates_keep_serving(
    proxy: LLMProxy, store: InMemoryLightningStore, upstream: FakeUpstream
) -> None:
    proxy.restart()
    assert proxy.is_running() and get_active_llm_proxy() is proxy
    proxy.update_model_list(
        [{"model_name": "renamed", "litellm_params": {"model": "fake-model", "api_base": upstream.api_base}}]
    )
    attempted = rollout(store)
    reply = client_for(proxy, attempted).chat.completions.create(model="renamed", messages=MESSAGES)
    assert reply.choices


def test_a_model_list_update_without_restart_routes_new_requests_on_the_running_server(
    proxy: LLMProxy, store: InMemoryLightningStore, upstream: FakeUpstream
) -> None:
    server = proxy._server
    proxy.update_model_list(
        [{"model_name": "renamed", "litellm_params": {"model": "fake-model", "api_base": upstream.api_base}}],
        restart=False,
    )
    attempted = rollout(store)
    reply = client_for(proxy, attempted).chat.completions.create(model="renamed", messages=MESSAGES)
    assert reply.choices and proxy._server is server  # the same server: requests in flight were not cut off


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


def test_start_and_stop_can_be_awaited(store: InMemoryLightningStore, upstream: FakeUpstream) -> None:
    model_list = [{"model_name": "fake", "litellm_params": {"model": "fake-model", "api_base": upstream.api_base}}]
    proxy = LLMProxy(model_list=model_list, store=store)  # type: ignore[arg-type]

    async def lifecycle() -> None:
        await proxy.start()
        assert proxy.is_running()
        await proxy.stop()

    asyncio.run(lifecycle())
    assert not proxy.is_running()


def test_the_image_urls_of_a_proxied_multimodal_call_reach_the_triplet(
    proxy: LLMProxy, store: InMemoryLightningStore
) -> None:
    attempted = rollout(store)
    content = [
        {"type": "text", "text": "compare"},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]
    client_for(proxy, attempted).chat.completions.create(model="fake", messages=[{"role": "user", "content": content}])
    [triplet] = LlmProxyTraceToTriplet().adapt(spans_of(proxy, store, attempted))
    assert triplet.prompt["image_urls"] == ["https://example.com/a.png", "data:image/png;base64,AAAA"]
