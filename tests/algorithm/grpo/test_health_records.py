"""A step's health record: tool-call validity and concentration, rewards per stratum, metrics measured elsewhere,
warnings logged once when they start, and the end-of-run verdict."""

from __future__ import annotations

import json
import logging
import re
from types import SimpleNamespace
from typing import Any

import pytest

from agentlightning.algorithm.grpo.reporting.health import step_health, stratum_rewards, tool_call_stats
from agentlightning.algorithm.grpo.reporting.health_log import RunHealth, health_summary
from agentlightning.algorithm.grpo.reporting.health_verdict import held_out_verdict
from agentlightning.algorithm.grpo.rollouts.reading import RolloutData
from agentlightning.algorithm.grpo.sampling.rounds import SampledGroups
from agentlightning.types import Triplet

TOOLS = [{"type": "function", "function": {"name": name, "parameters": {}}} for name in ("add", "multiply")]


def _call(*tool_calls: Any, as_text: bool = True, tools: Any = TOOLS) -> Triplet:
    message: dict[str, Any] = {"role": "assistant", "content": ""}
    if tool_calls:
        message["tool_calls"] = json.dumps(list(tool_calls)) if as_text else list(tool_calls)
    prompt: dict[str, Any] = {"token_ids": [1]}
    if tools is not None:
        prompt["tools"] = tools
    return Triplet(prompt=prompt, response={"token_ids": [2], "raw_content": [message]})


def _fn(name: Any, arguments: Any = '{"a": 1, "b": 2}') -> dict[str, Any]:
    return {"id": "c", "type": "function", "function": {"name": name, "arguments": arguments}}


def test_tool_calls_are_valid_when_they_name_an_offered_tool_with_json_object_arguments() -> None:
    calls = [
        _call(_fn("add")),
        _call(_fn("add"), _fn("multiply", "")),  # empty arguments: no arguments
        _call(_fn("subtract")),  # not offered
        _call(_fn("add", "{not json")),
        _call(_fn("add", "[1, 2]")),  # JSON, but not an object
        _call({"name": "add", "arguments": '{"a": 1}'}, as_text=False),  # client-side spans: no "function" wrapper
    ]
    stats = tool_call_stats(calls)
    assert stats is not None
    assert (stats["calls"], stats["valid"], stats["validity"]) == (7, 4, round(4 / 7, 4))
    assert stats["chosen"] == {"add": 5, "multiply": 1, "subtract": 1}
    assert (stats["top_tool"], stats["top_share"]) == ("add", round(5 / 7, 4))
    assert stats["offered"] == ["add", "multiply"]


def test_tool_calls_recorded_as_text_that_is_not_json_count_as_invalid() -> None:
    broken = Triplet(prompt={"tools": TOOLS}, response={"raw_content": [{"tool_calls": "[{oops"}]})
    stats = tool_call_stats([broken])
    assert stats is not None and (stats["calls"], stats["valid"], stats["top_tool"]) == (1, 0, None)


def test_any_tool_name_is_valid_when_the_request_listed_no_tools() -> None:
    stats = tool_call_stats([_call(_fn("anything"), tools=None)])
    assert stats is not None and stats["validity"] == 1.0 and stats["offered"] == []


def test_calls_without_tools_have_no_tool_stats() -> None:
    assert tool_call_stats([_call(tools=None)]) is None
    offered_but_unused = tool_call_stats([_call()])
    assert offered_but_unused is not None and offered_but_unused["calls"] == 0
    assert offered_but_unused["validity"] is None and offered_but_unused["top_share"] is None


def test_rewards_are_averaged_per_stratum() -> None:
    tasks = [{"kind": "sum"}, {"kind": "sum"}, {"kind": "product"}, {"kind": "product"}, {"kind": "x"}]
    rewards = [1.0, 0.0, 0.0, None, float("nan")]
    assert stratum_rewards(tasks, rewards, lambda task: task["kind"]) == {"product": 0.0, "sum": 0.5}


def test_a_failing_balance_by_is_an_error_naming_the_task() -> None:
    with pytest.raises(ValueError, match=re.escape("balance_by failed on the task {'id': 3}")):
        stratum_rewards([{"id": 3}], [1.0], lambda task: task["kind"])


def test_the_record_reads_truncation_and_sampler_gap_by_name_when_measured() -> None:
    entry = {"step": 2, "tasks": 4, "informative_groups": 1, "skips": {"groups_zero_variance": 3}, "drift": {}}
    record = step_health({**entry, "truncation_rate": 0.25, "sampler_gap_mean": 0.02}, {"entropy": 1.5}, [])
    assert (record["informative_share"], record["zero_variance_share"]) == (0.25, 0.75)
    assert (record["truncation_rate"], record["sampler_gap_mean"], record["sampler_gap_max"]) == (0.25, 0.02, None)
    assert record["entropy"] == 1.5 and record["tool_calls"] is None and record["drift_rate"] is None
    several_agents = step_health(entry, {"a.entropy": 1.0, "b.entropy": 2.0}, [])
    assert several_agents["entropy"] == 1.5 and several_agents["truncation_rate"] is None


