"""TraceTree: building the tree (virtual parents and roots), repairing the hierarchy, finding LLM calls, matching
rewards and producing triplets."""

from __future__ import annotations

import json
import logging

import pytest

from agentlightning.adapter import RewardMatchPolicy, TracerTraceToTriplet, TraceTree
from agentlightning.types import Span

from .spans import llm, reward, span


def test_an_empty_trace_cannot_make_a_tree() -> None:
    with pytest.raises(ValueError, match="empty"):
        TraceTree.from_spans([])


def test_a_single_root_is_the_tree_and_children_follow_start_time() -> None:
    tree = TraceTree.from_spans(
        [span("late", "c2", "r", 5, 6), span("early", "c1", "r", 1, 2), span("root", "r", None, 0, 10)]
    )
    assert tree.id == "r"
    assert [child.span.name for child in tree.children] == ["early", "late"]
    assert [node.id for node in tree.traverse()] == ["r", "c1", "c2"]
    assert tree.find_id("c2") is tree.children[1] and tree.find_id("nope") is None


def test_a_missing_parent_becomes_a_virtual_span_covering_its_children() -> None:
    tree = TraceTree.from_spans([span("a", "a", "lost", 2, 3), span("b", "b", "lost", 1, 4)])
    assert tree.id == "lost"
    assert tree.span.name == "agentlightning.virtual"
    assert (tree.start_time, tree.end_time) == (1, 4)
    assert [child.id for child in tree.children] == ["b", "a"]


def test_several_roots_hang_under_a_virtual_root() -> None:
    tree = TraceTree.from_spans([span("x", "x", None, 3, 4), span("y", "y", None, 1, 2)])
    assert tree.id == "virtual-root" and tree.span.name == "virtual-root"
    assert [child.id for child in tree.children] == ["y", "x"]
    assert (tree.start_time, tree.end_time) == (1, 4)


def test_malformed_input_is_repaired_with_warnings(caplog: pytest.LogCaptureFixture) -> None:
    cyclic = [span("a", "a", "b", 0, 1), span("b", "b", "a", 0, 1), span("ok", "ok", None, 0, 1)]
    duplicated = [span("first", "d", None), span("second", "d", None)]
    without_id = [Span.from_attributes(attributes={}, name="anonymous").model_copy(update={"span_id": ""})]
    with caplog.at_level(logging.WARNING):
        assert {node.id for node in TraceTree.from_spans(cyclic).traverse()} >= {"a", "b", "ok"}
        assert TraceTree.from_spans(duplicated).span.name == "first"
        assert TraceTree.from_spans(without_id).id != ""
    assert "parent cycle" in caplog.text and "Duplicate span id" in caplog.text and "no span id" in caplog.text


def test_repair_moves_root_level_llm_spans_under_the_tightest_enclosing_span() -> None:
    spans = [
        span("root", "r", None, 0, 100),
        span("agent-a", "a", "r", 10, 40, agent__name="a"),
        span("agent-b", "b", "r", 50, 90, agent__name="b"),
        span("step", "s", "b", 55, 80),
        llm("l1", "r", 20, 30),
        llm("l2", "r", 60, 70),
    ]
    tree = TraceTree.from_spans(spans)
    tree.repair_hierarchy()
    assert tree.find_id("l1") in tree.find_id("a").children  # type: ignore[union-attr]
    assert tree.find_id("l2") in tree.find_id("s").children  # type: ignore[union-attr]


def test_repair_never_uses_an_equal_interval_or_the_childs_own_subtree() -> None:
    spans = [
        span("root", "r", None, 0, 100),
        span("same", "same", "r", 10, 20),
        llm("l", "r", 10, 20),
        span("inner", "inner", "l", 9, 21),  # a (skewed) descendant that "encloses" its ancestor
    ]
    tree = TraceTree.from_spans(spans)
    tree.repair_hierarchy()
    assert tree.find_id("l") in tree.children  # type: ignore[operator]


@pytest.mark.parametrize(
    "attributes, expected",
    [
        ({"agent.name": "planner"}, "planner"),
        ({"gen_ai.agent.name": "critic"}, "critic"),
        ({"openinference.span.kind": "AGENT", "graph.node.id": "primary"}, "primary"),
        ({"agentops.span.kind": "agent", "operation.name": "critic"}, "critic"),
        ({"recipient_agent_type": "primary"}, "primary"),
        ({"langchain.chain.type": "write"}, "write"),
        ({"executor.id": "exec"}, "exec"),
        ({"openinference.span.kind": "AGENT"}, "span-name"),
        ({"agentops.span.kind": "task", "operation.name": "x"}, None),
        ({}, None),
    ],
)
def test_agent_names_follow_the_known_conventions(attributes: dict[str, str], expected: str | None) -> None:
    node = TraceTree("n", Span.from_attributes(attributes=dict(attributes), name="span-name"))
    assert node.agent_name() == expected


def test_names_tuple_shows_agents() -> None:
    tree = TraceTree.from_spans([span("agent", "a", None, agent__name="coder"), llm("l", "a", 0.2, 0.3)])
    assert tree.names_tuple() == ("agent [coder]", [("openai.chat.completion", [])])
    assert json.loads(json.dumps(tree.to_json()))["children"][0]["id"] == "l"


