"""Agents of the GRPO loop tests (module level, so runner processes can import them)."""

from __future__ import annotations

import math
import random
from typing import Any, Optional

import agentlightning as agl
from agentlightning.types import AttemptedRollout, NamedResources, ProxyLLM, Rollout


def _ask(llm: agl.LLM, prompt: str, max_tokens: int = 6, headers: Optional[dict[str, str]] = None) -> str:
    from openai import OpenAI

    client = OpenAI(base_url=llm.endpoint, api_key=llm.api_key or "unused", max_retries=0)
    answer = client.chat.completions.create(
        model=llm.model,
        messages=[{"role": "user", "content": prompt}],
        max_tokens=max_tokens,
        temperature=llm.sampling_parameters.get("temperature", 1.0),
        extra_headers=headers,
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


def _bound(resources: NamedResources, name: str, rollout: Rollout) -> agl.LLM:
    llm = resources[name]
    assert isinstance(llm, agl.LLM), f"resource {name!r} is not an LLM: {llm!r}"
    if isinstance(llm, ProxyLLM):
        assert isinstance(rollout, AttemptedRollout)
        return llm.with_attempted_rollout(rollout)
    return llm


class DigitTeam(agl.LitAgent[dict[str, Any]]):
    """Three agents in one rollout, each in its own `agent.name` span: "solver" calls the model of its own resource
    `solver_llm`; "reviewer" the shared `main_llm` with the header `x-agl-agent: reviewer` (the two ways an agent
    reaches its own adapter); "greeter" the shared `main_llm` without a header (an agent not trained: the base model).
    The solver and the reviewer are each rewarded with the digit share of their own answer, inside their span."""

    def rollout(self, task: dict[str, Any], resources: NamedResources, rollout: Rollout) -> float:
        with agl.operation("solve", **{"agent.name": "solver"}):
            solved = digit_share(_ask(_bound(resources, "solver_llm", rollout), f"Number {task['id']}:"))
            agl.emit_reward(solved)
        with agl.operation("review", **{"agent.name": "reviewer"}):
            shared = _bound(resources, "main_llm", rollout)
            reviewed = digit_share(_ask(shared, f"Digits of {task['id']}?", headers={"x-agl-agent": "reviewer"}))
            agl.emit_reward(reviewed)
        with agl.operation("greet", **{"agent.name": "greeter"}):
            _ask(_bound(resources, "main_llm", rollout), "Hello", max_tokens=2)
        return solved


digit_team = DigitTeam()


ADD_TOOL = {
    "name": "add",
    "description": "Add two integers",
    "input_schema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
}


def add_question(task: dict[str, Any]) -> str:
    return f"What is {task['a']} plus {task['b']}?"


@agl.rollout
async def anthropic_tool_agent(task: dict[str, Any], llm: agl.LLM) -> float:
    """An agent written with the Anthropic SDK: asks with the `add` tool, runs the tool calls it gets back, sends
    their results (a follow-up question if none came) and reads the final answer from a streamed Message. Its
    reward is drawn at random, so a group's rewards differ whatever the model answers."""
    import anthropic

    # The SDK appends /v1/messages to its base URL: the rollout's URL without its /v1.
    client = anthropic.AsyncAnthropic(
        base_url=llm.endpoint.removesuffix("/v1"), api_key=llm.api_key or "unused", max_retries=0
    )
    settings: dict[str, Any] = {
        "model": llm.model,
        "max_tokens": 80,
        "tools": [ADD_TOOL],
        # GRPO's temperature; the Anthropic SDK 2.x has no `temperature` argument, the request body still does
        "extra_body": {"temperature": llm.sampling_parameters.get("temperature", 1.0)},
    }
    messages: list[Any] = [{"role": "user", "content": add_question(task)}]
    first = await client.messages.create(messages=messages, **settings)
    messages.append({"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]})
    results = [
        {"type": "tool_result", "tool_use_id": block.id, "content": str(int(block.input["a"]) + int(block.input["b"]))}
        for block in first.content
        if block.type == "tool_use"
    ]
    messages.append({"role": "user", "content": results or "Use the add tool."})
    async with client.messages.stream(messages=messages, **settings) as stream:
        await stream.get_final_message()
    return random.random()