def _sampled(rewards: list[float], kinds: list[str]) -> tuple[SampledGroups, list[dict[str, Any]]]:
    """One rollout per task, each calling `add` with a valid call."""
    data = [
        RolloutData(SimpleNamespace(status="succeeded", rollout_id=f"r{i}"), reward, [_call(_fn("add"))])  # type: ignore[arg-type]
        for i, reward in enumerate(rewards)
    ]
    sampled = SampledGroups(data=data, groups=list(range(len(data))), indices=list(range(len(data))))
    return sampled, [{"kind": kind} for kind in kinds]


def test_a_warning_is_logged_once_when_it_starts_and_kept_in_each_entry_while_it_holds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="agentlightning.algorithm.grpo")
    health = RunHealth(balance_by=lambda task: task["kind"])
    history: list[dict[str, Any]] = []
    for step in range(1, 5):
        sampled, dataset = _sampled([1.0] * 6 + [0.0] * 6, ["sum"] * 6 + ["product"] * 6)
        entry = {"step": step, "tasks": 12, "informative_groups": 2, "skips": {}, "drift": {}}
        health.observe(entry, history, {"entropy": 1.0}, sampled, dataset)
        history.append(entry)
    assert history[0]["health"]["reward_by_stratum"] == {"product": 0.0, "sum": 1.0}
    assert history[0]["health"]["tool_calls"]["chosen"] == {"add": 12}
    codes = [[w["code"] for w in entry["warnings"]] for entry in history]
    assert codes == [["tool_collapse", "stratum_gap"]] * 4
    assert {w["since"] for entry in history for w in entry["warnings"]} == {1}
    logged = [r.getMessage() for r in caplog.records if "GRPO step" in r.getMessage()]
    assert len(logged) == 2 and all(message.startswith("GRPO step 1:") for message in logged)


def _report(label: str, rewards: list[float]) -> Any:
    items = [{"reward": r, "status": "succeeded"} for r in rewards]
    return SimpleNamespace(label=label, to_dict=lambda: {"label": label, "items": items})


def test_the_verdict_says_the_score_rose_when_it_moved_beyond_the_noise() -> None:
    before, after = _report("before", [0.0] * 20), _report("after", [1.0] * 12 + [0.0] * 8)
    verdict = health_summary([], [before, after])["verdict"]
    assert (verdict["moved"], verdict["direction"], verdict["reason"]) == (True, "up", None)
    assert verdict["change"] == 0.6 and verdict["tasks"] == 20


def test_the_verdict_names_the_longest_held_warning_when_the_score_did_not_move() -> None:
    warning = {"code": "tool_collapse", "message": "One tool.", "fix": "Balance.", "since": 1}
    gap = {"code": "sampler_gap", "message": "Gap.", "fix": "Check.", "since": 3}
    history = [{"step": s, "samples": 4, "warnings": [warning] + ([gap] if s == 3 else [])} for s in range(1, 6)]
    verdict = held_out_verdict(
        {"items": [{"reward": r} for r in (1.0, 0.0, 0.0, 1.0)]},
        {"items": [{"reward": r} for r in (1.0, 0.0, 1.0, 0.0)]},
        history,
    )
    assert (verdict["moved"], verdict["direction"], verdict["change"]) == (False, None, 0.0)
    assert verdict["reason"]["code"] == "tool_collapse" and "held for 5 of 5 steps" in verdict["reason"]["message"]
    assert "did not move" in verdict["message"] and "Balance." in verdict["message"]


def test_without_warnings_the_verdict_reads_the_training_reward() -> None:
    flat = {"items": [{"reward": 0.0}] * 4}
    rising = [{"step": s, "samples": 4, "reward_mean": 0.1 * s} for s in range(1, 9)]
    assert held_out_verdict(flat, flat, rising)["reason"]["code"] == "no_transfer"
    level = [{"step": s, "samples": 4, "reward_mean": 0.3} for s in range(1, 9)]
    assert held_out_verdict(flat, flat, level)["reason"]["code"] == "reward_flat"
    assert held_out_verdict(flat, flat, level[:2])["reason"]["code"] == "too_short"
    never_updated = [{"step": s, "samples": 0, "reward_mean": 0.0} for s in range(1, 3)]
    assert held_out_verdict(flat, flat, never_updated)["reason"]["code"] == "no_signal"
    assert held_out_verdict(None, flat, level)["moved"] is None
