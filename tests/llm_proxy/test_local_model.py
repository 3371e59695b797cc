"""The LLM proxy in front of the local inference server (a tiny real model): exact token ids, streaming included.

Needs torch (the `inference` extra); everything that only needs an OpenAI-compatible upstream is tested against the
fake upstream in test_proxy.py, which runs without torch.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

pytest.importorskip("torch", reason="the inference extra (torch) is not installed")
openai = pytest.importorskip("openai", reason="the OpenAI SDK is not installed")

from agentlightning.inference.server import InferenceServer  # noqa: E402
from agentlightning.inference.tiny import build_tiny_engine  # noqa: E402
from agentlightning.llm_proxy import LLMProxy  # noqa: E402
from agentlightning.store import InMemoryLightningStore  # noqa: E402

from .conftest import MESSAGES, client_for, rollout, spans_of  # noqa: E402


@pytest.fixture(scope="module")
def upstream_server() -> Iterator[InferenceServer]:
    with InferenceServer(build_tiny_engine(seed=0)) as server:
        yield server


@pytest.fixture
def local_proxy(upstream_server: InferenceServer, store: InMemoryLightningStore) -> Iterator[LLMProxy]:
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


def test_a_call_is_recorded_under_its_rollout_with_the_servers_token_ids(
    local_proxy: LLMProxy, store: InMemoryLightningStore
) -> None:
    attempted = rollout(store)
    reply = client_for(local_proxy, attempted).chat.completions.create(
        model="tiny", messages=MESSAGES, max_tokens=6, temperature=0
    )
    [span] = spans_of(local_proxy, store, attempted)
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


def test_a_streamed_call_is_recorded_with_the_same_token_ids_as_the_plain_call(
    local_proxy: LLMProxy, store: InMemoryLightningStore
) -> None:
    attempted = rollout(store)
    client = client_for(local_proxy, attempted)
    plain = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=6, temperature=0)
    chunks = list(
        client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=6, temperature=0, stream=True)
    )
    assert len(chunks) >= 6
    assert all(chunk.usage is None for chunk in chunks)  # the usage chunk the proxy asked for is not relayed
    streamed_text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed_text == plain.choices[0].message.content
    first, second = spans_of(local_proxy, store, attempted)
    assert (first.sequence_id, second.sequence_id) == (1, 2)
    assert second.attributes["agentlightning.llm.stream"] is True
    for key in (
        "prompt_token_ids",
        "response_token_ids",
        "gen_ai.completion.0.content",
        "gen_ai.usage.completion_tokens",
    ):
        assert second.attributes[key] == first.attributes[key], key


def test_completions_of_the_local_server_are_recorded_with_prompt_and_response_ids(
    local_proxy: LLMProxy, store: InMemoryLightningStore
) -> None:
    attempted = rollout(store)
    reply = client_for(local_proxy, attempted).completions.create(model="tiny", prompt="abc", max_tokens=3)
    [span] = spans_of(local_proxy, store, attempted)
    assert span.name == "openai.completion"
    assert span.attributes["gen_ai.prompt.0.content"] == "abc"
    assert span.attributes["gen_ai.completion.0.content"] == reply.choices[0].text
    assert span.attributes["prompt_token_ids"] and len(span.attributes["response_token_ids"]) == 3  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------- Responses API
def test_a_responses_call_is_recorded_with_the_servers_token_ids(
    local_proxy: LLMProxy, store: InMemoryLightningStore
) -> None:
    attempted = rollout(store)
    reply = client_for(local_proxy, attempted).responses.create(
        model="tiny", instructions="Be brief.", input="ping", max_output_tokens=6, temperature=0
    )
    [span] = spans_of(local_proxy, store, attempted)
    assert span.name == "openai.responses" and span.status.status_code == "OK"
    attrs = span.attributes
    assert attrs["gen_ai.prompt.0.role"] == "system" and attrs["gen_ai.prompt.0.content"] == "Be brief."
    assert attrs["gen_ai.prompt.1.role"] == "user" and attrs["gen_ai.prompt.1.content"] == "ping"
    assert attrs["gen_ai.completion.0.content"] == reply.output_text
    assert attrs["prompt_token_ids"] == reply.model_extra["prompt_token_ids"]  # type: ignore[index]
    assert attrs["response_token_ids"] == reply.model_extra["output_token_ids"]  # type: ignore[index]
    assert len(attrs["response_token_ids"]) == 6  # type: ignore[arg-type]
    assert attrs["gen_ai.request.max_tokens"] == 6


def test_a_streamed_responses_call_is_recorded_like_the_plain_one(
    local_proxy: LLMProxy, store: InMemoryLightningStore
) -> None:
    attempted = rollout(store)
    client = client_for(local_proxy, attempted)
    plain = client.responses.create(model="tiny", input="ping", max_output_tokens=6, temperature=0)
    events = list(client.responses.create(model="tiny", input="ping", max_output_tokens=6, temperature=0, stream=True))
    assert events[-1].type == "response.incomplete"  # cut by max_output_tokens, as the plain answer
    plain_span, streamed_span = spans_of(local_proxy, store, attempted)
    assert streamed_span.name == "openai.responses"
    for key in ("prompt_token_ids", "response_token_ids", "gen_ai.completion.0.content"):
        assert streamed_span.attributes[key] == plain_span.attributes[key]
    assert plain.status == "incomplete"
