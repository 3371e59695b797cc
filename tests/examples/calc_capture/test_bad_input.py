"""Bad input from the model, for each framework's calculator agent: every case ends the rollout with a score (the
model misbehaved: reward 0, which training learns from) and the reason where the model and the trace can read it,
never a crash of the runner or a failed rollout that training would skip.

- a call to a tool that does not exist: the model is told which tools exist;
- a `<tool_call>` whose JSON does not parse: the server keeps the text as the answer (as vLLM does), so the rollout
  ends after that call with the raw text in the span;
- arguments the tool rejects or that make it raise (`"twelve"`; `1e999`, which overflows `int()`): the model reads
  that its call of the tool failed (the Agents SDK keeps the validation details out of its messages by default);
- a model that never stops calling tools: cut after the example's `MAX_TURNS` calls;
- an answer cut at `max_tokens` (the Responses API calls it incomplete, which the Agents SDK raises as the model's
  misbehaviour): scored like any wrong answer;
- a call the server fails: retried by the client (client-side capture: one span) or by the proxy (one span, its
  `agentlightning.llm.attempts` counting the tries), never recorded twice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentlightning.adapter.trajectory import stitch_calls
from agentlightning.algorithm.grpo.learning.samples import call_ids
from agentlightning.inference.server import InferenceServer

from .harness import (
    CAPTURES,
    FIRST_FRAMEWORKS,
    PACKAGES,
    SAMPLING,
    Rollouts,
    Script,
    Scripts,
    agent_module,
    calc,
    completion_text,
    plan,
    solving,
    tool_call,
)

GIVE_UP = "I cannot tell."


@pytest.fixture(params=FIRST_FRAMEWORKS)
def framework(request: pytest.FixtureRequest) -> str:
    pytest.importorskip(PACKAGES[request.param], reason=f"the {request.param} framework is not installed")
    return request.param


def calling(first: Callable[[dict[str, Any]], str]) -> Callable[[dict[str, Any]], Script]:
    """A model that answers `first(task)`, then gives up once it was shown a tool result."""

    def make(task: dict[str, Any]) -> Script:
        return lambda results: GIVE_UP if results else first(task)

    return make


async def test_an_unknown_tool_is_reported_to_the_model(framework: str, rollouts: Rollouts, scripts: Scripts) -> None:
    task = scripts.new_task(calling(lambda task: tool_call("divide", a=task["a"], b=task["b"])))
    outcome = await rollouts.run(agent_module(framework).calc_agent, task, "client")
    assert (outcome.rollout.status, outcome.reward) == ("succeeded", 0.0), outcome.error
    [[], [reason]] = scripts.shown(task)
    assert "divide" in reason, reason
    assert len(outcome.triplets()) == 2


async def test_a_tool_call_that_is_not_json_ends_the_rollout_as_its_answer(
    framework: str, rollouts: Rollouts, scripts: Scripts
) -> None:
    broken = '<tool_call>{"name": "multiply", "arguments": {"a": %d, "b": }}</tool_call>'
    task = scripts.new_task(calling(lambda task: broken % task["a"]))
    outcome = await rollouts.run(agent_module(framework).calc_agent, task, "client")
    assert (outcome.rollout.status, outcome.reward) == ("succeeded", 0.0), outcome.error
    [span] = outcome.llm_spans
    assert completion_text(span) == broken % task["a"]
    [triplet] = outcome.triplets()
    assert triplet.reward == 0.0 and triplet.response["token_ids"]


@pytest.mark.parametrize(
    "arguments", ['{"a": "twelve", "b": %d}', '{"a": 1e999, "b": %d}'], ids=["not-a-number", "overflows-int"]
)
async def test_arguments_the_tool_rejects_are_reported_to_the_model(
    framework: str, arguments: str, rollouts: Rollouts, scripts: Scripts
) -> None:
    call = '<tool_call>{"name": "multiply", "arguments": ' + arguments + "}</tool_call>"
    task = scripts.new_task(calling(lambda task: call % task["b"]))
    outcome = await rollouts.run(agent_module(framework).calc_agent, task, "client")
    assert (outcome.rollout.status, outcome.reward) == ("succeeded", 0.0), outcome.error
    [[], [reason]] = scripts.shown(task)
    assert "error" in reason.lower() and "multiply" in reason, reason


async def test_a_model_that_never_stops_calling_tools_is_cut_after_max_turns(
    framework: str, rollouts: Rollouts, scripts: Scripts
) -> None:
    task = scripts.new_task(lambda task: lambda results: tool_call("multiply", a=task["a"], b=task["b"]))
    outcome = await rollouts.run(agent_module(framework).calc_agent, task, "client")
    assert (outcome.rollout.status, outcome.reward) == ("succeeded", 0.0), outcome.error
    turns = calc().MAX_TURNS
    assert len(outcome.llm_spans) == turns
    report = stitch_calls([call_ids(t) for t in outcome.triplets()])
    assert (report.calls, report.drifted) == (turns, 0)


async def test_an_answer_cut_at_max_tokens_scores_zero(framework: str, rollouts: Rollouts, scripts: Scripts) -> None:
    limit = int(SAMPLING["max_tokens"])
    task = scripts.new_task(lambda task: lambda results: "9" * (limit + 50))  # one token per character
    outcome = await rollouts.run(agent_module(framework).calc_agent, task, "client")
    assert (outcome.rollout.status, outcome.reward) == ("succeeded", 0.0), outcome.error
    [triplet] = outcome.triplets()
    assert len(triplet.response["token_ids"]) == limit


def failing_once(task: dict[str, Any]) -> Script:
    """Solves the task, but the server fails the call after the first tool result the first time it is asked."""
    solve = solving(task)
    failed: list[bool] = []

    def script(results: list[str]) -> str:
        if len(results) == 1 and not failed:
            failed.append(True)
            raise RuntimeError("the model server failed this request")
        return solve(results)

    return script


@pytest.mark.parametrize("capture", CAPTURES)
async def test_a_call_the_server_fails_is_retried_and_recorded_once(
    framework: str, capture: str, rollouts: Rollouts, scripts: Scripts, model_server: InferenceServer
) -> None:
    task = scripts.new_task(failing_once)
    # The failure must reach the client: with a prompt prefix kept from earlier tests, the engine would take the
    # model's error for one of its prefix cache and prefill the prompt again without it, asking the script twice.
    prefixes = model_server.engine._scheduler.prefixes  # pyright: ignore[reportPrivateUsage]
    enabled, prefixes.enabled = prefixes.enabled, False
    try:
        outcome = await rollouts.run(agent_module(framework).calc_agent, task, capture)
    finally:
        prefixes.enabled = enabled
    assert (outcome.rollout.status, outcome.reward) == ("succeeded", 1.0), outcome.error
    calls = len(plan(task)) + 1
    assert len(scripts.shown(task)) == calls + 1  # the model was asked once more: the second call twice
    spans = outcome.llm_spans
    assert len(spans) == calls and all(span.status.status_code != "ERROR" for span in spans)
    if capture == "proxy":
        attempts = [span.attributes["agentlightning.llm.attempts"] for span in spans]
        assert attempts == [2 if index == 1 else 1 for index in range(calls)]
    report = stitch_calls([call_ids(t) for t in outcome.triplets()])
    assert (len(report.sequences), report.calls, report.drifted) == (1, calls, 0)
