"""Each framework's calculator agent runs again on a new event loop: runner threads (the shm strategy) each run
their own loop, and a process may run rollouts with one `asyncio.run` after another. A client cached across loops
fails there with "Event loop is closed" (LangChain's ChatOpenAI shares one HTTP client per process,
langchain-ai/langchain#35783; the LangGraph version gives ChatOpenAI a client of the rollout's own)."""

from __future__ import annotations

import asyncio

import pytest

import agentlightning as agl
from agentlightning.inference.server import InferenceServer

from .harness import FRAMEWORKS, MODEL, PACKAGES, SAMPLING, Scripts, agent_module, script_for


@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_the_agent_runs_on_one_event_loop_after_another(
    framework: str, scripts: Scripts, model_server: InferenceServer
) -> None:
    pytest.importorskip(PACKAGES[framework])
    agent = agent_module(framework).calc_agent
    if not agent.is_async():
        pytest.skip(f"the {framework} agent is synchronous: it runs on no event loop")
    llm = agl.LLM(endpoint=model_server.endpoint, model=MODEL, sampling_parameters=dict(SAMPLING))
    rewards = [asyncio.run(agent(scripts.new_task(script_for(framework)), llm)) for _ in range(2)]
    assert rewards == [1.0, 1.0]
