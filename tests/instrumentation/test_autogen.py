"""Zero-code capture of AutoGen AgentChat: a two-agent round-robin team with a tool; each agent's model calls become
`openai.chat.completion` spans with token ids under that agent, so `agent_match` can select one of them."""

from __future__ import annotations

import pytest

import agentlightning as agl
from agentlightning.adapter import TracerTraceToTriplet

from ..fake_openai_server import FakeOpenAIServer
from .conftest import Capture

pytest.importorskip("autogen_agentchat", reason="the autogen extra is not installed")
pytest.importorskip("autogen_ext.models.openai", reason="the autogen extra is not installed")
pytest.importorskip("openinference.instrumentation.autogen_agentchat", reason="the autogen extra is not installed")

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core.models import ModelInfo
from autogen_ext.models.openai import OpenAIChatCompletionClient


async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def test_a_round_robin_team_is_captured_per_agent(llm_server: FakeOpenAIServer, capture: Capture) -> None:
    client = OpenAIChatCompletionClient(
        model="fake-model",
        base_url=llm_server.base_url,
        api_key="test",
        model_info=ModelInfo(
            vision=False, function_calling=True, json_output=False, family="unknown", structured_output=False
        ),
    )
    primary = AssistantAgent("primary", model_client=client, tools=[add])
    critic = AssistantAgent("critic", model_client=client)
    team = RoundRobinGroupChat([primary, critic], termination_condition=MaxMessageTermination(4))

    async def agent() -> list[str]:
        result = await team.run(task="REPLY: looks good")
        agl.emit_reward(1.0)
        return [str(message.content) for message in result.messages]

    messages, spans = await capture(agent)
    assert messages[0] == "REPLY: looks good" and messages[3] == "4"  # the tool ran: add(2, 2)
    # AutoGen closes its message streams lazily: every agent turn's span is stored before the context returns
    streams = sorted(span.name for span in spans if span.name.endswith(".on_messages_stream"))
    assert streams == ["critic.on_messages_stream", "primary.on_messages_stream", "primary.on_messages_stream"]

    triplets = TracerTraceToTriplet().adapt(spans)
    assert [t.metadata["agent_name"] for t in triplets] == ["primary", "critic", "primary"]
    assert all(t.prompt["token_ids"] and t.response["token_ids"] for t in triplets)
    assert [t.reward for t in triplets] == [None, None, 1.0]

    critic_only = TracerTraceToTriplet(agent_match="^critic$").adapt(spans)
    assert [t.metadata["response_id"] for t in critic_only] == [triplets[1].metadata["response_id"]]
    tool_call = next(span for span in spans if span.attributes.get("gen_ai.completion.0.tool_calls.0.name") == "add")
    assert tool_call.attributes["gen_ai.request.functions.0.name"] == "add"
