"""Rewards: emitting them (single and multi-dimensional), rejecting bad values, and reading them back from any
span format (v0.3 attributes, v0.2 `reward` attribute, AgentOps payloads)."""

from __future__ import annotations

import json
import logging
import math
from types import SimpleNamespace
from typing import Any

import pytest

import agentlightning as agl
from agentlightning.emitter.reward import (
    emit_reward,
    find_final_reward,
    find_reward_spans,
    get_reward_value,
    get_rewards_from_span,
    is_reward_span,
    reward,
)
from agentlightning.semconv import AGL_REWARD, RewardPydanticModel
from agentlightning.tracer import DummyTracer


def fake_span(name: str, attributes: dict[str, Any]) -> Any:
    return SimpleNamespace(name=name, attributes=attributes)


def test_emit_reward_builds_a_reward_span_with_primary_dimension_and_legacy_attribute() -> None:
    fields = emit_reward(0.75, propagate=False)
    assert fields is not None
    assert fields.name == AGL_REWARD
    assert fields.attributes["agentlightning.reward.0.name"] == "primary"
    assert fields.attributes["agentlightning.reward.0.value"] == 0.75
    assert fields.attributes["reward"] == 0.75
    assert get_reward_value(fields) == 0.75


@pytest.mark.parametrize("value, expected", [(1, 1.0), (True, 1.0), (False, 0.0), (2.5, 2.5)])
def test_emit_reward_converts_ints_and_bools_to_float(value: Any, expected: float) -> None:
    fields = emit_reward(value, propagate=False)
    assert fields is not None
    value_attribute = fields.attributes["agentlightning.reward.0.value"]
    assert isinstance(value_attribute, float) and value_attribute == expected


def test_multi_dimensional_reward_puts_the_primary_key_first() -> None:
    fields = emit_reward({"length": 0.2, "accuracy": 1.0}, primary_key="accuracy", propagate=False)
    assert fields is not None
    assert get_reward_value(fields) == 1.0
    assert get_rewards_from_span(fields) == [
        RewardPydanticModel(name="accuracy", value=1.0),
        RewardPydanticModel(name="length", value=0.2),
    ]


@pytest.mark.parametrize(
    "bad, primary_key, message",
    [
        (float("nan"), None, "finite"),
        (math.inf, None, "finite"),
        ("0.5", None, "must be a number"),
        (None, None, "must be a number"),
        ([1.0], None, "must be a number"),
        ({"a": 1.0}, None, "primary_key"),
        ({"a": 1.0}, "b", "primary_key"),
        ({}, None, "empty"),
        ({"a": "x"}, "a", "must be a number"),
    ],
)
def test_invalid_rewards_are_logged_and_not_recorded(
    bad: Any, primary_key: Any, message: str, caplog: pytest.LogCaptureFixture
) -> None:
    tracer = DummyTracer()
    with caplog.at_level(logging.ERROR), tracer._trace_context_sync():
        result = emit_reward(bad, primary_key=primary_key)
    assert result is None
    assert tracer.get_last_trace() == []
    assert message in caplog.text


def test_nan_inside_a_multi_dimensional_reward_is_rejected(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR):
        assert emit_reward({"a": 1.0, "b": float("nan")}, primary_key="a", propagate=False) is None
    assert "'b'" in caplog.text


def test_emit_reward_inside_a_dummy_trace_context_is_recorded_by_the_active_tracer() -> None:
    tracer = DummyTracer()
    with tracer._trace_context_sync():
        emit_reward(0.5, attributes={"task": {"id": 7}})
    [span] = tracer.get_last_trace()
    assert span.name == AGL_REWARD
    assert span.attributes["task.id"] == 7
    assert get_reward_value(span) == 0.5


def test_propagate_false_builds_the_span_without_sending_it_to_the_active_tracer() -> None:
    tracer = DummyTracer()
    with tracer._trace_context_sync():
        fields = emit_reward(0.5, propagate=False)
    assert fields is not None and get_reward_value(fields) == 0.5
    assert tracer.get_last_trace() == []


