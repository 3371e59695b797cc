"""Fixtures of the capture matrix: one scripted model server, one LLM proxy in front of it, one store."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

# LiteLLM (DSPy, LlamaIndex's LiteLLM integration) fetches its model table from GitHub at import unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
pytest.importorskip("torch", reason="the inference extra (torch) is not installed")
pytest.importorskip("openai", reason="the openai extra is not installed")

from agentlightning.inference.server import InferenceServer
from agentlightning.llm_proxy import LLMProxy
from agentlightning.store import InMemoryLightningStore

from ...inference.scripted import scripted_engine
from .harness import MODEL, Rollouts, Scripts


@pytest.fixture(scope="package")
def scripts() -> Scripts:
    return Scripts()


@pytest.fixture(scope="package")
def model_server(scripts: Scripts) -> Iterator[InferenceServer]:
    with InferenceServer(scripted_engine(scripts.reply, model_name=MODEL)) as server:
        yield server


@pytest.fixture(scope="package")
def store() -> InMemoryLightningStore:
    return InMemoryLightningStore()


@pytest.fixture(scope="package")
def proxy(model_server: InferenceServer, store: InMemoryLightningStore) -> Iterator[LLMProxy]:
    entry = {
        "model_name": MODEL,
        "litellm_params": {"model": f"hosted_vllm/{MODEL}", "api_base": model_server.endpoint},
    }
    llm_proxy = LLMProxy(model_list=[entry], store=store)  # type: ignore[list-item]
    llm_proxy.start()
    yield llm_proxy
    if llm_proxy.is_running():
        llm_proxy.stop()


@pytest.fixture
def rollouts(store: InMemoryLightningStore, model_server: InferenceServer, proxy: LLMProxy) -> Rollouts:
    return Rollouts(store, model_server.endpoint, proxy)