def test_nested_wrapper_spans_without_response_id_are_not_counted_twice() -> None:
    spans = [
        span("openai.chat.completion.wrapper", "outer", None, 0, 10, gen_ai__response__id="r1"),
        llm("inner", "outer", 1, 9),  # no response id: a nested record of the same call
    ]
    tree = TraceTree.from_spans(spans)
    calls = tree.find_llm_calls(
        llm_call_match="openai",
        agent_match=None,
        within_matching_subtree="*",
        within_llm_call=False,
        existing_llm_call_response_ids=set(),
    )
    assert [node.id for node, _ in calls] == ["outer"]


def test_the_same_response_recorded_by_sibling_spans_becomes_one_triplet() -> None:
    # Fixed quirk: the reference only deduplicated once a non-empty id set was shared.
    spans = [span("root", "r", None, 0, 10), llm("a", "r", 1, 2, "same-id"), llm("b", "r", 3, 4, "same-id")]
    assert len(TracerTraceToTriplet(repair_hierarchy=False).adapt(spans)) == 1


def test_llm_calls_inside_a_reward_span_are_excluded_by_default() -> None:
    spans = [
        span("root", "r", None, 0, 10),
        llm("policy", "r", 1, 2, "p"),
        span("agentlightning.reward", "judge", "r", 3, 6, reward=1.0),
        llm("grader", "judge", 4, 5, "g"),
    ]
    assert [t.metadata["response_id"] for t in TracerTraceToTriplet(repair_hierarchy=False).adapt(spans)] == ["p"]
    kept = TracerTraceToTriplet(repair_hierarchy=False, exclude_llm_call_in_reward=False).adapt(spans)
    assert [t.metadata["response_id"] for t in kept] == ["p", "g"]


def test_calls_under_a_non_matching_agent_are_excluded_even_inside_a_matching_one() -> None:
    spans = [
        span("outer", "o", None, 0, 100, agent__name="planner"),
        llm("p1", "o", 1, 2, "p1"),
        span("inner", "i", "o", 10, 50, agent__name="coder"),
        llm("c1", "i", 11, 12, "c1"),
        llm("p2", "o", 60, 61, "p2"),
    ]
    planner = TracerTraceToTriplet(agent_match="planner").adapt(spans)
    assert [t.metadata["response_id"] for t in planner] == ["p1", "p2"]
    coder = TracerTraceToTriplet(agent_match="coder").adapt(spans)
    assert [t.metadata["response_id"] for t in coder] == ["c1"]


def test_first_occurrence_gives_each_reward_to_the_latest_finished_unrewarded_call() -> None:
    spans = [
        span("root", "r", None, 0, 100),
        llm("l1", "r", 1, 2, "1"),
        llm("l2", "r", 3, 4, "2"),
        reward("w1", "r", 5, 0.2),
        llm("l3", "r", 6, 20, "3"),
        reward("w2", "r", 10, 0.7),  # l3 has not finished yet: goes back to l1
        reward("w3", "r", 30, 1.0),
    ]
    triplets = TracerTraceToTriplet(repair_hierarchy=False).adapt(spans)
    assert [t.reward for t in triplets] == [0.7, 0.2, 1.0]


def test_first_sibling_matches_rewards_among_siblings_only() -> None:
    spans = [
        span("root", "r", None, 0, 100),
        span("agent-a", "a", "r", 0, 40),
        llm("a1", "a", 1, 2, "a1"),
        reward("wa", "a", 3, 0.3),
        llm("a2", "a", 4, 5, "a2"),
        span("agent-b", "b", "r", 50, 90),
        llm("b1", "b", 51, 52, "b1"),
        reward("wb", "b", 53, 0.9),
        reward("top", "r", 95, 1.0),  # no LLM-call sibling: unassigned
    ]
    triplets = TracerTraceToTriplet(repair_hierarchy=False, reward_match="first_sibling").adapt(spans)
    assert [(t.metadata["response_id"], t.reward) for t in triplets] == [("a1", 0.3), ("a2", None), ("b1", 0.9)]


def test_match_rewards_accepts_policy_names_and_rejects_unknown_ones() -> None:
    tree = TraceTree.from_spans([llm("l", None, 0, 1, "x"), reward("w", None, 2, 1.0)])
    assert tree.match_rewards("first_occurrence", [tree.find_id("l")]) == {"l": 1.0}  # type: ignore[list-item]
    with pytest.raises(ValueError):
        tree.match_rewards("best_guess", [])


def test_final_reward_overrides_the_last_triplet() -> None:
    tree = TraceTree.from_spans([llm("l1", None, 0, 1, "1"), llm("l2", None, 2, 3, "2")])
    triplets = tree.to_trajectory(final_reward=0.4)
    assert [t.reward for t in triplets] == [None, 0.4]


