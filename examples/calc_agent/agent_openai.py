"""The calculator agent written with the plain OpenAI SDK: its own tool loop. The reward line is its only
training-specific line."""

from __future__ import annotations

from typing import Any, Optional

from task import MAX_TURNS, SYSTEM_PROMPT, examples_for, max_tokens, openai_tool_schemas, question, reward, run_tool

import agentlightning as agl


def worked_examples(task: Optional[dict[str, Any]] = None) -> list[dict[str, Any]]:
    """The worked examples as chat turns: question, tool call, tool result, answer."""
    messages: list[dict[str, Any]] = []
    for index, example in enumerate(examples_for(task)):
        call_id = f"example_{index}"
        call = {"id": call_id, "type": "function", "function": {"name": example.tool, "arguments": example.arguments}}
        messages += [
            {"role": "user", "content": example.question},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call_id, "content": example.result},
            {"role": "assistant", "content": example.result},
        ]
    return messages


@agl.rollout
async def calc_agent(task: dict[str, Any], llm: agl.LLM) -> float:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key or "unused", max_retries=2)
    messages: list[Any] = [{"role": "system", "content": SYSTEM_PROMPT}, *worked_examples(task)]
    messages.append({"role": "user", "content": question(task)})
    reply = ""
    for _ in range(MAX_TURNS):
        completion = await client.chat.completions.create(
            model=llm.model,
            messages=messages,
            tools=openai_tool_schemas(),  # type: ignore[arg-type]
            max_tokens=max_tokens(llm.sampling_parameters),
            temperature=llm.sampling_parameters.get("temperature", 0.0),
        )
        message = completion.choices[0].message
        if not message.tool_calls:
            reply = message.content or ""
            break
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "content": run_tool(call.function.name, call.function.arguments),  # type: ignore[union-attr]
                }
            )
    return reward(reply, task)  # the reward: the only training-specific line