def test_emit_reward_without_any_tracer_returns_the_fields_and_logs_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="agentlightning.emitter"):
        fields = emit_reward(0.3)
    assert fields is not None and get_reward_value(fields) == 0.3
    assert any(record.levelno == logging.DEBUG and "No active tracer" in record.message for record in caplog.records)


def test_reward_decorator_emits_the_return_value_of_a_sync_function() -> None:
    with pytest.warns(DeprecationWarning):

        @reward
        def grade(x: float) -> float:
            return x * 2

    tracer = DummyTracer()
    with tracer._trace_context_sync():
        assert grade(0.25) == 0.5
    assert [get_reward_value(span) for span in tracer.get_last_trace()] == [0.5]


async def test_reward_decorator_emits_the_return_value_of_an_async_function() -> None:
    with pytest.warns(DeprecationWarning):

        @reward
        async def grade() -> int:
            return 1

    tracer = DummyTracer()
    async with tracer.trace_context():
        assert await grade() == 1
    assert [get_reward_value(span) for span in tracer.get_last_trace()] == [1.0]


def test_reward_decorator_logs_instead_of_raising_when_the_function_returns_none(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with pytest.warns(DeprecationWarning):

        @reward
        def nothing() -> None:
            return None

    with caplog.at_level(logging.ERROR):
        assert nothing() is None
    assert "must be a number" in caplog.text


def test_get_reward_value_reads_an_agentops_dict_from_task_output() -> None:
    span = fake_span("agentops_reward_operation.task", {"agentops.task.output": {"type": "reward", "value": 0.9}})
    assert get_reward_value(span) == 0.9


def test_get_reward_value_reads_a_json_string_from_entity_output() -> None:
    span = fake_span("x", {"agentops.entity.output": json.dumps({"type": "reward", "value": 0.4})})
    assert get_reward_value(span) == 0.4


def test_get_reward_value_reads_the_legacy_reward_attribute_of_a_reward_span() -> None:
    assert get_reward_value(fake_span(AGL_REWARD, {"reward": 0.1})) == 0.1


def test_get_reward_value_ignores_non_reward_payloads_and_bad_json() -> None:
    assert get_reward_value(fake_span("x", {"agentops.task.output": {"type": "other", "value": 1.0}})) is None
    assert get_reward_value(fake_span("x", {"agentops.task.output": "{not json"})) is None
    assert get_reward_value(fake_span("other", {"reward": 1.0})) is None


def test_is_reward_span_is_false_for_a_dict_without_type_and_for_a_none_value() -> None:
    assert is_reward_span(fake_span("x", {"agentops.task.output": {"type": "reward", "value": 1.0}}))
    assert not is_reward_span(fake_span("x", {"agentops.task.output": {"value": 1.0}}))
    assert not is_reward_span(fake_span("x", {"agentops.task.output": {"type": "reward", "value": None}}))


def test_a_non_float_reward_value_is_logged_and_returned_as_is(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR):
        assert get_reward_value(fake_span(AGL_REWARD, {"reward": "high"})) == "high"
    assert "not a float" in caplog.text


def test_find_reward_spans_keeps_only_reward_spans_in_order() -> None:
    a = fake_span(AGL_REWARD, {"reward": 1.0})
    b = fake_span("llm", {"gen_ai.prompt.0.content": "hi"})
    c = fake_span("x", {"agentops.task.output": {"type": "reward", "value": 0.0}})
    assert find_reward_spans([a, b, c]) == [a, c]


def test_find_final_reward_returns_the_last_reward_of_either_format_or_none() -> None:
    spans = [
        fake_span(AGL_REWARD, {"reward": 1.0}),
        fake_span("x", {"agentops.task.output": {"type": "reward", "value": 0.25}}),
        fake_span("llm", {}),
    ]
    assert find_final_reward(spans) == 0.25
    assert find_final_reward([fake_span("llm", {})]) is None


def test_reward_helpers_are_exported_at_the_top_level_and_from_the_deprecated_module() -> None:
    assert agl.emit_reward is emit_reward
    with pytest.warns(DeprecationWarning):
        import importlib

        import agentlightning.reward as legacy

        importlib.reload(legacy)
    assert legacy.get_reward_value is get_reward_value
