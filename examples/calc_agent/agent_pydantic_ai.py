"""The calculator agent written with Pydantic AI (`Agent` with two tools over `OpenAIChatModel`). The reward line is
its only training-specific line."""

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
    """The system prompt and the worked examples as Pydantic AI messages (a run given a message history adds no
    system prompt of its own, so it leads the history)."""
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    messages: list[Any] = []
    for index, example in enumerate(examples_for(task)):
        call_id = f"example_{index}"
        first: list[Any] = [SystemPromptPart(content=SYSTEM_PROMPT)] if index == 0 else []
        messages += [
            ModelRequest(parts=[*first, UserPromptPart(content=example.question)]),
            ModelResponse(parts=[ToolCallPart(tool_name=example.tool, args=example.arguments, tool_call_id=call_id)]),
            ModelRequest(parts=[ToolReturnPart(tool_name=example.tool, content=example.result, tool_call_id=call_id)]),
            ModelResponse(parts=[TextPart(content=example.result)]),
        ]
    return messages


@agl.rollout
async def calc_agent(task: dict[str, Any], llm: agl.LLM) -> float:
    from pydantic_ai import Agent, UsageLimitExceeded
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.usage import UsageLimits

    model = OpenAIChatModel(llm.model, provider=OpenAIProvider(base_url=llm.endpoint, api_key=llm.api_key or "unused"))
    agent = Agent(
        model,
        name="calculator",
        tools=[multiply, add],
        model_settings={
            "temperature": llm.sampling_parameters.get("temperature", 0.0),
            "max_tokens": max_tokens(llm.sampling_parameters),
        },
    )
    try:
        result = await agent.run(
            question(task), message_history=worked_examples(task), usage_limits=UsageLimits(request_limit=MAX_TURNS)
        )
        reply = str(result.output)
    except UsageLimitExceeded:
        reply = ""  # still calling tools after MAX_TURNS calls: no answer
    return reward(reply, task)  # the reward: the only training-specific line
