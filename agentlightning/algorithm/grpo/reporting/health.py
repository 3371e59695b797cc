"""What one GRPO step's health record holds, built from what the step saw (pure functions, no I/O).

A small model fails to train in a few known ways: nothing to learn from (every group's rewards are equal), collapse
(one action chosen for everything, entropy falling), truncated answers, drift, a gap between the sampler's and the
trainer's log-probabilities. `step_health` gathers, per step, what tells them apart:

- `informative_share` / `zero_variance_share`: groups whose rewards varied / were all equal, per task sampled;
- `failed_group_share`: groups that failed throughout and were trained as such (`failed_group_reward`), per task;
- `entropy` (mean entropy, in nats, of the policy's sampling distribution over the trained tokens) and
  `sampled_nll` (their mean negative log-probability), measured by the update's forward pass;
- `tool_calls`: the calls' tool calls (`tool_call_stats`): how many, the share that parse, which tools were chosen,
  and the most-chosen tool's share;
- `drift_rate`, and, when the step's metrics carry them, `truncation_rate`, `sampler_gap_mean`, `sampler_gap_max`;
- `reward_by_stratum`: the mean reward per stratum (`stratum_rewards`) when the run names a `balance_by` key.

The rules that read these records are in `health_rules`; the end-of-run verdict in `health_verdict`.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional

from agentlightning.types import Triplet

__all__ = [
    "MEASURED_ELSEWHERE",
    "StrataKey",
    "listed_tool_calls",
    "offered_tools",
    "step_health",
    "stratum_rewards",
    "tool_call_stats",
]

StrataKey = Callable[[Any], Any]
"""`balance_by`: a task's stratum (its kind), e.g. `lambda task: task["kind"]`."""

MEASURED_ELSEWHERE = ("truncation_rate", "sampler_gap_mean", "sampler_gap_max")
"""Step metrics other parts of GRPO record under these names; a health record copies them when present."""


def offered_tools(call: Triplet) -> list[str]:
    """The names of the tools the call's request offered (`prompt["tools"]`, OpenAI tools or bare functions)."""
    tools = call.prompt.get("tools") if isinstance(call.prompt, dict) else None
    names: list[str] = []
    for tool in tools if isinstance(tools, list) else []:
        function = tool.get("function", tool) if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str) and name:
            names.append(name)
    return names


def listed_tool_calls(call: Triplet) -> list[Any]:
    """The raw tool-call entries of the call's completion messages; a list recorded as text that does not parse as
    JSON is one entry (None) that is not valid."""
    raw = call.response.get("raw_content") if isinstance(call.response, dict) else None
    entries: list[Any] = []
    for message in raw if isinstance(raw, list) else []:
        listed = message.get("tool_calls") if isinstance(message, dict) else None
        if isinstance(listed, str):
            try:
                listed = json.loads(listed)
            except ValueError:
                entries.append(None)
                continue
        if isinstance(listed, list):
            entries.extend(listed)
    return entries


def _arguments_parse(arguments: Any) -> bool:
    """Arguments are valid as a JSON object (text or already parsed); absent or empty means no arguments."""
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return True
    if isinstance(arguments, dict):
        return True
    if not isinstance(arguments, str):
        return False
    try:
        return isinstance(json.loads(arguments), dict)
    except ValueError:
        return False


