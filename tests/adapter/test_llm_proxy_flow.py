"""End to end through the LLM proxy: an agent's calls are recorded by the proxy (with the server's token ids), its
reward by an OtelTracer on the client, both in one store; LlmProxyTraceToTriplet turns them into triplets with the
reward on the last call (sequence ids order the two writers)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

import agentlightning as agl
from agentlightning.adapter import LlmProxyTraceToTriplet
from agentlightning.store import InMemoryLightningStore

from ..fake_openai_server import FakeOpenAIServer, encode, prompt_text

openai = pytest.importorskip("openai", reason="the openai extra is not installed")
llm_proxy = pytest.importorskip("agentlightning.llm_proxy", reason="the LLM proxy is not available")


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(token_ids="on_request") as server:  # like vLLM: ids only when the proxy asks
        yield server


def test_proxy_spans_and_client_rewards_become_triplets(upstream: FakeOpenAIServer) -> None:
    store = InMemoryLightningStore()
    proxy = llm_proxy.LLMProxy(
        model_list=[
            {
                "model_name": "policy",
                "litellm_params": {"model": "hosted_vllm/fake-model", "api_base": upstream.base_url},
            }
        ],
        store=store,
    )
    proxy.start()
    tracer = agl.OtelTracer()
    tracer.init_worker(0, store)
    try:
        attempted = asyncio.run(store.start_rollout(input={"q": 1}))
        base_url = proxy.as_resource().get_base_url(attempted.rollout_id, attempted.attempt.attempt_id)  # type: ignore[call-arg]
        client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)

        async def agent() -> None:
            async with tracer.trace_context(rollout_id=attempted.rollout_id, attempt_id=attempted.attempt.attempt_id):
                for text in ("first", "second"):
                    await asyncio.to_thread(
                        client.chat.completions.create, model="policy", messages=[{"role": "user", "content": text}]
                    )
                agl.emit_reward(0.75)

        asyncio.run(agent())
        proxy.flush()
        spans = list(asyncio.run(store.query_spans(attempted.rollout_id)))
    finally:
        tracer.teardown_worker(0)
        proxy.stop()

    triplets = LlmProxyTraceToTriplet().adapt(spans)
    assert [t.prompt["token_ids"] for t in triplets] == [
        encode(prompt_text([{"role": "user", "content": "first"}])),
        encode(prompt_text([{"role": "user", "content": "second"}])),
    ]
    assert [t.response["token_ids"] for t in triplets] == [encode("reply to: first"), encode("reply to: second")]
    assert [t.reward for t in triplets] == [None, 0.75]
    assert len({span.sequence_id for span in spans}) == len(spans)
