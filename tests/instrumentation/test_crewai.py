"""Zero-code capture of CrewAI: each crew agent's model calls become `openai.chat.completion` spans with token ids
under that agent's span. CrewAI is heavy, so it is only in the `crewai` extra: this test is skipped without it."""

from __future__ import annotations

import asyncio
import os

import pytest

import agentlightning as agl
from agentlightning.adapter import TracerTraceToTriplet

from ..fake_openai_server import FakeOpenAIServer, encode
from .conftest import Capture

os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")  # CrewAI's own telemetry would try to reach its servers
crewai = pytest.importorskip(
    "crewai", reason="the crewai extra is not installed (pip install 'agentlightning[crewai]')"
)
pytest.importorskip("openinference.instrumentation.crewai", reason="the crewai extra is not installed")


async def test_a_two_agent_crew_is_captured_per_agent(llm_server: FakeOpenAIServer, capture: Capture) -> None:
    llm = crewai.LLM(model="openai/fake-model", base_url=llm_server.base_url, api_key="test")
    researcher = crewai.Agent(role="researcher", goal="find facts", backstory="curious", llm=llm)
    writer = crewai.Agent(role="writer", goal="write", backstory="concise", llm=llm)
    crew = crewai.Crew(
        agents=[researcher, writer],
        tasks=[
            crewai.Task(description="REPLY: facts about otters", expected_output="facts", agent=researcher),
            crewai.Task(description="REPLY: a summary", expected_output="summary", agent=writer),
        ],
    )

    async def agent() -> str:
        output = await asyncio.to_thread(crew.kickoff)
        agl.emit_reward(1.0)
        return str(output)

    output, spans = await capture(agent)
    assert output.startswith("a summary")
    triplets = TracerTraceToTriplet().adapt(spans)
    assert [t.metadata["agent_name"] for t in triplets] == ["researcher", "writer"]
    assert triplets[0].response["token_ids"][: len(encode("facts about otters"))] == encode("facts about otters")
    assert [t.reward for t in triplets] == [None, 1.0]
    [writer_only] = TracerTraceToTriplet(agent_match="^writer$").adapt(spans)
    assert writer_only.metadata["response_id"] == triplets[1].metadata["response_id"]
