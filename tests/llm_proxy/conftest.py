"""Fixtures of the proxy tests: a store, the scriptable fake upstream (no torch) and a proxy in front of it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from agentlightning.llm_proxy import LLMProxy
from agentlightning.store import InMemoryLightningStore
from agentlightning.types import AttemptedRollout, Span

from .fake_upstream import FakeUpstream

MESSAGES = [{"role": "user", "content": "ping"}]


@pytest.fixture
def store() -> InMemoryLightningStore:
    return InMemoryLightningStore()


@pytest.fixture(scope="module")
def shared_upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as server:
        yield server


@pytest.fixture
def upstream(shared_upstream: FakeUpstream) -> FakeUpstream:
    """The module's fake upstream with a fresh script (token-id refusals are remembered per proxy, not here)."""
    shared_upstream.reset()
    return shared_upstream


def start_proxy(upstream: FakeUpstream, store: Any, **kwargs: Any) -> LLMProxy:
    model_list = [
        {"model_name": "fake", "litellm_params": {"model": "openai/fake-model", "api_base": upstream.api_base}}
    ]
    proxy = LLMProxy(model_list=model_list, store=store, **kwargs)  # type: ignore[arg-type]
    proxy.start()
    return proxy


@pytest.fixture
def proxy(upstream: FakeUpstream, store: InMemoryLightningStore) -> Iterator[LLMProxy]:
    llm_proxy = start_proxy(upstream, store)
    yield llm_proxy
    if llm_proxy.is_running():
        llm_proxy.stop()


def rollout(store: InMemoryLightningStore) -> AttemptedRollout:
    return asyncio.run(store.start_rollout("task"))


def base_url(proxy: LLMProxy, attempted: AttemptedRollout) -> str:
    return proxy.as_resource().get_base_url(attempted.rollout_id, attempted.attempt.attempt_id)  # type: ignore[call-arg]


def client_for(proxy: LLMProxy, attempted: AttemptedRollout) -> Any:
    import openai

    return openai.OpenAI(base_url=base_url(proxy, attempted), api_key=proxy.api_key or "unused", max_retries=0)


def spans_of(proxy: LLMProxy, store: InMemoryLightningStore, attempted: AttemptedRollout) -> list[Span]:
    proxy.flush()
    return list(asyncio.run(store.query_spans(attempted.rollout_id, attempted.attempt.attempt_id)))
