"""The calculator agent written with AutoGen AgentChat (`AssistantAgent` with tools). The reward line is its only
training-specific line."""

from __future__ import annotations

from typing import Any, Optional

from task import MAX_TURNS, SYSTEM_PROMPT, examples_for, max_tokens, question, reward
from task import add as add_numbers
from task import multiply as multiply_numbers

import agentlightning as agl


def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return multiply_numbers(a, b)


def add(a: int, b: int) -> int:
    """Add two integers."""
    return add_numbers(a, b)


def worked_examples(task: Optional[dict[str, Any]] = None) -> list[Any]:
    """The worked examples as AutoGen model messages: question, function call, its result, answer."""
    from autogen_core import FunctionCall
    from autogen_core.models import (
        AssistantMessage,
        FunctionExecutionResult,
        FunctionExecutionResultMessage,
        UserMessage,
    )

    messages: list[Any] = []
    for index, example in enumerate(examples_for(task)):
        call_id = f"example_{index}"
        messages += [
            UserMessage(content=example.question, source="user"),
            AssistantMessage(
                content=[FunctionCall(id=call_id, name=example.tool, arguments=example.arguments)],
                source="calculator",
            ),
            FunctionExecutionResultMessage(
                content=[FunctionExecutionResult(call_id=call_id, content=example.result, name=example.tool)]
            ),
            AssistantMessage(content=example.result, source="calculator"),
        ]
    return messages


@agl.rollout
async def calc_agent(task: dict[str, Any], llm: agl.LLM) -> float:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_core.model_context import UnboundedChatCompletionContext
    from autogen_core.models import ModelFamily
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    client = OpenAIChatCompletionClient(
        model=llm.model,
        base_url=llm.endpoint,
        api_key=llm.api_key or "unused",
        temperature=llm.sampling_parameters.get("temperature", 0.0),
        max_tokens=max_tokens(llm.sampling_parameters),
        model_info={
            "vision": False,
            "function_calling": True,
            "json_output": False,
            "family": ModelFamily.UNKNOWN,
            "structured_output": False,
        },
    )
    agent = AssistantAgent(
        "calculator",
        model_client=client,
        tools=[multiply, add],
        system_message=SYSTEM_PROMPT,
        model_context=UnboundedChatCompletionContext(initial_messages=worked_examples(task)),
        reflect_on_tool_use=True,  # answer in words after the tools (else the tool's result is the reply)
        max_tool_iterations=MAX_TURNS - 1,
    )
    try:
        result = await agent.run(task=question(task))
        reply = str(result.messages[-1].content) if result.messages else ""
    finally:
        await client.close()
    return reward(reply, task)  # the reward: the only training-specific line
