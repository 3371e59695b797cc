"""One record per call with client capture and the proxy both on: the client's span of a call through the proxy names
the proxy's record (`agentlightning.llm.proxy_span_id`, from the proxy's `x-request-id`), so readers count each
call once; a call that never reached the proxy says where it was sent (`agentlightning.llm.via_proxy`)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

openai = pytest.importorskip("openai", reason="the OpenAI SDK is not installed")
pytest.importorskip("openinference.instrumentation.openai", reason="the openai capture extra is not installed")

from agentlightning.adapter import TracerTraceToTriplet  # noqa: E402
from agentlightning.adapter.call_identity import count_llm_calls  # noqa: E402
from agentlightning.llm_proxy import LLMProxy  # noqa: E402
from agentlightning.llm_proxy.call_link import PROXY_SPAN_ID, VIA_PROXY, proxy_url_of  # noqa: E402
from agentlightning.store import InMemoryLightningStore  # noqa: E402
from agentlightning.tracer.otel import OtelTracer  # noqa: E402
from agentlightning.types import Span  # noqa: E402

from ..fake_openai_server import free_port  # noqa: E402
from .conftest import MESSAGES, start_proxy  # noqa: E402
from .fake_upstream import FakeUpstream  # noqa: E402

PROXY_SERVICE = "agentlightning.llm_proxy"


@pytest.fixture
def tracer(store: InMemoryLightningStore) -> Iterator[OtelTracer]:
    traced = OtelTracer(instrument=["openai"], flush_interval=0.05)
    traced.init_worker(0, store)
    yield traced
    traced.teardown_worker(0)


async def _calls(
    tracer: OtelTracer, store: InMemoryLightningStore, base_url: str, *, stream: bool = False, fail: bool = False
) -> str:
    """Three chat calls of one traced rollout through the proxy at `base_url`; the rollout's id."""
    attempted = await store.start_rollout(input=None)
    rollout_id, attempt_id = attempted.rollout_id, attempted.attempt.attempt_id
    client = openai.AsyncOpenAI(base_url=f"{base_url}/rollout/{rollout_id}/attempt/{attempt_id}/v1", api_key="x")
    client = client.with_options(max_retries=0)
    async with tracer.trace_context(rollout_id=rollout_id, attempt_id=attempt_id):
        for _ in range(3):
            try:
                reply: Any = await client.chat.completions.create(model="fake", messages=MESSAGES, stream=stream)  # type: ignore[arg-type]
                if stream:
                    async for _chunk in reply:
                        pass
            except openai.APIError:
                if not fail:
                    raise
    return rollout_id


async def _spans(store: InMemoryLightningStore, rollout_id: str, proxy: LLMProxy) -> list[Span]:
    await proxy.aflush()
    return list(await store.query_spans(rollout_id))


def _split(spans: list[Span]) -> tuple[list[Span], list[Span]]:
    calls = [span for span in spans if span.name == "openai.chat.completion"]
    proxy = [span for span in calls if span.resource.attributes.get("service.name") == PROXY_SERVICE]
    return [span for span in calls if span not in proxy], proxy


@pytest.mark.parametrize("stream", [False, True])
async def test_the_client_span_of_a_proxied_call_names_the_proxys_record(
    tracer: OtelTracer, store: InMemoryLightningStore, upstream: FakeUpstream, stream: bool
) -> None:
    proxy = start_proxy(upstream, store)
    try:
        spans = await _spans(store, await _calls(tracer, store, proxy.endpoint, stream=stream), proxy)
    finally:
        proxy.stop()
    client, recorded = _split(spans)
    assert len(client) == 3 and len(recorded) == 3
    assert [span.attributes[PROXY_SPAN_ID] for span in client] == [span.span_id for span in recorded]
    assert all(str(span.attributes[VIA_PROXY]).startswith(f"{proxy.endpoint}/rollout/") for span in client)
    assert count_llm_calls(client + recorded) == 3


async def test_failed_proxied_calls_without_response_ids_are_counted_once(
    tracer: OtelTracer, store: InMemoryLightningStore, upstream: FakeUpstream
) -> None:
    upstream.script.failures = [500] * 3
    proxy = start_proxy(upstream, store, num_retries=0)
    try:
        spans = await _spans(store, await _calls(tracer, store, proxy.endpoint, fail=True), proxy)
    finally:
        proxy.stop()
    client, recorded = _split(spans)
    assert len(client) == 3 and len(recorded) == 3
    assert all(span.status.status_code == "ERROR" and "gen_ai.response.id" not in span.attributes for span in spans)
    assert count_llm_calls(client + recorded) == 3


async def test_the_diagnosis_counts_each_proxied_call_once(
    tracer: OtelTracer, store: InMemoryLightningStore, upstream: FakeUpstream
) -> None:
    proxy = start_proxy(upstream, store)
    try:
        spans = await _spans(store, await _calls(tracer, store, proxy.endpoint), proxy)
    finally:
        proxy.stop()
    adapter = TracerTraceToTriplet(agent_match="^nobody$")
    assert adapter.adapt(spans) == []
    assert adapter.last_diagnosis is not None and adapter.last_diagnosis.llm_call_spans == 3


async def test_calls_to_a_proxy_that_is_not_running_are_diagnosed_as_nothing_reaching_it(
    tracer: OtelTracer, store: InMemoryLightningStore
) -> None:
    never_started = LLMProxy(port=free_port(), store=store)
    spans = list(await store.query_spans(await _calls(tracer, store, never_started.endpoint, fail=True)))
    client, recorded = _split(spans)
    assert len(client) == 3 and recorded == []
    adapter = TracerTraceToTriplet(_skip_empty_token_spans=True)
    assert adapter.adapt(spans) == []
    reason = str(adapter.last_diagnosis.reason if adapter.last_diagnosis else "")
    assert "nothing reached the LLM proxy" in reason and never_started.endpoint in reason
    assert "proxy.start()" in reason and "token ids" not in reason


def test_a_proxied_call_is_answered_with_the_span_id_of_its_record(
    upstream: FakeUpstream, store: InMemoryLightningStore
) -> None:
    proxy = start_proxy(upstream, store)
    try:
        attempted = asyncio.run(store.start_rollout(input=None))
        url = f"{proxy.endpoint}/rollout/{attempted.rollout_id}/attempt/{attempted.attempt.attempt_id}/v1"
        raw = openai.OpenAI(base_url=url, api_key="x", max_retries=0).chat.completions.with_raw_response.create(
            model="fake",
            messages=MESSAGES,  # type: ignore[arg-type]
        )
        proxy.flush()
        [span] = asyncio.run(store.query_spans(attempted.rollout_id))
    finally:
        proxy.stop()
    assert raw.headers["x-request-id"] == f"agl-{span.span_id}"


@pytest.mark.parametrize(
    "base_url, headers, expected",
    [
        ("http://p:4000/rollout/ro-1/attempt/at-1/v1/", None, "http://p:4000/rollout/ro-1/attempt/at-1"),
        ("http://p:4000/rollout/ro-1/attempt/at-1", None, "http://p:4000/rollout/ro-1/attempt/at-1"),
        ("http://p:4000/v1/", {"X-Rollout-Id": "ro-1", "x-attempt-id": "at-1"}, "http://p:4000/v1"),
        ("http://p:4000/v1/", {"x-rollout-id": "ro-1"}, None),
        ("https://api.openai.com/v1/", None, None),
    ],
)
def test_a_call_to_the_proxy_is_recognised_by_its_url_or_headers(base_url: str, headers: Any, expected: Any) -> None:
    assert proxy_url_of(base_url, headers) == expected
