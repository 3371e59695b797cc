from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from agentlightning.store import InMemoryLightningStore
from agentlightning.tracer.otel import OtelTracer
from agentlightning.types import Span

from ..fake_openai_server import FakeOpenAIServer


@pytest.fixture(scope="session")
def llm_server() -> Iterator[FakeOpenAIServer]:
    """A fake OpenAI-compatible server on loopback that returns token ids only when asked (as vLLM does)."""
    with FakeOpenAIServer(token_ids="on_request") as server:
        yield server


@pytest.fixture(scope="session")
def llm_server_without_token_ids() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(token_ids="never") as server:
        yield server


@pytest.fixture(scope="session")
def llm_server_refusing_token_ids() -> Iterator[FakeOpenAIServer]:
    """Answers a request carrying `return_token_ids` with OpenAI's 400 "Unrecognized request argument"."""
    with FakeOpenAIServer(token_ids="reject") as server:
        yield server


Capture = Callable[[Callable[[], Awaitable[Any]]], Awaitable[tuple[Any, list[Span]]]]


@asynccontextmanager
async def capturing(**tracer_options: Any) -> AsyncIterator[Capture]:
    """Run (unchanged) agents inside an instrumented OtelTracer's contexts; each run returns its result and spans."""
    store = InMemoryLightningStore()
    tracer = OtelTracer(instrument=True, flush_interval=0.05, **tracer_options)
    tracer.init_worker(0, store)

    async def run(agent: Callable[[], Awaitable[Any]]) -> tuple[Any, list[Span]]:
        rollout = await store.start_rollout(input=None)
        async with tracer.trace_context(rollout_id=rollout.rollout_id, attempt_id=rollout.attempt.attempt_id):
            result = await agent()
        return result, list(await store.query_spans(rollout.rollout_id))

    try:
        yield run
    finally:
        tracer.teardown_worker(0)
        await store.close()


@pytest.fixture
async def capture() -> AsyncIterator[Capture]:
    """Run an (unchanged) agent inside an instrumented OtelTracer context; returns its result and stored spans."""
    async with capturing() as run:
        yield run
