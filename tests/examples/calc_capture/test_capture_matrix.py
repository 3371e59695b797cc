"""The framework capture matrix: the calculator agent of examples/calc_agent, written with each framework, gives
the training data GRPO needs, through client-side capture and through the LLM proxy.

Each rollout runs through `LitAgentRunner`'s queue path (claim, resources, trace context, result, attempt status)
against the scripted model (`harness.py`), which makes the agent do what a trained model does on the example's task:
call the task's tool, then answer with its result. A tool-calling rollout (`harness.plan`: one tool call, so two LLM
calls with the tool's result between them) must give:

- spans stored under the rollout's id and attempt, with prompt and response token ids on every LLM span;
- the tool calls in the LLM spans' completions and, where the framework makes them, its own spans of the tool runs
  (client-side: LangGraph, the Agents SDK, AutoGen and Pydantic AI; through the proxy only AutoGen, which traces
  itself; the plain OpenAI SDK agent runs its tools as plain functions);
- a triplet per call with the reward on the last;
- one multi-turn sequence (`stitch_calls`, as GRPO joins them): each call's prompt extends the previous prompt and
  response exactly (drift 0), and the loss mask covers exactly the tokens the model generated.
"""

from __future__ import annotations

import pytest

from agentlightning.adapter.trajectory import call_ids, stitch_calls
from agentlightning.types import Span

from .harness import (
    CAPTURES,
    FRAMEWORKS,
    PACKAGES,
    Outcome,
    Rollouts,
    Scripts,
    agent_module,
    completion_text,
    completion_tool_calls,
    plan,
    script_for,
    tool_runs,
)

REPLAYS_AS_TEXT = {"smolagents", "dspy"}
"""Frameworks that re-render earlier steps as text instead of resending the model's messages: no call's prompt
extends the previous call's tokens, so each call is a sequence of its own."""
MAKES_TOOL_SPANS = {
    ("langgraph", "client"),
    ("agents-sdk", "client"),
    ("autogen", "client"),
    ("autogen", "proxy"),
    ("pydantic-ai", "client"),
}


@pytest.fixture(params=list(FRAMEWORKS))
def framework(request: pytest.FixtureRequest) -> str:
    pytest.importorskip(PACKAGES[request.param], reason=f"the {request.param} framework is not installed")
    return request.param


@pytest.fixture(params=CAPTURES)
def capture(request: pytest.FixtureRequest) -> str:
    return request.param


_SOLVED: dict[tuple[str, str], Outcome] = {}


async def _solved_rollout(framework: str, capture: str, rollouts: Rollouts, scripts: Scripts) -> Outcome:
    """One rollout per framework and capture, shared by the tests below (each checks one property of it)."""
    if (framework, capture) not in _SOLVED:
        outcome = await rollouts.run(
            agent_module(framework).calc_agent, scripts.new_task(script_for(framework)), capture
        )
        assert outcome.rollout.status == "succeeded", outcome.error
        _SOLVED[framework, capture] = outcome
    return _SOLVED[framework, capture]


async def test_a_tool_calling_rollout_is_captured_whole(
    framework: str, capture: str, rollouts: Rollouts, scripts: Scripts
) -> None:
    outcome = await _solved_rollout(framework, capture, rollouts, scripts)
    assert outcome.reward == 1.0
    assert all(span.rollout_id == outcome.rollout.rollout_id for span in outcome.spans)
    assert all(span.attempt_id == outcome.attempt_id for span in outcome.spans)

    tools = plan(outcome.task)
    calls = outcome.llm_spans
    expected = expected_tool_calls(framework, tools)
    assert len(calls) == len(expected), [span.name for span in outcome.spans]
    for span in calls:
        assert span.attributes.get("prompt_token_ids") and span.attributes.get("response_token_ids"), span.name
    assert [completion_tool_calls(span) for span in calls] == expected
    if framework == "dspy":  # ReAct names each step's tool in a text field
        texts = [completion_text(span) for span in calls]
        steps = [*tools, "finish"]
        named = [f"[[ ## next_tool_name ## ]]\n{tool}\n" in text for tool, text in zip(steps, texts[:-1], strict=True)]
        assert named == [True] * len(steps)
    if (framework, capture) in MAKES_TOOL_SPANS:
        assert tool_runs(outcome.spans) == tools


async def test_the_calls_become_triplets_with_the_reward_on_the_last(
    framework: str, capture: str, rollouts: Rollouts, scripts: Scripts
) -> None:
    outcome = await _solved_rollout(framework, capture, rollouts, scripts)
    triplets = outcome.triplets()
    assert [t.reward for t in triplets] == [None] * (len(outcome.llm_spans) - 1) + [1.0]
    assert [t.prompt["token_ids"] for t in triplets] == [_ids(s, "prompt_token_ids") for s in outcome.llm_spans]
    assert [t.response["token_ids"] for t in triplets] == [_ids(s, "response_token_ids") for s in outcome.llm_spans]


async def test_the_calls_stitch_into_one_sequence_without_drift(
    framework: str, capture: str, rollouts: Rollouts, scripts: Scripts
) -> None:
    if framework in REPLAYS_AS_TEXT:
        pytest.skip(
            f"{framework} re-renders its history (test_a_call_whose_prompt_was_re_rendered_is_its_own_sequence)"
        )
    outcome = await _solved_rollout(framework, capture, rollouts, scripts)
    triplets = outcome.triplets()
    report = stitch_calls([call_ids(t) for t in triplets])
    assert (len(report.sequences), report.continuations, report.drifted) == (1, len(plan(outcome.task)), 0)
    [sequence] = report.sequences
    assert sequence.prompt_ids == triplets[0].prompt["token_ids"]
    generated = [token for token, mask in zip(sequence.response_ids, sequence.loss_mask, strict=True) if mask]
    assert generated == [token for t in triplets for token in t.response["token_ids"]]
    environment = [token for token, mask in zip(sequence.response_ids, sequence.loss_mask, strict=True) if not mask]
    assert environment, "the tool results between the calls are in the sequence, masked"


async def test_a_call_whose_prompt_was_re_rendered_is_its_own_sequence(
    framework: str, capture: str, rollouts: Rollouts, scripts: Scripts
) -> None:
    if framework not in REPLAYS_AS_TEXT:
        pytest.skip(f"{framework} resends the model's messages (test_the_calls_stitch_into_one_sequence_without_drift)")
    outcome = await _solved_rollout(framework, capture, rollouts, scripts)
    triplets = outcome.triplets()
    report = stitch_calls([call_ids(t) for t in triplets])
    assert [sequence.calls for sequence in report.sequences] == [[index] for index in range(len(triplets))]
    for sequence, triplet in zip(report.sequences, triplets, strict=True):
        assert sequence.prompt_ids == triplet.prompt["token_ids"]
        assert sequence.response_ids == triplet.response["token_ids"]
        assert all(sequence.loss_mask)


def expected_tool_calls(framework: str, tools: list[str]) -> list[list[str]]:
    """The tools each LLM call's completion calls, for a rollout that calls `tools` in order: then the answer
    (smolagents answers through its final_answer tool; DSPy's ReAct writes its steps as text fields, calls its
    finish tool and then asks for the answer in one more call)."""
    if framework == "dspy":
        return [[] for _ in tools] + [[], []]
    answer = ["final_answer"] if framework == "smolagents" else []
    return [[tool] for tool in tools] + [answer]


def _ids(span: Span, key: str) -> list[int]:
    value = span.attributes[key]
    return [int(v) for v in value]  # type: ignore[union-attr]
