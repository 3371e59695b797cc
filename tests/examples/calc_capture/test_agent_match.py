"""`agent_match` in a two-agent rollout: the example's calculator agent, then a second agent of the same framework
(a "checker" that reads the answer, one LLM call) in the same rollout, captured client-side. Selecting
`^calculator$` keeps exactly the calculator's calls, `^checker$` the checker's one, as GRPO's `select_calls`
does for `GRPO(agent_match=...)`.

How each framework names an agent: LangGraph, the graph's name (`create_react_agent(..., name="calculator")`); the
OpenAI Agents SDK, `Agent(name=...)`; AutoGen, the `AssistantAgent`'s name; Pydantic AI, `Agent(model,
name="calculator")`, through its own OpenTelemetry GenAI spans (`invoke_agent calculator`, `gen_ai.agent.name`), which
the tracer's instrumentation switches on: no `agl.operation`. The plain OpenAI SDK has no agents: the user names one
by running its calls inside `agl.operation(..., **{"agent.name": "calculator"})`.

The LLM proxy's spans name no agent (it sees only HTTP requests), so `agent_match` needs client-side capture.
"""

from __future__ import annotations

from typing import Any

import pytest

import agentlightning as agl
from agentlightning.adapter import TracerTraceToTriplet
from agentlightning.algorithm.grpo.rollouts.reading import select_calls

from .harness import FIRST_FRAMEWORKS, PACKAGES, Rollouts, Scripts, agent_module, calc, plan, prompt_text

CHECK = "Is this the right answer? "


async def _check_openai(llm: agl.LLM, answer: str) -> None:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=llm.endpoint, api_key="unused")
    await client.chat.completions.create(
        model=llm.model, messages=[{"role": "user", "content": CHECK + answer}], max_tokens=8
    )


async def _check_langgraph(llm: agl.LLM, answer: str) -> None:
    from langchain_core.messages import HumanMessage
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    model = ChatOpenAI(model=llm.model, base_url=llm.endpoint, api_key="unused", max_completion_tokens=8)  # type: ignore[arg-type]
    await create_react_agent(model, [], name="checker").ainvoke({"messages": [HumanMessage(CHECK + answer)]})


async def _check_agents_sdk(llm: agl.LLM, answer: str) -> None:
    from agents import Agent, ModelSettings, OpenAIResponsesModel, Runner
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=llm.endpoint, api_key="unused")
    checker = Agent(
        name="checker",
        model=OpenAIResponsesModel(model=llm.model, openai_client=client),
        model_settings=ModelSettings(max_tokens=8),
    )
    await Runner.run(checker, CHECK + answer)  # captured: the instrumentation replaced the upload to OpenAI


async def _check_autogen(llm: agl.LLM, answer: str) -> None:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_core.models import ModelFamily
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    info: Any = {"vision": False, "function_calling": True, "json_output": False, "family": ModelFamily.UNKNOWN}
    client = OpenAIChatCompletionClient(
        model=llm.model,
        base_url=llm.endpoint,
        api_key="unused",
        max_tokens=8,
        model_info={**info, "structured_output": False},
    )
    try:
        await AssistantAgent("checker", model_client=client).run(task=CHECK + answer)
    finally:
        await client.close()


async def _check_pydantic_ai(llm: agl.LLM, answer: str) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel(llm.model, provider=OpenAIProvider(base_url=llm.endpoint, api_key="unused"))
    await Agent(model, name="checker", model_settings={"max_tokens": 8}).run(CHECK + answer)


CHECKERS = {
    "openai": _check_openai,
    "langgraph": _check_langgraph,
    "agents-sdk": _check_agents_sdk,
    "autogen": _check_autogen,
    "pydantic-ai": _check_pydantic_ai,
}
NAMING_FRAMEWORKS = (*FIRST_FRAMEWORKS, "pydantic-ai")
"""The frameworks tested here: the first ones, and Pydantic AI (its agents named by the GenAI conventions)."""


def two_agents(framework: str) -> Any:
    """The example's calculator, then the framework's checker, in one rollout."""
    calculator = agent_module(framework).calc_agent
    check = CHECKERS[framework]

    @agl.rollout
    async def rollout(task: dict[str, Any], llm: agl.LLM) -> float:
        if framework == "openai":  # the plain SDK has no agents: name them with operations
            with agl.operation("calculate", **{"agent.name": "calculator"}):
                reward = await calculator(task, llm)
            with agl.operation("check", **{"agent.name": "checker"}):
                await check(llm, str(calc().answer_of(task)))
        else:
            reward = await calculator(task, llm)
            await check(llm, str(calc().answer_of(task)))
        return reward

    return rollout


@pytest.mark.parametrize("framework", NAMING_FRAMEWORKS)
async def test_agent_match_selects_only_the_named_agents_calls(
    framework: str, rollouts: Rollouts, scripts: Scripts
) -> None:
    pytest.importorskip(PACKAGES[framework])
    task = scripts.new_task()
    outcome = await rollouts.run(two_agents(framework), task, "client")
    assert outcome.rollout.status == "succeeded", outcome.error
    tools = plan(task)
    assert len(outcome.llm_spans) == len(tools) + 2  # the calculator's calls, then the checker's
    question = calc().question(task)

    calculator = outcome.triplets(agent_match="^calculator$")
    assert [t.reward for t in calculator] == [None] * len(tools) + [1.0]
    checker = outcome.triplets(agent_match="^checker$")
    assert len(checker) == 1
    calculator_ids = {t.metadata["response_id"] for t in calculator}
    assert checker[0].metadata["response_id"] not in calculator_ids
    checker_span = next(
        s for s in outcome.llm_spans if s.attributes.get("gen_ai.response.id") == checker[0].metadata["response_id"]
    )
    assert CHECK in prompt_text(checker_span) and question not in prompt_text(checker_span)

    selected, source = select_calls(
        outcome.spans, TracerTraceToTriplet(agent_match="^calculator$"), agent_match="^calculator$"
    )
    assert source == "adapter" and [t.metadata["response_id"] for t in selected] == [
        t.metadata["response_id"] for t in calculator
    ]


async def test_pydantic_ai_agents_are_named_by_their_own_genai_spans(rollouts: Rollouts, scripts: Scripts) -> None:
    """The names come from Pydantic AI's own `invoke_agent <name>` spans (no `agl.operation` in the rollout), its
    `chat` spans around the SDK's calls add no call, and a regex that names no agent selects nothing."""
    pytest.importorskip(PACKAGES["pydantic-ai"])
    outcome = await rollouts.run(two_agents("pydantic-ai"), scripts.new_task(), "client")
    assert outcome.rollout.status == "succeeded", outcome.error
    invoked = [s for s in outcome.spans if s.attributes.get("gen_ai.operation.name") == "invoke_agent"]
    assert sorted(s.name for s in invoked) == ["invoke_agent calculator", "invoke_agent checker"]
    assert sorted(str(s.attributes["gen_ai.agent.name"]) for s in invoked) == ["calculator", "checker"]
    assert not any(s.name == "agentlightning.operation" for s in outcome.spans)

    triplets = outcome.triplets()
    assert len(triplets) == len(outcome.llm_spans) == len(plan(outcome.task)) + 2
    assert all(t.prompt["token_ids"] and t.response["token_ids"] for t in triplets)
    assert outcome.triplets(agent_match="^solver$") == []
