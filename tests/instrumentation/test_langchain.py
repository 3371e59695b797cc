"""Zero-code capture of LangChain and LangGraph: chains and graph nodes become spans, the model calls inside them
become `openai.chat.completion` spans with token ids, and `agent_match` selects the calls of one graph node."""

from __future__ import annotations

from typing import Any

import pytest

import agentlightning as agl
from agentlightning.adapter import TracerTraceToTriplet, TraceTree

from ..fake_openai_server import FakeOpenAIServer, encode
from .conftest import Capture

pytest.importorskip("langchain_openai", reason="the langchain extra is not installed")
pytest.importorskip("openinference.instrumentation.langchain", reason="the langchain extra is not installed")

from langchain_core.prompts import ChatPromptTemplate
from langchain_openai import ChatOpenAI


def chat_model(server: FakeOpenAIServer) -> ChatOpenAI:
    # A fresh async HTTP client per model: langchain-openai otherwise shares a cached one across event loops.
    import openai

    return ChatOpenAI(
        model="fake-model",
        base_url=server.base_url,
        api_key="test",  # type: ignore[arg-type]
        max_retries=0,
        http_async_client=openai.DefaultAsyncHttpxClient(),
    )


async def test_a_chain_call_is_captured_with_token_ids(llm_server: FakeOpenAIServer, capture: Capture) -> None:
    chain = ChatPromptTemplate.from_messages([("user", "Summarise {topic}")]) | chat_model(llm_server)

    async def agent() -> str:
        message = await chain.ainvoke({"topic": "otel"})
        return str(message.content)

    result, spans = await capture(agent)
    assert result == "reply to: Summarise otel"
    names = [span.name for span in spans]
    assert "ChatOpenAI" in names and "RunnableSequence" in names
    [triplet] = TracerTraceToTriplet().adapt(spans)
    assert triplet.response["token_ids"] == encode("reply to: Summarise otel")


async def test_langgraph_nodes_are_agents_that_agent_match_can_select(
    llm_server: FakeOpenAIServer, capture: Capture
) -> None:
    pytest.importorskip("langgraph", reason="langgraph is not installed")
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    class State(TypedDict):
        task: str
        plan: str
        code: str

    model = chat_model(llm_server)

    async def planner(state: State) -> dict[str, Any]:
        message = await model.ainvoke([("user", f"REPLY: plan for {state['task']}")])
        return {"plan": str(message.content)}

    async def coder(state: State) -> dict[str, Any]:
        first = await model.ainvoke([("user", f"REPLY: draft {state['plan']}")])
        second = await model.ainvoke([("user", f"REPLY: fix {first.content}")])
        return {"code": str(second.content)}

    graph = StateGraph(State)
    graph.add_node("planner", planner)
    graph.add_node("coder", coder)
    graph.add_edge(START, "planner")
    graph.add_edge("planner", "coder")
    graph.add_edge("coder", END)
    app = graph.compile()

    async def agent() -> str:
        state = await app.ainvoke({"task": "sort", "plan": "", "code": ""})
        agl.emit_reward(1.0)
        return state["code"]

    result, spans = await capture(agent)
    assert result == "fix draft plan for sort"

    tree = TraceTree.from_spans(spans)
    tree.repair_hierarchy()
    flat = str(tree.names_tuple())
    assert "planner [planner]" in flat and "coder [coder]" in flat

    coder_triplets = TracerTraceToTriplet(agent_match="coder").adapt(spans)
    assert [t.response["token_ids"] for t in coder_triplets] == [
        encode("draft plan for sort"),
        encode("fix draft plan for sort"),
    ]
    assert [t.metadata["agent_name"] for t in coder_triplets] == ["coder", "coder"]
    assert [t.reward for t in coder_triplets] == [None, 1.0]

    [planner_triplet] = TracerTraceToTriplet(agent_match="planner").adapt(spans)
    assert planner_triplet.response["token_ids"] == encode("plan for sort")
    assert planner_triplet.reward == 1.0

    assert len(TracerTraceToTriplet().adapt(spans)) == 3
