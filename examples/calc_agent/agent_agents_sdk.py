"""The calculator agent written with the OpenAI Agents SDK (`Agent` + `function_tool`, its default Responses model).
The reward line is its only training-specific line."""

from __future__ import annotations

from typing import Any, Optional

from task import MAX_TURNS, SYSTEM_PROMPT, examples_for, max_tokens, question, reward
from task import add as add_numbers
from task import multiply as multiply_numbers

import agentlightning as agl


def tool_error(context: Any, error: Exception) -> str:
    """What the model reads when a tool call fails: the error, as the other versions tell it (the SDK's default
    message says only that something failed)."""
    return f"error: {error}"


def build_agent(llm: agl.LLM) -> Any:
    from agents import Agent, ModelSettings, OpenAIResponsesModel, function_tool
    from openai import AsyncOpenAI

    @function_tool(failure_error_function=tool_error)
    def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        return multiply_numbers(a, b)

    @function_tool(failure_error_function=tool_error)
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return add_numbers(a, b)

    client = AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key or "unused", max_retries=2)
    return Agent(
        name="calculator",
        instructions=SYSTEM_PROMPT,
        tools=[multiply, add],
        model=OpenAIResponsesModel(model=llm.model, openai_client=client),
        model_settings=ModelSettings(
            temperature=llm.sampling_parameters.get("temperature", 0.0), max_tokens=max_tokens(llm.sampling_parameters)
        ),
    )


def worked_examples(task: Optional[dict[str, Any]] = None) -> list[dict[str, Any]]:
    """The worked examples as Responses API input items: question, function call, its output, answer."""
    items: list[dict[str, Any]] = []
    for index, example in enumerate(examples_for(task)):
        call_id = f"example_{index}"
        items += [
            {"role": "user", "content": example.question},
            {"type": "function_call", "call_id": call_id, "name": example.tool, "arguments": example.arguments},
            {"type": "function_call_output", "call_id": call_id, "output": example.result},
            {"role": "assistant", "content": example.result},
        ]
    return items


def run_config() -> Any:
    """Unknown tools are reported to the model like the other versions do (the SDK's default ends the run). The SDK's
    traces stay on this machine: kept, with the reasons tools failed, only while Agent Lightning's capture replaces
    the SDK's upload to OpenAI (its spans name the agent, which `agent_match` selects by), switched off otherwise."""
    from agents import RunConfig

    from agentlightning.instrumentation import instrumentation_count

    captured = instrumentation_count("openai_agents") > 0
    return RunConfig(
        tracing_disabled=not captured,
        trace_include_sensitive_data=captured,
        tool_not_found_behavior="return_error_to_model",
    )


@agl.rollout
async def calc_agent(task: dict[str, Any], llm: agl.LLM) -> float:
    from agents import MaxTurnsExceeded, ModelBehaviorError, Runner

    items = [*worked_examples(task), {"role": "user", "content": question(task)}]
    try:
        agent = build_agent(llm)
        result = await Runner.run(agent, items, max_turns=MAX_TURNS, run_config=run_config())  # type: ignore[arg-type]
        reply = str(result.final_output)
    except MaxTurnsExceeded:
        reply = ""  # the model kept calling tools
    except ModelBehaviorError:
        reply = ""  # e.g. an answer cut at max_tokens ("incomplete"), which the SDK raises: scored as wrong
    return reward(reply, task)  # the reward: the only training-specific line
