"""The calculator agent written with plain LiteLLM (`litellm.acompletion` in its own tool loop), through LiteLLM's
OpenAI provider (`openai/<model>`): that provider calls through the OpenAI SDK, which the tracer records. The
reward line is its only training-specific line."""

from __future__ import annotations

from typing import Any

from agent_openai import worked_examples
from task import MAX_TURNS, SYSTEM_PROMPT, max_tokens, openai_tool_schemas, question, reward, run_tool

import agentlightning as agl


@agl.rollout
async def calc_agent(task: dict[str, Any], llm: agl.LLM) -> float:
    import litellm

    messages: list[Any] = [{"role": "system", "content": SYSTEM_PROMPT}, *worked_examples(task)]
    messages.append({"role": "user", "content": question(task)})
    reply = ""
    for _ in range(MAX_TURNS):
        response = await litellm.acompletion(
            model=f"openai/{llm.model}",  # LiteLLM's OpenAI provider: any OpenAI-compatible endpoint
            api_base=llm.endpoint,
            api_key=llm.api_key or "unused",
            messages=messages,
            tools=openai_tool_schemas(),
            max_tokens=max_tokens(llm.sampling_parameters),
            temperature=llm.sampling_parameters.get("temperature", 0.0),
        )
        message = response.choices[0].message  # type: ignore[union-attr]
        if not message.tool_calls:
            reply = message.content or ""
            break
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "content": run_tool(call.function.name, call.function.arguments),
                }
            )
    return reward(reply, task)  # the reward: the only training-specific line