def tool_call_stats(calls: Sequence[Triplet]) -> Optional[dict[str, Any]]:
    """The tool calls of `calls` (None when no call made or was offered any).

    A tool call is valid when it names a tool (one the request offered, when it listed tools) and its arguments parse
    as a JSON object. Returns `calls` (tool calls made), `valid`, `validity` (valid / calls), `offered` (the tool
    names offered, sorted), `chosen` ({tool name: times chosen}, most chosen first), `top_tool` and `top_share`
    (the most-chosen tool and its share of the named tool calls).
    """
    made = valid = 0
    offered: set[str] = set()
    chosen: Counter[str] = Counter()
    for call in calls:
        names = offered_tools(call)
        offered.update(names)
        for entry in listed_tool_calls(call):
            made += 1
            function = entry.get("function", entry) if isinstance(entry, dict) else None
            name = function.get("name") if isinstance(function, dict) else None
            if not isinstance(name, str) or not name:
                continue
            chosen[name] += 1
            if (not names or name in names) and _arguments_parse(function.get("arguments")):  # type: ignore[union-attr]
                valid += 1
    if not made and not offered:
        return None
    ranked = chosen.most_common()
    named = sum(chosen.values())
    return {
        "calls": made,
        "valid": valid,
        "validity": round(valid / made, 4) if made else None,
        "offered": sorted(offered),
        "chosen": dict(ranked),
        "top_tool": ranked[0][0] if ranked else None,
        "top_share": round(ranked[0][1] / named, 4) if ranked else None,
    }


def stratum_rewards(
    tasks: Sequence[Any], rewards: Sequence[Optional[float]], balance_by: StrataKey
) -> dict[str, float]:
    """The mean finite reward per stratum: `rewards[i]` is the reward of a rollout of `tasks[i]` (None: none), whose
    stratum is `str(balance_by(task))`. Raises ValueError naming the task when `balance_by` fails on it."""
    if len(tasks) != len(rewards):
        raise ValueError(f"stratum_rewards got {len(tasks)} tasks for {len(rewards)} rewards")
    by_stratum: dict[str, list[float]] = {}
    for task, reward in zip(tasks, rewards, strict=True):
        try:
            key = str(balance_by(task))
        except Exception as exc:
            raise ValueError(f"balance_by failed on the task {task!r}: {exc!r}") from exc
        values = by_stratum.setdefault(key, [])
        if reward is not None and math.isfinite(reward):
            values.append(reward)
    return {key: round(statistics.fmean(values), 4) for key, values in sorted(by_stratum.items()) if values}


def _agents_mean(metrics: Mapping[str, Any], name: str) -> Optional[float]:
    """`metrics[name]`, or with several agents (`<agent>.<name>` keys) their mean."""
    value = metrics.get(name)
    if isinstance(value, (int, float)):
        return round(float(value), 6)
    values = [float(v) for k, v in metrics.items() if k.endswith(f".{name}") and isinstance(v, (int, float))]
    return round(statistics.fmean(values), 6) if values else None


def step_health(
    entry: Mapping[str, Any],
    metrics: Mapping[str, Any],
    calls: Sequence[Triplet],
    strata: Optional[Mapping[str, float]] = None,
) -> dict[str, Any]:
    """The health record of a step from its history `entry` (counts, drift, skips, and any metric named in
    `MEASURED_ELSEWHERE`), the update's `metrics` (entropy, sampled-token NLL), the step's LLM `calls` (tool calls)
    and its `strata` rewards. A value the step did not measure is None."""
    tasks = entry.get("tasks") or 0
    skips = entry.get("skips") or {}
    drift = entry.get("drift") or {}
    informative = entry.get("informative_groups")
    record: dict[str, Any] = {
        "step": entry.get("step"),
        "reward_mean": entry.get("reward_mean"),
        "informative_share": round(informative / tasks, 4) if tasks and informative is not None else None,
        "zero_variance_share": round(skips.get("groups_zero_variance", 0) / tasks, 4) if tasks else None,
        "failed_group_share": round((entry.get("failed_groups") or 0) / tasks, 4) if tasks else None,
        "entropy": _agents_mean(metrics, "entropy"),
        "sampled_nll": _agents_mean(metrics, "sampled_nll"),
        "drift_rate": drift.get("rate") if drift.get("continuations") else None,
        "tool_calls": tool_call_stats(calls),
        "reward_by_stratum": dict(strata) if strata else None,
    }
    for name in MEASURED_ELSEWHERE:
        value = entry.get(name, metrics.get(name))
        record[name] = round(float(value), 6) if isinstance(value, (int, float)) else None
    record["truncation_kept"] = bool(entry.get("truncation_kept"))  # truncated="keep": the limit is intended
    return record
