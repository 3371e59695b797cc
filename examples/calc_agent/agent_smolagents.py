"""The calculator agent written with smolagents (`ToolCallingAgent` with two tools over `OpenAIModel`). The reward
line is its only training-specific line.

smolagents answers through its `final_answer` tool, so a rollout that goes right is two tool-calling LLM calls. It
replays earlier steps as text ("Calling tools: ...", "Observation: ...") rather than as the model's own messages, so
each call's prompt does not extend the previous call's tokens: the calls are trained as separate triplets (see
docs/capture.md). Its long default system prompt is replaced by the task's (the tools reach the model as the
request's `tools`), and it has no worked examples.
"""

from __future__ import annotations

from typing import Any

from task import MAX_TURNS, SYSTEM_PROMPT, max_tokens, question, reward
from task import add as add_numbers
from task import multiply as multiply_numbers

import agentlightning as agl

INSTRUCTIONS = SYSTEM_PROMPT + " Give the number with the final_answer tool."


def build_tools() -> list[Any]:
    from smolagents import tool

    @tool
    def multiply(a: int, b: int) -> int:
        """Multiply two integers.

        Args:
            a: the first factor
            b: the second factor
        """
        return multiply_numbers(a, b)

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: the first term
            b: the second term
        """
        return add_numbers(a, b)

    return [multiply, add]


@agl.rollout
def calc_agent(task: dict[str, Any], llm: agl.LLM) -> float:
    from smolagents import LogLevel, OpenAIModel, ToolCallingAgent

    model = OpenAIModel(
        model_id=llm.model,
        api_base=llm.endpoint,
        api_key=llm.api_key or "unused",
        temperature=llm.sampling_parameters.get("temperature", 0.0),
        max_tokens=max_tokens(llm.sampling_parameters),
    )
    agent = ToolCallingAgent(
        tools=build_tools(), model=model, name="calculator", max_steps=MAX_TURNS, verbosity_level=LogLevel.OFF
    )
    agent.prompt_templates["system_prompt"] = INSTRUCTIONS
    reply = str(agent.run(question(task)))
    return reward(reply, task)  # the reward: the only training-specific line
