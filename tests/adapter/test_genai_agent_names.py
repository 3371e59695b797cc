"""Agent names from the OpenTelemetry GenAI conventions: `invoke_agent` spans name the agent they invoke, so
`agent_match` selects the agents of any framework that follows the conventions (pydantic-ai, the Agents SDK's
OTel instrumentation, ...) without `agl.operation`."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from agentlightning.adapter import TracerTraceToTriplet, TraceTree
from agentlightning.adapter.attributes import invoked_agent_name
from agentlightning.types import Span

from .spans import llm, span


@pytest.mark.parametrize(
    "name, attributes, expected",
    [
        ("invoke_agent solver", {}, "solver"),
        ("invoke_agent solver", {"gen_ai.operation.name": "invoke_agent"}, "solver"),
        ("invoke_agent", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": "asst_1"}, "asst_1"),
        ("agent run", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": "asst_2"}, "asst_2"),
        ("invoke_agent", {"gen_ai.operation.name": "invoke_agent"}, None),
        ("chat gpt-4o", {"gen_ai.operation.name": "chat"}, None),
        ("invoke_agents_batch", {}, None),
    ],
)
def test_an_invoke_agent_span_names_its_agent(name: str, attributes: dict[str, Any], expected: Optional[str]) -> None:
    assert invoked_agent_name(name, attributes) == expected
    node = TraceTree("n", Span.from_attributes(attributes=dict(attributes), name=name))
    assert node.agent_name() == expected


def test_the_gen_ai_agent_name_attribute_wins_over_the_span_name() -> None:
    node = TraceTree("n", Span.from_attributes(attributes={"gen_ai.agent.name": "critic"}, name="invoke_agent solver"))
    assert node.agent_name() == "critic"


def test_agent_match_selects_the_calls_under_an_invoke_agent_span() -> None:
    spans = [
        span("run", "root", None, 0, 10),
        span("invoke_agent solver", "s", "root", 1, 4, gen_ai__operation__name="invoke_agent"),
        llm("c1", "s", 2, 3, response_id="r1"),
        span("invoke_agent reviewer", "v", "root", 5, 9, gen_ai__operation__name="invoke_agent"),
        llm("c2", "v", 6, 7, response_id="r2"),
    ]
    triplets = TracerTraceToTriplet(agent_match="^solver$").adapt(spans)
    assert [(t.metadata["response_id"], t.metadata["agent_name"]) for t in triplets] == [("r1", "solver")]
