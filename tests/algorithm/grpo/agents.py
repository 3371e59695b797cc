"""Agents of the GRPO loop tests (module level, so runner processes can import them)."""

from __future__ import annotations

import math
import random
from typing import Any, Optional

import agentlightning as agl


def _ask(llm: agl.LLM, prompt: str, max_tokens: int = 6) -> str:
    from openai import OpenAI

    client = OpenAI(base_url=llm.endpoint, api_key=llm.api_key or "unused", max_retries=0)
    answer = client.chat.completions.create(
        model=llm.model,
        messages=[{"role": "user", "content": prompt}],
        max_tokens=max_tokens,
        temperature=llm.sampling_parameters.get("temperature", 1.0),
    )
    return answer.choices[0].message.content or ""


def digit_share(text: str) -> float:
    """The reward the tiny model learns: the share of digits among the answer's characters."""
    return sum(c.isdigit() for c in text) / max(len(text), 1)


@agl.rollout
def digit_agent(task: dict[str, Any], llm: agl.LLM) -> float:
    return digit_share(_ask(llm, f"Number {task['id']}:"))


@agl.rollout
def quirky_agent(task: dict[str, Any], llm: agl.LLM) -> Optional[float]:
    """Bad input on purpose, by task kind: unparsable items, no reward, NaN, constant reward, no LLM call; "random"
    rewards vary within every group (tests of the sampling for informative groups)."""
    kind = task["kind"]
    if kind == "unparsable":
        return float(task["value"])  # ValueError: the agent cannot parse this item; the rollout fails
    if kind == "no_call":
        return 0.5 if task["id"] % 2 else 0.0  # a reward, but no LLM call, so no token ids
    text = _ask(llm, f"Item {task['id']}")
    if kind == "silent":
        return None  # never emits a reward
    if kind == "nan":
        return math.nan
    if kind == "constant":
        return 1.0
    if kind == "random":
        return random.random()  # varies within every group, whatever the model answers
    return digit_share(text)


@agl.rollout
def cool_prompted_agent(task: dict[str, Any], llm: agl.LLM, prompt_template: agl.PromptTemplate) -> float:
    """Reads a prompt template next to the trained model (the rollout fails when GRPO dropped it) and samples at
    0.5 whatever temperature GRPO publishes."""
    from openai import OpenAI

    client = OpenAI(base_url=llm.endpoint, api_key=llm.api_key or "unused", max_retries=0)
    answer = client.chat.completions.create(
        model=llm.model,
        messages=[{"role": "user", "content": prompt_template.format(id=task["id"])}],
        max_tokens=4,
        temperature=0.5,
    )
    return digit_share(answer.choices[0].message.content or "")


@agl.rollout
def modelless_agent(task: dict[str, Any], llm: agl.LLM) -> float:
    """Answers without ever calling the model it is given."""
    return 1.0 if task["id"] % 2 else 0.0


@agl.rollout
def two_turn_digit_agent(task: dict[str, Any], llm: agl.LLM) -> float:
    """Asks, then continues the same conversation once (the second call's prompt extends the first call's
    conversation): the reward is the digit share of the second answer."""
    from openai import OpenAI

    client = OpenAI(base_url=llm.endpoint, api_key=llm.api_key or "unused", max_retries=0)
    temperature = llm.sampling_parameters.get("temperature", 1.0)
    messages: list[Any] = [{"role": "user", "content": f"Number {task['id']}:"}]
    first = client.chat.completions.create(model=llm.model, messages=messages, max_tokens=6, temperature=temperature)
    messages += [{"role": "assistant", "content": first.choices[0].message.content or ""}]
    messages += [{"role": "user", "content": "And the next one?"}]
    second = client.chat.completions.create(model=llm.model, messages=messages, max_tokens=6, temperature=temperature)
    return digit_share(second.choices[0].message.content or "")
