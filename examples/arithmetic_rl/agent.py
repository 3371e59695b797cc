"""An arithmetic agent written with the plain OpenAI SDK. Its only training-specific line is the reward it returns.

The task: `{"a": 3, "b": 4}`; the agent asks the model "What is 3 + 4?" and must answer with just the number.
"""

from __future__ import annotations

import re
from typing import Any

import agentlightning as agl

# Two worked examples show the answer format; the model still often answers with a sentence ("3 + 4 = 7").
EXAMPLES = [("2", "3", "5"), ("4", "4", "8")]
QUESTION = "What is {a} + {b}? Answer with just the number."


def messages_for(task: dict[str, Any]) -> list[dict[str, str]]:
    """The chat the agent sends: the worked examples, then the task's question."""
    messages: list[dict[str, str]] = []
    for a, b, answer in EXAMPLES:
        messages.append({"role": "user", "content": QUESTION.format(a=a, b=b)})
        messages.append({"role": "assistant", "content": answer})
    messages.append({"role": "user", "content": QUESTION.format(a=int(task["a"]), b=int(task["b"]))})
    return messages


def strict_correct(answer: str, task: dict[str, Any]) -> bool:
    """The answer is exactly the number (surrounding spaces and a final period allowed): "7", not "3 + 4 = 7"."""
    return answer.strip().rstrip(".").strip() == str(int(task["a"]) + int(task["b"]))


def lenient_correct(answer: str, task: dict[str, Any]) -> bool:
    """The first integer in the answer is the sum (the check a reward can be gamed on: "Five + two = 7")."""
    match = re.search(r"-?\d+", answer)
    return match is not None and int(match.group()) == int(task["a"]) + int(task["b"])


@agl.rollout
def arithmetic_agent(task: dict[str, Any], llm: agl.LLM) -> float:
    from openai import OpenAI

    client = OpenAI(base_url=llm.endpoint, api_key=llm.api_key or "unused", max_retries=2)
    reply = client.chat.completions.create(
        model=llm.model,
        messages=messages_for(task),  # type: ignore[arg-type]
        max_tokens=12,
        temperature=llm.sampling_parameters.get("temperature", 0.0),
    )
    answer = reply.choices[0].message.content or ""
    return 1.0 if strict_correct(answer, task) else 0.0  # the reward: the only training-specific line
