"""Zero-code capture of the OpenAI Agents SDK: agents, handoffs and tools become spans named after them, the model
calls become `openai.chat.completion` spans with token ids, and nothing is exported to OpenAI."""

from __future__ import annotations

import pytest

import agentlightning as agl
from agentlightning.adapter import TracerTraceToTriplet, TraceTree

from ..fake_openai_server import FakeOpenAIServer
from .conftest import Capture

pytest.importorskip("agents", reason="the openai-agents extra is not installed")
pytest.importorskip("openinference.instrumentation.openai_agents", reason="the openai-agents extra is not installed")

import openai
from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool


@function_tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"facts about {topic}"


async def test_a_handoff_between_agents_with_a_tool_is_captured(llm_server: FakeOpenAIServer, capture: Capture) -> None:
    client = openai.AsyncOpenAI(base_url=llm_server.base_url, api_key="test")
    model = OpenAIChatCompletionsModel(model="fake-model", openai_client=client)
    researcher = Agent(name="researcher", instructions="Research.", tools=[lookup], model=model)
    triage = Agent(name="triage", instructions="Route the question.", handoffs=[researcher], model=model)

    async def agent() -> str:
        result = await Runner.run(triage, "tell me about otters")
        agl.emit_reward(1.0)
        return str(result.final_output)

    output, spans = await capture(agent)
    assert output == "final answer: facts about test"
    names = {span.name for span in spans}
    assert {"triage", "researcher", "handoff to researcher", "lookup", "openai.chat.completion"} <= names

    tree = TraceTree.from_spans(spans)
    tree.repair_hierarchy()
    flat = str(tree.names_tuple())
    assert "triage [triage]" in flat and "researcher [researcher]" in flat

    triplets = TracerTraceToTriplet().adapt(spans)
    assert [t.metadata["agent_name"] for t in triplets] == ["triage", "researcher", "researcher"]
    assert all(t.prompt["token_ids"] and t.response["token_ids"] for t in triplets)
    assert [t.reward for t in triplets] == [None, None, 1.0]
    assert len(TracerTraceToTriplet(agent_match="^researcher$").adapt(spans)) == 2


async def test_the_sdks_own_trace_export_is_replaced(capture: Capture) -> None:
    from agents.tracing import get_trace_provider
    from openinference.instrumentation.openai_agents._processor import OpenInferenceTracingProcessor

    processors = get_trace_provider()._multi_processor._processors  # type: ignore[attr-defined]
    assert processors and all(isinstance(p, OpenInferenceTracingProcessor) for p in processors)


# --------------------------------------------------------------------------------- the default Responses model
def _scripted_reply(prompt: str) -> str:
    if "<tool_response>" in prompt:
        return "It is about otters."
    return '<tool_call>\n{"name": "lookup", "arguments": {"topic": "otters"}}\n</tool_call>'


async def test_the_default_responses_model_is_captured_with_token_ids(capture: Capture) -> None:
    pytest.importorskip("torch", reason="the inference extra (torch) is not installed")
    from agents import OpenAIResponsesModel

    from agentlightning.inference.server import InferenceServer

    from ..inference.scripted import scripted_engine

    with InferenceServer(scripted_engine(_scripted_reply)) as server:
        client = openai.AsyncOpenAI(base_url=server.endpoint, api_key="test")
        model = OpenAIResponsesModel(model="scripted", openai_client=client)
        researcher = Agent(name="researcher", instructions="Research.", tools=[lookup], model=model)

        async def agent() -> str:
            result = await Runner.run(researcher, "tell me about otters")
            agl.emit_reward(1.0)
            return str(result.final_output)

        output, spans = await capture(agent)
    assert output == "It is about otters."
    assert sum(span.name == "openai.responses" for span in spans) == 2
    triplets = TracerTraceToTriplet().adapt(spans)
    assert len(triplets) == 2
    assert all(t.prompt["token_ids"] and t.response["token_ids"] for t in triplets)
    assert [t.metadata["agent_name"] for t in triplets] == ["researcher", "researcher"]
    assert [t.reward for t in triplets] == [None, 1.0]
    # the second call's prompt extends the first call's prompt and response: one multi-turn sequence
    first, second = triplets
    joined = first.prompt["token_ids"] + first.response["token_ids"]
    assert second.prompt["token_ids"][: len(joined)] == joined
