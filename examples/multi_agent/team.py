"""Two agents in one rollout: a solver (trained) and a reviewer (left untouched), both plain OpenAI SDK code.

Each agent's work runs inside an `agl.operation` span carrying `agent.name`; the OpenAI SDK calls are captured
client-side with their token ids (`OtelTracer(instrument=["openai"])`), so `GRPO(agent_match="solver")` trains on
the solver's calls only. The reviewer calls the same served model here (it could call any other model); its calls
never enter a training batch and its view of the answer does not change the reward.
"""

from __future__ import annotations

import re
from typing import Any

import agentlightning as agl

QUESTION = "What is {a} + {b}? Answer with just the number."
REVIEW = "Review: is {answer!r} the right answer to {a} + {b}? Reply yes or no."


def _chat(llm: agl.LLM, content: str, max_tokens: int) -> str:
    from openai import OpenAI

    client = OpenAI(base_url=llm.endpoint, api_key=llm.api_key or "unused", max_retries=2)
    reply = client.chat.completions.create(
        model=llm.model,
        messages=[{"role": "user", "content": content}],
        max_tokens=max_tokens,
        temperature=llm.sampling_parameters.get("temperature", 0.0),
    )
    return reply.choices[0].message.content or ""


@agl.rollout
def solver_and_reviewer(task: dict[str, Any], llm: agl.LLM) -> float:
    with agl.operation("solve", **{"agent.name": "solver"}):
        answer = _chat(llm, QUESTION.format(a=task["a"], b=task["b"]), max_tokens=8)
    with agl.operation("review", **{"agent.name": "reviewer"}):
        _chat(llm, REVIEW.format(answer=answer.strip(), a=task["a"], b=task["b"]), max_tokens=4)
    return closeness(answer, task["a"] + task["b"])


def closeness(answer: str, expected: int) -> float:
    """1 for exactly the number; else 0.5 / (1 + distance) for the first integer in the answer; 0 without one."""
    if answer.strip() == str(expected):
        return 1.0
    match = re.search(r"-?\d+", answer)
    return 0.5 / (1 + abs(int(match.group()) - expected)) if match else 0.0
