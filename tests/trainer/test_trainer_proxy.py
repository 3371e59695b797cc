"""The Trainer starts the LLM proxy it was given for the run, whatever the algorithm (Baseline and `dev()` too), and
stops it afterwards when it started it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

openai = pytest.importorskip("openai", reason="the OpenAI SDK is not installed")

import agentlightning as agl  # noqa: E402

from ..fake_openai_server import free_port  # noqa: E402
from ..llm_proxy.fake_upstream import FakeUpstream  # noqa: E402


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as server:
        yield server


@agl.rollout
def ask_through_the_proxy(task: dict[str, Any], llm: agl.LLM) -> float:
    client = openai.OpenAI(base_url=llm.endpoint, api_key=llm.api_key or "unused", max_retries=0)
    reply = client.chat.completions.create(model=llm.model, messages=[{"role": "user", "content": task["q"]}])
    return 1.0 if reply.choices[0].message.content == "pong" else 0.0


def _proxy(upstream: FakeUpstream) -> agl.LLMProxy:
    models: Any = [{"model_name": "fake", "litellm_params": {"model": "fake-model", "api_base": upstream.api_base}}]
    return agl.LLMProxy(port=free_port(), model_list=models)  # a port known before the start, as in real runs


def test_dev_starts_the_trainers_proxy_for_the_run_and_stops_it_after(upstream: FakeUpstream) -> None:
    proxy = _proxy(upstream)
    trainer = agl.Trainer(
        llm_proxy=proxy,
        initial_resources={"llm": proxy.as_resource()},
        strategy="shm",
        tracer=agl.OtelTracer(),
        progress="off",
    )
    trainer.dev(ask_through_the_proxy, [{"q": "ping"}, {"q": "ping"}])
    rollouts = asyncio.run(trainer.store.query_rollouts())
    assert [rollout.status for rollout in rollouts] == ["succeeded", "succeeded"]
    calls = [
        span
        for rollout in rollouts
        for span in asyncio.run(trainer.store.query_spans(rollout.rollout_id))
        if span.name == "openai.chat.completion"
    ]
    assert len(calls) == 2 and all(span.attributes.get("prompt_token_ids") for span in calls)
    assert not proxy.is_running()


def test_a_proxy_already_running_is_left_running(upstream: FakeUpstream) -> None:
    store = agl.InMemoryLightningStore()
    proxy = _proxy(upstream)
    proxy.set_store(store)
    proxy.start()
    try:
        trainer = agl.Trainer(
            llm_proxy=proxy,
            store=store,
            initial_resources={"llm": proxy.as_resource()},
            strategy="shm",
            tracer=agl.OtelTracer(),
            progress="off",
        )
        trainer.dev(ask_through_the_proxy, [{"q": "ping"}])
        assert proxy.is_running()
        [rollout] = asyncio.run(store.query_rollouts())
        assert rollout.status == "succeeded"
    finally:
        proxy.stop()
