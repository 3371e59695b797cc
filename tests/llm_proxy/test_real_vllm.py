"""Opt-in: the LLM proxy and zero-code capture against a real vLLM server.

Start one (for example `vllm serve HuggingFaceTB/SmolLM2-135M-Instruct`) and run
`AGL_VLLM_URL=http://127.0.0.1:8000/v1 .venv/bin/python -m pytest tests/llm_proxy/test_real_vllm.py`.
Without `AGL_VLLM_URL` every test here is skipped. Each check compares what was recorded with the token ids vLLM
returns to a direct request, for chat (plain, streamed, n=2) and completions (plain, streamed).
"""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

VLLM_URL = os.environ.get("AGL_VLLM_URL", "").rstrip("/")
pytestmark = pytest.mark.skipif(
    not VLLM_URL, reason="set AGL_VLLM_URL=http://host:port/v1 to run the proxy against a real vLLM"
)
openai = pytest.importorskip("openai", reason="the OpenAI SDK is not installed")

from agentlightning.adapter import LlmProxyTraceToTriplet, TracerTraceToTriplet  # noqa: E402
from agentlightning.llm_proxy import LLMProxy  # noqa: E402
from agentlightning.store import InMemoryLightningStore  # noqa: E402
from agentlightning.types import Span  # noqa: E402

from .conftest import client_for, rollout, spans_of  # noqa: E402

MESSAGES = [{"role": "user", "content": "Name three colours."}]
SAMPLING: dict[str, Any] = {"max_tokens": 12, "temperature": 0, "seed": 7}


def base_url() -> str:
    return VLLM_URL if VLLM_URL.endswith("/v1") else f"{VLLM_URL}/v1"


@pytest.fixture(scope="module")
def model() -> str:
    with urllib.request.urlopen(f"{base_url()}/models", timeout=30) as response:
        return json.loads(response.read())["data"][0]["id"]


@pytest.fixture(scope="module")
def direct() -> Any:
    return openai.OpenAI(base_url=base_url(), api_key=os.environ.get("AGL_VLLM_API_KEY", "unused"))


@pytest.fixture
def vllm_proxy(store: InMemoryLightningStore, model: str) -> Iterator[LLMProxy]:
    entry = {"model": f"hosted_vllm/{model}", "api_base": base_url()}
    if os.environ.get("AGL_VLLM_API_KEY"):
        entry["api_key"] = os.environ["AGL_VLLM_API_KEY"]
    proxy = LLMProxy(model_list=[{"model_name": "policy", "litellm_params": entry}], store=store)  # type: ignore[list-item]
    proxy.start()
    yield proxy
    proxy.stop()


def ids(span: Span) -> tuple[Any, Any]:
    return span.attributes.get("prompt_token_ids"), span.attributes.get("response_token_ids")


def test_chat_calls_plain_streamed_and_n2_carry_vllms_token_ids(
    vllm_proxy: LLMProxy, store: InMemoryLightningStore, direct: Any, model: str
) -> None:
    expected = direct.chat.completions.create(
        model=model, messages=MESSAGES, extra_body={"return_token_ids": True}, **SAMPLING
    )
    attempted = rollout(store)
    client = client_for(vllm_proxy, attempted)
    client.chat.completions.create(model="policy", messages=MESSAGES, **SAMPLING)
    list(client.chat.completions.create(model="policy", messages=MESSAGES, stream=True, **SAMPLING))
    client.chat.completions.create(model="policy", messages=MESSAGES, n=2, **SAMPLING)
    plain, streamed, pair = spans_of(vllm_proxy, store, attempted)
    want = (expected.model_extra["prompt_token_ids"], expected.choices[0].model_extra["token_ids"])
    assert ids(plain) == want and ids(streamed) == want
    assert pair.attributes["gen_ai.completion.1.token_ids"]
    assert len(LlmProxyTraceToTriplet().adapt([plain, streamed, pair])) == 3


def test_completions_plain_and_streamed_carry_the_prompt_ids_vllm_puts_in_the_choice(
    vllm_proxy: LLMProxy, store: InMemoryLightningStore, direct: Any, model: str
) -> None:
    expected = direct.completions.create(
        model=model, prompt="The sky is", extra_body={"return_token_ids": True}, **SAMPLING
    )
    want = (expected.choices[0].model_extra["prompt_token_ids"], expected.choices[0].model_extra["token_ids"])
    attempted = rollout(store)
    client = client_for(vllm_proxy, attempted)
    client.completions.create(model="policy", prompt="The sky is", **SAMPLING)
    list(client.completions.create(model="policy", prompt="The sky is", stream=True, **SAMPLING))
    plain, streamed = spans_of(vllm_proxy, store, attempted)
    assert ids(plain) == want and ids(streamed) == want
    assert len(LlmProxyTraceToTriplet().adapt([plain, streamed])) == 2


def test_a_bad_value_that_vllm_echoes_does_not_switch_token_ids_off(
    vllm_proxy: LLMProxy, store: InMemoryLightningStore
) -> None:
    client = client_for(vllm_proxy, rollout(store))
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="policy", messages=MESSAGES, seed="return_token_ids")  # type: ignore[arg-type]
    assert vllm_proxy.token_id_refusals() == {}


async def test_zero_code_capture_asks_vllm_for_token_ids(direct: Any, model: str) -> None:
    pytest.importorskip("openinference.instrumentation.openai", reason="the openai extra is not installed")
    from agentlightning.tracer.otel import OtelTracer

    store = InMemoryLightningStore()
    tracer = OtelTracer(instrument=["openai"])
    tracer.init_worker(0, store)
    try:
        attempted = await store.start_rollout(input=None)
        client = openai.AsyncOpenAI(base_url=base_url(), api_key=os.environ.get("AGL_VLLM_API_KEY", "unused"))
        async with tracer.trace_context(rollout_id=attempted.rollout_id, attempt_id=attempted.attempt.attempt_id):
            await client.chat.completions.create(model=model, messages=MESSAGES, **SAMPLING)  # type: ignore[arg-type]
        [triplet] = TracerTraceToTriplet().adapt(await store.query_spans(attempted.rollout_id))
        assert triplet.prompt["token_ids"] and triplet.response["token_ids"]
    finally:
        tracer.teardown_worker(0)
