"""TraceToMessages: LLM spans as OpenAI fine-tuning conversations (messages plus the tools that were offered)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentlightning.adapter import TraceToMessages
from agentlightning.adapter.messages import group_genai_dict
from agentlightning.types import Span

pytest.importorskip("openai", reason="TraceToMessages needs the openai extra")

WEATHER_PARAMETERS = {"type": "object", "properties": {"city": {"type": "string"}}}


def make(name: str, span_id: str, parent_id: str | None = None, **attributes: Any) -> Span:
    return Span.from_attributes(
        attributes={key.replace("__", "."): value for key, value in attributes.items()},
        name=name,
        span_id=span_id,
        parent_id=parent_id,
    )


def tool_call_conversation() -> list[Span]:
    return [
        make(
            "openai.chat.completion",
            "c1",
            gen_ai__prompt__0__role="system",
            gen_ai__prompt__0__content="You book rooms.",
            gen_ai__prompt__1__role="user",
            gen_ai__prompt__1__content="Weather in Paris?",
            gen_ai__completion__0__role="assistant",
            gen_ai__request__functions__0__name="get_weather",
            gen_ai__request__functions__0__description="Weather lookup",
            gen_ai__request__functions__0__parameters=json.dumps(WEATHER_PARAMETERS),
        ),
        make(
            "tool",
            "t1",
            "c1",
            tool__name="get_weather",
            tool__parameters='{"city": "Paris"}',
            tool__call__id="call_1",
            tool__call__type="function",
        ),
        make(
            "openai.chat.completion",
            "c2",
            gen_ai__prompt__0__role="user",
            gen_ai__prompt__0__content="Weather in Paris?",
            gen_ai__prompt__1__role="tool",
            gen_ai__prompt__1__content="sunny",
            gen_ai__prompt__1__tool_call_id="call_1",
            gen_ai__completion__0__role="assistant",
            gen_ai__completion__0__content="It is sunny.",
        ),
        make(
            "openai.chat.completion",
            "grader",
            gen_ai__prompt__0__role="user",
            gen_ai__prompt__0__content="Grade: It is sunny.",
            gen_ai__completion__0__role="assistant",
            gen_ai__completion__0__content="1.0",
        ),
    ]


def test_each_llm_span_becomes_one_conversation() -> None:
    conversations = TraceToMessages().adapt(tool_call_conversation())
    assert len(conversations) == 3

    first = conversations[0]
    assert first["messages"][-1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
        ],
    }
    assert first["tools"] == [
        {
            "type": "function",
            "function": {"name": "get_weather", "description": "Weather lookup", "parameters": WEATHER_PARAMETERS},
        }
    ]

    second = conversations[1]
    assert second["messages"][1] == {"role": "tool", "content": "sunny", "tool_call_id": "call_1"}
    assert second["messages"][2] == {"role": "assistant", "content": "It is sunny."}
    assert second["tools"] is None
    assert conversations[2]["messages"][0] == {"role": "user", "content": "Grade: It is sunny."}


def test_tool_call_id_survives_only_on_tool_messages() -> None:
    span = make(
        "llm",
        "x",
        gen_ai__prompt__0__role="user",
        gen_ai__prompt__0__content="hi",
        gen_ai__prompt__0__tool_call_id="stray",
    )
    [conversation] = TraceToMessages().adapt([span])
    assert conversation["messages"] == [{"role": "user", "content": "hi"}]


def test_two_tool_call_children_give_one_message_with_two_calls() -> None:
    spans = [
        make(
            "openai.chat.completion",
            "c",
            gen_ai__prompt__0__role="user",
            gen_ai__prompt__0__content="go",
            gen_ai__completion__0__role="assistant",
        ),
        make("tool", "t1", "c", tool__name="a", tool__parameters="{}", tool__call__id="1", tool__call__type="function"),
        make("tool", "t2", "c", tool__name="b", tool__parameters="{}", tool__call__id="2", tool__call__type="function"),
    ]
    [conversation] = TraceToMessages().adapt(spans)
    calls = conversation["messages"][-1]["tool_calls"]  # type: ignore[typeddict-item]
    assert [call["function"]["name"] for call in calls] == ["a", "b"]


def test_tool_calls_recorded_on_the_completion_itself_are_used() -> None:
    span = make(
        "openai.chat.completion",
        "c",
        gen_ai__prompt__0__role="user",
        gen_ai__prompt__0__content="weather?",
        gen_ai__completion__0__role="assistant",
        gen_ai__completion__0__tool_calls__0__id="call_9",
        gen_ai__completion__0__tool_calls__0__name="get_weather",
        gen_ai__completion__0__tool_calls__0__arguments='{"city": "Oslo"}',
    )
    [conversation] = TraceToMessages().adapt([span])
    assert conversation["messages"][-1]["tool_calls"][0]["id"] == "call_9"  # type: ignore[typeddict-item]


def test_spans_without_gen_ai_attributes_are_skipped() -> None:
    assert TraceToMessages().adapt([make("agentlightning.reward", "r", reward=1.0)]) == []


def test_group_genai_dict_builds_lists_for_indices_and_dicts_otherwise() -> None:
    data = {"gen_ai.prompt.1.content": "b", "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "a"}
    assert group_genai_dict(data, "gen_ai.prompt") == [{"role": "user", "content": "a"}, {"content": "b"}]
    assert group_genai_dict({"tool.name": "x", "tool.call.id": "1"}, "tool") == {"name": "x", "call": {"id": "1"}}
    assert group_genai_dict({"other": 1}, "tool") == {}


def test_tool_calls_recorded_as_json_text_by_the_llm_proxy_are_read() -> None:
    recorded = json.dumps([{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}])
    span = make(
        "openai.chat.completion",
        "c",
        gen_ai__prompt__0__role="user",
        gen_ai__prompt__0__content="go",
        gen_ai__prompt__1__role="assistant",
        gen_ai__prompt__1__tool_calls=recorded,
        gen_ai__prompt__2__role="tool",
        gen_ai__prompt__2__content="done",
        gen_ai__prompt__2__tool_call_id="c1",
        gen_ai__completion__0__role="assistant",
        gen_ai__completion__0__content="ok",
    )
    [conversation] = TraceToMessages().adapt([span])
    assert conversation["messages"][1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    }
