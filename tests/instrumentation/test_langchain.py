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


def _by_id(spans: list[agl.Span]) -> dict[str, agl.Span]:
    return {span.span_id: span for span in spans}


def _sdk_calls_under_chat_model_spans(spans: list[agl.Span]) -> list[agl.Span]:
    """The SDK spans of the trace, each checked to be a child of a ChatOpenAI span of the same trace."""
    by_id = _by_id(spans)
    sdk = [span for span in spans if span.name == "openai.chat.completion"]
    for span in sdk:
        parent = by_id.get(span.parent_id or "")
        assert parent is not None and parent.name == "ChatOpenAI", f"{span.name} has parent {span.parent_id}"
        assert parent.trace_id == span.trace_id
    return sdk


async def test_the_sdk_call_of_a_chat_model_is_the_child_of_its_span(
    llm_server: FakeOpenAIServer, capture: Capture
) -> None:
    model = chat_model(llm_server)

    async def agent() -> None:
        for topic in ("a", "b", "c"):
            await model.ainvoke([("user", f"REPLY: {topic}")])

    _, spans = await capture(agent)
    sdk = _sdk_calls_under_chat_model_spans(spans)
    assert len(sdk) == 3 and all(span.attributes.get("prompt_token_ids") for span in sdk)
    assert len({span.trace_id for span in spans}) == 3  # one trace per top-level call, the SDK span inside it


async def test_streamed_calls_are_parented_and_leave_no_context_behind(
    llm_server: FakeOpenAIServer, capture: Capture
) -> None:
    from opentelemetry import trace

    model = chat_model(llm_server)
    current_after: list[Any] = []

    def sync_stream() -> str:
        return "".join(str(chunk.content) for chunk in model.stream([("user", "REPLY: sync")]))

    async def agent() -> list[str]:
        texts = ["".join([str(chunk.content) async for chunk in model.astream([("user", "REPLY: async")])])]
        current_after.append(trace.get_current_span())
        stream = model.astream([("user", "REPLY: abandoned")])
        await stream.__anext__()
        await stream.aclose()  # a consumer that stops early
        current_after.append(trace.get_current_span())
        import asyncio

        texts.append(await asyncio.to_thread(sync_stream))
        return texts

    texts, spans = await capture(agent)
    assert texts == ["async", "sync"]
    assert len(_sdk_calls_under_chat_model_spans(spans)) == 3
    assert all(not span.get_span_context().is_valid for span in current_after)


async def test_uninstrumenting_removes_the_parenting_wrappers() -> None:
    from langchain_core.language_models.chat_models import BaseChatModel

    from agentlightning.instrumentation import instrument_all, uninstrument_all

    instrument_all(["langchain"])
    assert hasattr(BaseChatModel._agenerate_with_cache, "__wrapped__")
    uninstrument_all(["langchain"], force=True)
    assert not hasattr(BaseChatModel._agenerate_with_cache, "__wrapped__")
    assert not hasattr(BaseChatModel.astream, "__wrapped__")


def _calculator(server: FakeOpenAIServer) -> Any:
    """LangGraph's prebuilt ReAct agent named "calculator" (nodes "agent" and "tools"), with one adding tool."""
    import warnings

    pytest.importorskip("langgraph", reason="langgraph is not installed")
    from langchain_core.tools import tool
    from langgraph.prebuilt import create_react_agent

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LangGraph 1.x suggests langchain.agents.create_agent instead
        return create_react_agent(chat_model(server), [add], name="calculator")


async def test_a_named_graph_is_the_agent_of_its_calls(llm_server: FakeOpenAIServer, capture: Capture) -> None:
    calculator = _calculator(llm_server)

    async def agent() -> Any:
        return await calculator.ainvoke({"messages": [("user", "add 1 and 2")]})

    _, spans = await capture(agent)
    assert len(_sdk_calls_under_chat_model_spans(spans)) == 2  # the tool call, then the answer

    triplets = TracerTraceToTriplet(agent_match="calculator").adapt(spans)
    assert len(triplets) == 2 and {t.metadata["agent_name"] for t in triplets} == {"calculator"}
    assert len(TracerTraceToTriplet(agent_match="^agent$").adapt(spans)) == 2  # the node name still selects
    assert TracerTraceToTriplet(agent_match="^tools$").adapt(spans) == []
    assert len(TracerTraceToTriplet().adapt(spans)) == 2
    assert len(agl.TraceToMessages().adapt(spans)) == 2  # one conversation per model call


async def test_a_named_graph_inside_another_is_an_agent_of_its_own(
    llm_server: FakeOpenAIServer, capture: Capture
) -> None:
    from langgraph.graph import END, START, MessagesState, StateGraph

    calculator = _calculator(llm_server)
    model = chat_model(llm_server)

    async def review(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke([("user", "REPLY: looks right")])]}

    graph = StateGraph(MessagesState)
    graph.add_node("calc", calculator)
    graph.add_node("review", review)
    graph.add_edge(START, "calc")
    graph.add_edge("calc", "review")
    graph.add_edge("review", END)
    team = graph.compile(name="team")

    async def agent() -> Any:
        return await team.ainvoke({"messages": [("user", "add 1 and 2")]})

    _, spans = await capture(agent)
    [own] = TracerTraceToTriplet(agent_match="^team$").adapt(spans)  # the sub-agent's calls are not the team's
    assert own.response["token_ids"] == encode("looks right") and own.metadata["agent_name"] == "team"
    assert len(TracerTraceToTriplet(agent_match="^calculator$").adapt(spans)) == 2
    assert [t.metadata["agent_name"] for t in TracerTraceToTriplet().adapt(spans)] == ["agent", "agent", "review"]