def test_span_to_triplet_reads_token_ids_in_any_recorded_form_and_logprobs() -> None:
    node = TraceTree("n", Span.from_attributes(attributes={}))
    recorded = Span.from_attributes(
        attributes={
            "prompt_token_ids": "[1, 2, 3]",
            "response_token_ids": "(4, 5)",
            "logprobs.content": json.dumps([{"token": "a", "logprob": -0.1}]),
            "gen_ai.response.id": "r",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "hi",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "yo",
        },
        name="openai.chat.completion",
    )
    triplet = node.span_to_triplet(recorded, "agent")
    assert triplet.prompt == {
        "token_ids": [1, 2, 3],
        "raw_content": [{"role": "user", "content": "hi"}],
        "image_urls": [],
    }
    assert triplet.response["token_ids"] == [4, 5]
    assert triplet.response["logprobs"] == [{"token": "a", "logprob": -0.1}]
    assert triplet.response["raw_content"] == [{"role": "assistant", "content": "yo"}]
    assert triplet.metadata == {"response_id": "r", "agent_name": "agent"}


def test_skip_empty_token_spans_drops_calls_without_token_ids(caplog: pytest.LogCaptureFixture) -> None:
    bare = Span.from_attributes(attributes={"gen_ai.response.id": "bare"}, name="openai.chat.completion", start_time=5)
    spans = [llm("l", None, 0, 1, "full"), bare]
    with caplog.at_level(logging.WARNING):
        kept = TracerTraceToTriplet(_skip_empty_token_spans=True).adapt(spans)
    assert [t.metadata["response_id"] for t in kept] == ["full"]
    assert "without prompt or response token ids" in caplog.text


def test_reward_policy_enum_values_are_stable() -> None:
    assert RewardMatchPolicy("first_sibling") is RewardMatchPolicy.FIRST_SIBLING
    assert RewardMatchPolicy.FIRST_OCCURRENCE.value == "first_occurrence"


def test_the_adapter_accepts_opentelemetry_spans_as_in_v02() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span("openai.chat.completion") as current:
        current.set_attributes({"prompt_token_ids": [1], "response_token_ids": [2], "gen_ai.response.id": "r"})
    [triplet] = TracerTraceToTriplet().adapt(list(exporter.get_finished_spans()))
    assert triplet.prompt["token_ids"] == [1] and triplet.response["token_ids"] == [2]


def test_image_urls_are_read_from_content_parts_in_every_recorded_form() -> None:
    from agentlightning.adapter.attributes import image_urls

    parts = [{"type": "text", "text": "x"}, {"type": "image_url", "image_url": {"url": "u1"}}]
    messages = [
        {"role": "system", "content": "plain text"},
        {"role": "user", "content": json.dumps(parts)},  # the proxy records structured content as JSON text
        {"role": "user", "content_parts": [{"type": "text", "text": "y"}, {"type": "image", "image_url": "u2"}]},
        {"role": "user", "content": [{"type": "image_url", "image_url": "u3"}]},
    ]
    assert image_urls(messages) == ["u1", "u2", "u3"]
    assert image_urls("not messages") == []


def test_a_framework_span_around_the_sdk_record_of_the_same_call_is_not_a_second_call() -> None:
    spans = [
        span("root", "r", None, 0, 10),
        span("openai.chat.completion.langchain", "outer", "r", 1, 9),  # no response id, no token ids
        llm("inner", "outer", 2, 8, "resp-1"),
        span("openai.chat.completion.langchain", "alone", "r", 9.5, 9.9),  # a wrapper with nothing inside counts
    ]
    triplets = TracerTraceToTriplet(llm_call_match="openai", repair_hierarchy=False).adapt(spans)
    assert [t.metadata["response_id"] for t in triplets] == ["resp-1", None]


def _graph_spans(graph_name: str) -> list[Span]:
    """A LangGraph graph span with two node spans ("agent" calling the model, "tools"), as the mapping stores them."""
    return [
        span(graph_name, "g", None, 0, 100),
        span("agent", "n1", "g", 1, 40, agent__name="agent", langgraph__node="agent"),
        span("ChatOpenAI", "m1", "n1", 2, 30),
        llm("c1", "m1", 3, 20, "c1"),
        span("tools", "n2", "g", 41, 60, agent__name="tools", langgraph__node="tools"),
    ]


def test_a_langgraph_graph_given_a_name_is_an_agent_that_its_nodes_do_not_hide() -> None:
    spans = _graph_spans("calculator")
    assert TraceTree.from_spans(spans).agent_name() == "calculator"
    [call] = TracerTraceToTriplet(agent_match="^calculator$").adapt(spans)
    assert call.metadata == {"response_id": "c1", "agent_name": "calculator"}
    [call] = TracerTraceToTriplet(agent_match="^agent$").adapt(spans)
    assert call.metadata["agent_name"] == "agent"
    assert TracerTraceToTriplet(agent_match="^tools$").adapt(spans) == []


def test_a_graph_left_with_langgraphs_default_name_is_not_an_agent() -> None:
    spans = _graph_spans("LangGraph")
    assert TraceTree.from_spans(spans).agent_name() is None
    assert TracerTraceToTriplet(agent_match="LangGraph").adapt(spans) == []
    assert [t.metadata["agent_name"] for t in TracerTraceToTriplet().adapt(spans)] == ["agent"]
