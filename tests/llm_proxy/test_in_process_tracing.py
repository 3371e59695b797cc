"""An LLM proxy running in the same process as an agent's open trace context keeps its own web-framework spans
(FastAPI's request spans) out of the rollout: the rollout holds the proxy's call record and the agent's spans only."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

openai = pytest.importorskip("openai", reason="the OpenAI SDK is not installed")

from agentlightning.llm_proxy import LLMProxy  # noqa: E402
from agentlightning.store import InMemoryLightningStore  # noqa: E402
from agentlightning.tracer.otel import OtelTracer  # noqa: E402

from ..fake_openai_server import FakeOpenAIServer  # noqa: E402
from .conftest import MESSAGES  # noqa: E402


@pytest.fixture(scope="module")
def model_server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(token_ids="on_request") as server:  # another process: its spans cannot leak in
        yield server


async def test_the_proxys_own_request_spans_stay_out_of_the_rollout(model_server: FakeOpenAIServer) -> None:
    store = InMemoryLightningStore()
    tracer = OtelTracer(flush_interval=0.05)
    tracer.init_worker(0, store)
    model_list = [{"model_name": "m", "litellm_params": {"model": "fake-model", "api_base": model_server.base_url}}]
    proxy = LLMProxy(model_list=model_list, store=store)  # type: ignore[arg-type]
    proxy.start()
    try:
        attempted = await store.start_rollout(input=None)
        base = proxy.as_resource().get_base_url(attempted.rollout_id, attempted.attempt.attempt_id)  # type: ignore[call-arg]
        client = openai.AsyncOpenAI(base_url=base, api_key="unused", max_retries=0)
        async with tracer.trace_context(rollout_id=attempted.rollout_id, attempt_id=attempted.attempt.attempt_id):
            await client.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
            await client.models.list()
        await proxy.aflush()
        spans = await store.query_spans(attempted.rollout_id)
        assert [span.name for span in spans] == ["openai.chat.completion"]
        assert spans[0].attributes["prompt_token_ids"]
    finally:
        proxy.stop()
        tracer.teardown_worker(0)
