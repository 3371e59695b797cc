"""Evaluation reports say, per task, how the agent used its tools: LLM calls made and the tool calls parsed."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from agentlightning.algorithm.grpo.reporting.evaluation import evaluation_report, tool_calls_of
from agentlightning.algorithm.grpo.rollouts.reading import RolloutData
from agentlightning.types import Triplet


def _call(tool_calls: Any = None, content: str = "") -> Triplet:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return Triplet(prompt={"token_ids": [1]}, response={"token_ids": [2], "raw_content": [message]})


CALL = [{"id": "c1", "type": "function", "function": {"name": "multiply", "arguments": '{"a": 6, "b": 7}'}}]


def test_tool_calls_are_read_from_the_recorded_completion_as_json_text_or_list() -> None:
    expected = [{"name": "multiply", "arguments": '{"a": 6, "b": 7}'}]
    assert tool_calls_of(_call(json.dumps(CALL))) == expected
    assert tool_calls_of(_call(CALL)) == expected
    assert tool_calls_of(_call(None, "42")) == []
    assert tool_calls_of(Triplet(prompt={}, response={"token_ids": [2]})) == []


def test_each_item_counts_its_calls_and_lists_its_tool_calls() -> None:
    rollout: Any = SimpleNamespace(status="succeeded", rollout_id="r1")
    data = RolloutData(rollout, 1.0, [_call(json.dumps(CALL)), _call(None, "42")])
    report = evaluation_report("before", 0, [{"a": 6, "b": 7}], [data], [0], tokenizer=None)
    (item,) = report.items
    assert item["calls"] == 2
    assert item["tool_calls"] == [{"name": "multiply", "arguments": '{"a": 6, "b": 7}'}]
