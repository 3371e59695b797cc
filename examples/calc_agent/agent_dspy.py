"""The calculator agent written with DSPy (`dspy.ReAct` with two tools), its model a `dspy.LM` on DSPy's LiteLLM
engine. The reward line is its only training-specific line.

`engine="litellm"` is what makes zero-code capture see the calls: LiteLLM's `openai/` provider calls through the
OpenAI SDK, which the tracer instruments. DSPy's default engine (`"auto"`, its own HTTP client since 3.4) reaches
the server without the SDK, so only an LLMProxy records its calls (docs/capture.md).

ReAct writes each step as DSPy's text fields (`next_thought`, `next_tool_name`, `next_tool_args`) rather than as
the API's tool calls, ends the loop with its `finish` tool, and asks for the answer in a last call (its `extract`
step): a rollout that goes right is three LLM calls. Each call's prompt re-renders the trajectory so far as fields,
so the calls are trained as separate triplets (see docs/capture.md). It has no worked examples (DSPy's few-shot
demos are what its optimizers add).
"""

from __future__ import annotations

from typing import Any

from task import MAX_TURNS, SYSTEM_PROMPT, max_tokens, question, reward
from task import add as add_numbers
from task import multiply as multiply_numbers

import agentlightning as agl


def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return multiply_numbers(a, b)


def add(a: int, b: int) -> int:
    """Add two integers."""
    return add_numbers(a, b)


@agl.rollout
async def calc_agent(task: dict[str, Any], llm: agl.LLM) -> float:
    import dspy

    lm = dspy.LM(
        f"openai/{llm.model}",  # LiteLLM's OpenAI provider: any OpenAI-compatible endpoint
        api_base=llm.endpoint,
        api_key=llm.api_key or "unused",
        temperature=llm.sampling_parameters.get("temperature", 0.0),
        max_tokens=max_tokens(llm.sampling_parameters),
        cache=False,  # every rollout asks the model (DSPy caches answers on disk by default)
        engine="litellm",  # through the OpenAI SDK, so the tracer records the calls (see above)
    )
    signature = dspy.Signature("question -> answer", SYSTEM_PROMPT)
    react = dspy.ReAct(signature, tools=[multiply, add], max_iters=MAX_TURNS - 1)
    with dspy.context(lm=lm):
        prediction = await react.acall(question=question(task))
    return reward(str(prediction.answer), task)  # the reward: the only training-specific line
