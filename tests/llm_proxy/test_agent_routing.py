"""Routing each agent's calls to its own model entry (its LoRA adapter): by the model name it was handed, or by the
`x-agl-agent` header with the shared model's name; an agent no entry serves is refused, never sent to the shared
model."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentlightning.llm_proxy import LLMProxy
from agentlightning.llm_proxy.models import ModelListError, ModelRouter
from agentlightning.store import InMemoryLightningStore

from .conftest import MESSAGES, rollout
from .fake_upstream import FakeUpstream


def entries(api_base: str) -> list[Any]:
    def params(model: str) -> dict[str, Any]:
        return {"model": f"hosted_vllm/{model}", "api_base": api_base}

    return [
        {"model_name": "base", "litellm_params": params("base")},
        {"model_name": "solver", "litellm_params": params("solver")},
        {"model_name": "base", "agent": "solver", "litellm_params": params("solver")},
        {"model_name": "base", "agent": "reviewer", "litellm_params": params("reviewer")},
    ]


def test_the_router_sends_an_agent_to_its_own_entry() -> None:
    router = ModelRouter(entries("http://upstream/v1"))
    assert router.route("base").upstream_model == "base"  # type: ignore[union-attr]
    assert router.route("base", "solver").upstream_model == "solver"  # type: ignore[union-attr]
    assert router.route("base", "reviewer").upstream_model == "reviewer"  # type: ignore[union-attr]
    assert router.route("base", "writer") is None
    assert router.agents_of("base") == ["reviewer", "solver"]


def test_an_empty_agent_name_in_the_model_list_is_rejected() -> None:
    bad = [{"model_name": "base", "agent": "", "litellm_params": {"model": "m", "api_base": "http://u/v1"}}]
    with pytest.raises(ModelListError, match="'agent' must be a non-empty string"):
        ModelRouter(bad)  # type: ignore[arg-type]


@pytest.fixture
def agent_proxy(upstream: FakeUpstream, store: InMemoryLightningStore) -> Iterator[LLMProxy]:
    proxy = LLMProxy(model_list=entries(upstream.api_base), store=store)
    proxy.start()
    yield proxy
    proxy.stop()


def post(proxy: LLMProxy, store: InMemoryLightningStore, model: str, agent: str | None = None) -> httpx.Response:
    attempted = rollout(store)
    url = f"{proxy.endpoint}/rollout/{attempted.rollout_id}/attempt/{attempted.attempt.attempt_id}/v1/chat/completions"
    headers = {"x-agl-agent": agent} if agent else {}
    return httpx.post(url, json={"model": model, "messages": MESSAGES}, headers=headers, timeout=30)


def test_the_agent_header_routes_to_the_agents_adapter(
    agent_proxy: LLMProxy, store: InMemoryLightningStore, upstream: FakeUpstream
) -> None:
    assert post(agent_proxy, store, "base", agent="reviewer").status_code == 200
    assert post(agent_proxy, store, "base").status_code == 200
    assert [body["model"] for body in upstream.script.requests] == ["reviewer", "base"]


def test_the_model_name_an_agent_was_handed_routes_to_its_adapter(
    agent_proxy: LLMProxy, store: InMemoryLightningStore, upstream: FakeUpstream
) -> None:
    assert post(agent_proxy, store, "solver").status_code == 200
    assert upstream.script.requests[-1]["model"] == "solver"


def test_an_agent_without_an_adapter_is_refused_with_the_agents_served(
    agent_proxy: LLMProxy, store: InMemoryLightningStore, upstream: FakeUpstream
) -> None:
    response = post(agent_proxy, store, "base", agent="writer")
    assert response.status_code == 404
    message = response.json()["error"]["message"]
    assert "'writer'" in message and "['reviewer', 'solver']" in message
    assert upstream.script.requests == []
