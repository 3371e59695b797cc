"""The calculator agent written with LangGraph's prebuilt ReAct agent (`create_react_agent`). The reward line is
its only training-specific line."""

from __future__ import annotations

from typing import Any, Optional

from task import MAX_TURNS, SYSTEM_PROMPT, examples_for, max_tokens, question, reward
from task import add as add_numbers
from task import multiply as multiply_numbers

import agentlightning as agl


def build_tools() -> list[Any]:
    from langchain_core.tools import tool

    @tool
    def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        return multiply_numbers(a, b)

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return add_numbers(a, b)

    return [multiply, add]


def worked_examples(task: Optional[dict[str, Any]] = None) -> list[Any]:
    """The worked examples as LangChain messages: question, tool call, tool result, answer."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    messages: list[Any] = []
    for index, example in enumerate(examples_for(task)):
        call_id = f"example_{index}"
        messages += [
            HumanMessage(example.question),
            AIMessage("", tool_calls=[{"id": call_id, "name": example.tool, "args": {"a": example.a, "b": example.b}}]),
            ToolMessage(example.result, tool_call_id=call_id),
            AIMessage(example.result),
        ]
    return messages


@agl.rollout
async def calc_agent(task: dict[str, Any], llm: agl.LLM) -> float:
    import httpx
    from langchain_core.messages import HumanMessage
    from langchain_openai import ChatOpenAI
    from langgraph.errors import GraphRecursionError
    from langgraph.prebuilt import create_react_agent

    # An HTTP client of this rollout's own: ChatOpenAI's default one is shared by the whole process and breaks once
    # the event loop it first ran on has closed (langchain-ai/langchain#35783), e.g. in the next runner thread.
    async with httpx.AsyncClient() as http_client:
        model = ChatOpenAI(
            model=llm.model,
            base_url=llm.endpoint,
            api_key=llm.api_key or "unused",  # type: ignore[arg-type]
            temperature=llm.sampling_parameters.get("temperature", 0.0),
            max_completion_tokens=max_tokens(llm.sampling_parameters),
            max_retries=2,
            http_async_client=http_client,
        )
        graph = create_react_agent(model, build_tools(), prompt=SYSTEM_PROMPT, name="calculator")
        messages = [*worked_examples(task), HumanMessage(question(task))]
        try:  # a model call and a tool step per turn, then the final call
            state = await graph.ainvoke({"messages": messages}, {"recursion_limit": 2 * MAX_TURNS})
            reply = str(state["messages"][-1].content)
        except GraphRecursionError:
            reply = ""  # the model kept calling tools
    return reward(reply, task)  # the reward: the only training-specific line
