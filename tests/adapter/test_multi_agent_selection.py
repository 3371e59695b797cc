"""Selective optimization on a recorded multi-agent trace: a planner hands off to a coder that runs a tool (OpenAI
Agents SDK, captured with zero-code instrumentation; see tests/assets/record_multi_agent_trace.py). Selecting one
agent yields exactly that agent's LLM calls, with their token ids and the rewards the policy assigns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentlightning.adapter import RewardMatchPolicy, TracerTraceToTriplet, TraceTree
from agentlightning.types import Span

ASSET = Path(__file__).resolve().parents[1] / "assets" / "multi_agent_trace.json"


@pytest.fixture(scope="module")
def spans() -> list[Span]:
    return [Span.model_validate(item) for item in json.loads(ASSET.read_text())]


def calls_of(spans: list[Span], agent: str) -> list[Span]:
    """The recorded LLM calls made under the agent span named `agent` (found by walking parents)."""
    by_id = {span.span_id: span for span in spans}

    def owner(span: Span) -> str | None:
        current = span
        while current.parent_id in by_id:
            current = by_id[current.parent_id]  # type: ignore[index]
            if current.attributes.get("agent.name"):
                return str(current.attributes["agent.name"])
        return None

    return [span for span in spans if span.name == "openai.chat.completion" and owner(span) == agent]


def test_the_recorded_trace_has_both_agents_their_tool_calls_and_two_rewards(spans: list[Span]) -> None:
    tree = TraceTree.from_spans(spans)
    flat = str(tree.names_tuple())
    assert "planner [planner]" in flat and "coder [coder]" in flat
    assert "handoff to coder" in flat and "run_code" in flat
    assert len(calls_of(spans, "planner")) == 1 and len(calls_of(spans, "coder")) == 2
    assert sum(1 for span in spans if span.name == "agentlightning.reward") == 2


def test_selecting_the_coder_yields_exactly_its_calls_with_their_rewards(spans: list[Span]) -> None:
    triplets = TracerTraceToTriplet(agent_match="^coder$").adapt(spans)
    expected = calls_of(spans, "coder")
    assert [t.metadata["response_id"] for t in triplets] == [s.attributes["gen_ai.response.id"] for s in expected]
    assert [t.prompt["token_ids"] for t in triplets] == [s.attributes["prompt_token_ids"] for s in expected]
    assert [t.response["token_ids"] for t in triplets] == [s.attributes["response_token_ids"] for s in expected]
    assert {t.metadata["agent_name"] for t in triplets} == {"coder"}
    # 0.5 is emitted inside run_code, after the coder's first call; 1.0 after the run, after its second call.
    assert [t.reward for t in triplets] == [0.5, 1.0]


def test_selecting_the_planner_yields_only_its_call(spans: list[Span]) -> None:
    [triplet] = TracerTraceToTriplet(agent_match="^planner$").adapt(spans)
    [planner_call] = calls_of(spans, "planner")
    assert triplet.metadata == {"response_id": planner_call.attributes["gen_ai.response.id"], "agent_name": "planner"}
    assert triplet.prompt["token_ids"] == planner_call.attributes["prompt_token_ids"]
    # FIRST_OCCURRENCE: the first reward that follows the planner's (only) call is the 0.5 from the coder's tool.
    assert triplet.reward == 0.5


def test_without_a_filter_every_call_is_kept_in_order_and_each_reward_lands_once(spans: list[Span]) -> None:
    triplets = TracerTraceToTriplet().adapt(spans)
    assert [t.metadata["agent_name"] for t in triplets] == ["planner", "coder", "coder"]
    assert [t.reward for t in triplets] == [None, 0.5, 1.0]


def test_a_filter_matching_no_agent_gives_an_explained_empty_trajectory(
    spans: list[Span], caplog: pytest.LogCaptureFixture
) -> None:
    adapter = TracerTraceToTriplet(agent_match="reviewer")
    assert adapter.adapt(spans) == []
    assert adapter.last_diagnosis is not None
    assert "agent filter matched nothing" in str(adapter.last_diagnosis.reason)
    assert "coder" in adapter.last_diagnosis.agent_names and "planner" in adapter.last_diagnosis.agent_names
    assert "agent_match='reviewer'" in caplog.text


def test_first_sibling_only_rewards_calls_that_share_a_parent_with_the_reward(spans: list[Span]) -> None:
    # Both rewards sit away from the LLM calls (inside a tool span, and at the top), so no call gets one.
    triplets = TracerTraceToTriplet(reward_match=RewardMatchPolicy.FIRST_SIBLING).adapt(spans)
    assert [t.reward for t in triplets] == [None, None, None]
