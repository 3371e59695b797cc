"""Greedy evaluation results: `EvaluationReport` (what checkpoints and summaries record) and how one is built."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from agentlightning.types import Triplet

from ..rollouts.reading import RolloutData
from .health import listed_tool_calls

__all__ = ["EvaluationReport", "evaluation_report", "tool_calls_of"]


@dataclass
class EvaluationReport:
    """Greedy evaluation of one weights version: mean reward and, per task, the reward and the answer text.

    `items` holds every task of the evaluation, in order: a task whose rollout did not finish within
    `rollout_timeout` has status "unfinished", no reward and no answer (counted in `unfinished`), so accuracies
    computed over `items` count it as wrong instead of shrinking the denominator. `mean_reward` averages the rewards
    that were recorded.
    """

    label: str
    step: int
    mean_reward: Optional[float]
    items: list[dict[str, Any]] = field(default_factory=list)
    failed: int = 0
    without_reward: int = 0
    unfinished: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "step": self.step,
            "mean_reward": self.mean_reward,
            "n": len(self.items),
            "failed": self.failed,
            "without_reward": self.without_reward,
            "unfinished": self.unfinished,
            "items": self.items,
        }


def tool_calls_of(call: Triplet) -> list[dict[str, Any]]:
    """The tool calls in a call's recorded completion (`raw_content`): `{"name", "arguments"}` each, arguments as
    the JSON text the server returned (empty without recorded messages)."""
    found: list[dict[str, Any]] = []
    for entry in listed_tool_calls(call):
        function = entry.get("function", entry) if isinstance(entry, dict) else {}
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            found.append({"name": function["name"], "arguments": function.get("arguments")})
    return found


def evaluation_report(
    label: str,
    step: int,
    tasks: Sequence[Any],
    data: Sequence[RolloutData],
    positions: Sequence[int],
    tokenizer: Any,
) -> EvaluationReport:
    """The report of one evaluation: `data[i]` is the rollout of `tasks[positions[i]]`; items follow the task order.

    A task's answer is the decoded response of its rollout's last LLM call (None without calls or `tokenizer`); a
    task without a finished rollout is an "unfinished" item. `calls` counts a rollout's LLM calls and `tool_calls`
    lists the tool calls the model made (name and arguments, as the server parsed them), so multi-turn agents can be
    judged on how they use their tools.
    """
    by_position = dict(zip(positions, data, strict=True))
    items: list[dict[str, Any]] = []
    for position, task in enumerate(tasks):
        item = by_position.get(position)
        if item is None:
            items.append(
                {"task": task, "reward": None, "answer": None, "status": "unfinished", "calls": 0, "tool_calls": []}
            )
            continue
        answer = None
        if item.calls and tokenizer is not None:
            answer = tokenizer.decode(item.calls[-1].response["token_ids"], skip_special_tokens=True)
        items.append(
            {
                "task": task,
                "reward": item.reward,
                "answer": answer,
                "status": item.rollout.status,
                "calls": len(item.calls),
                "tool_calls": [call for triplet in item.calls for call in tool_calls_of(triplet)],
            }
        )
    rewards = [i["reward"] for i in items if isinstance(i["reward"], (int, float)) and math.isfinite(i["reward"])]
    return EvaluationReport(
        label=label,
        step=step,
        mean_reward=statistics.fmean(rewards) if rewards else None,
        items=items,
        failed=sum(1 for i in items if i["status"] not in ("succeeded", "unfinished")),
        without_reward=sum(1 for i in items if i["reward"] is None and i["status"] != "unfinished"),
        unfinished=sum(1 for i in items if i["status"] == "unfinished"),
    )
