"""LiteLLM-based clients that do not call through the OpenAI SDK (LiteLLM's `hosted_vllm/` provider, DSPy's default
engine): zero-code capture cannot see their calls, the run's diagnosis says so and names the fix, and the LLM proxy
records them with token ids. (LiteLLM's `openai/` provider, which calls through the SDK, is in the capture matrix:
the `litellm`, `llamaindex` and `dspy` agents.)"""

from __future__ import annotations

from typing import Any

import pytest

import agentlightning as agl
from agentlightning.adapter import TracerTraceToTriplet

from .harness import Outcome, Rollouts, Scripts, calc, dspy_fields, max_tokens_of

pytest.importorskip("litellm", reason="LiteLLM (the dspy or llamaindex extra) is not installed")


@agl.rollout
async def hosted_vllm_agent(task: dict[str, Any], llm: agl.LLM) -> float:
    import litellm

    response = await litellm.acompletion(
        model=f"hosted_vllm/{llm.model}",
        api_base=llm.endpoint,
        api_key=llm.api_key or "unused",
        messages=[{"role": "user", "content": calc().question(task)}],
        max_tokens=max_tokens_of(llm),
    )
    return 1.0 if response.choices[0].message.content else 0.0  # type: ignore[union-attr]


@agl.rollout
async def dspy_default_engine_agent(task: dict[str, Any], llm: agl.LLM) -> float:
    import dspy

    lm = dspy.LM(
        f"openai/{llm.model}",
        api_base=llm.endpoint,
        api_key=llm.api_key or "unused",
        max_tokens=max_tokens_of(llm),
        cache=False,  # DSPy caches answers on disk (across runs): every rollout must ask the model
    )
    with dspy.context(lm=lm):
        prediction = await dspy.Predict("question -> answer").acall(question=calc().question(task))
    return 1.0 if str(prediction.answer) == str(calc().answer_of(task)) else 0.0


AGENTS = {"hosted_vllm": hosted_vllm_agent, "dspy-auto": dspy_default_engine_agent}
FIXES = {"hosted_vllm": "hosted_vllm/", "dspy-auto": "engine='litellm'"}


@pytest.fixture(params=list(AGENTS))
def client(request: pytest.FixtureRequest) -> str:
    if request.param.startswith("dspy"):
        pytest.importorskip("dspy", reason="the dspy extra is not installed")
    return request.param


async def _run(client: str, capture: str, rollouts: Rollouts, scripts: Scripts) -> Outcome:
    task = scripts.new_task(lambda task: lambda results: dspy_fields(answer=str(calc().answer_of(task))))
    outcome = await rollouts.run(AGENTS[client], task, capture)
    assert outcome.rollout.status == "succeeded", outcome.error
    return outcome


def calc_answer(task: dict[str, Any]) -> int:
    return int(calc().answer_of(task))


async def test_a_client_that_bypasses_the_openai_sdk_is_diagnosed_with_its_fix(
    client: str, rollouts: Rollouts, scripts: Scripts
) -> None:
    outcome = await _run(client, "client", rollouts, scripts)
    assert outcome.reward == 1.0 and outcome.llm_spans == []
    adapter = TracerTraceToTriplet()
    assert adapter.adapt(outcome.spans) == []
    reason = str(adapter.last_diagnosis.reason if adapter.last_diagnosis else "")
    assert reason.startswith("no LLM call captured") and FIXES[client] in reason and "LLMProxy" in reason


async def test_a_client_that_bypasses_the_openai_sdk_is_recorded_by_the_proxy(
    client: str, rollouts: Rollouts, scripts: Scripts
) -> None:
    outcome = await _run(client, "proxy", rollouts, scripts)
    assert outcome.reward == 1.0
    [call] = outcome.llm_spans
    assert call.attributes.get("prompt_token_ids") and call.attributes.get("response_token_ids")
    [triplet] = outcome.triplets()
    assert triplet.reward == 1.0 and triplet.response["token_ids"]
