"""The end-of-run verdict of a GRPO run: did the held-out score move, and if it did not rise, the most likely reason
(pure functions over the evaluations and the step history).

The held-out score moved when the mean change per task exceeds the noise of a held-out set of that size:
`NOISE_Z` standard errors of the mean per-task change (the same tasks are scored before and after, so the change is
paired). When it did not rise, the reason is the warning (`health_rules`) that held for the most steps; without
one, what the records say about the training reward.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from .health_rules import RULES

__all__ = ["MIN_UPDATED_STEPS", "NOISE_Z", "REWARD_RISE", "held_out_verdict", "warning_steps"]

NOISE_Z = 2.0
"""Standard errors of the mean per-task change the change must exceed to count as moved."""
MIN_UPDATED_STEPS = 5
"""Fewer steps that updated the weights than this is "too short a run" when no warning explains the verdict."""
REWARD_RISE = 0.05
"""The training reward "rose" when its last steps beat its first ones by more than this."""
_TREND_STEPS = 3


def _rewards(report: Mapping[str, Any]) -> list[Optional[float]]:
    items = report.get("items") or []
    return [
        float(item["reward"])
        if isinstance(item.get("reward"), (int, float)) and math.isfinite(item["reward"])
        else None
        for item in items
    ]


def warning_steps(history: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """How many steps each warning code was active (from the history entries' `warnings`)."""
    counts: Counter[str] = Counter()
    for entry in history:
        for warning in entry.get("warnings") or []:
            counts[warning["code"]] += 1
    return dict(counts)


def _likely_reason(history: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The most likely reason a run did not improve: the longest-held warning (ties: the rules' order), else what
    the training rewards say."""
    counts = warning_steps(history)
    if counts:
        order = {rule.__name__: index for index, rule in enumerate(RULES)}
        code = min(counts, key=lambda c: (-counts[c], order.get(c, len(order))))
        last = next(w for e in reversed(history) for w in e.get("warnings") or [] if w["code"] == code)
        return {
            "code": code,
            "message": f"{last['message']} (held for {counts[code]} of {len(history)} steps)",
            "fix": last["fix"],
        }
    updated = sum(1 for e in history if e.get("samples"))
    if history and not updated:
        return {
            "code": "no_signal",
            "message": "No step had an informative group: every group's rollouts got the same reward, so the "
            "weights never changed.",
            "fix": "Give tasks this model sometimes solves (or a reward with partial credit), a higher temperature "
            "or a larger group_size.",
        }
    if updated < MIN_UPDATED_STEPS:
        return {
            "code": "too_short",
            "message": f"Only {updated} step(s) updated the weights: too few to change the model.",
            "fix": "Train for more steps (max_steps, max_minutes) or on more tasks.",
        }
    rewards = [float(e["reward_mean"]) for e in history if isinstance(e.get("reward_mean"), (int, float))]
    first = statistics.fmean(rewards[:_TREND_STEPS]) if rewards else 0.0
    last = statistics.fmean(rewards[-_TREND_STEPS:]) if rewards else 0.0
    if last - first > REWARD_RISE:
        return {
            "code": "no_transfer",
            "message": f"The training reward rose ({first:.2f} to {last:.2f}) but the held-out score did not follow.",
            "fix": "Check that the held-out tasks are like the training tasks; hold out more tasks to see a smaller "
            "change; train longer.",
        }
    return {
        "code": "reward_flat",
        "message": f"The training reward did not rise either ({first:.2f} to {last:.2f}).",
        "fix": "Raise the learning rate (LoRA: 1e-4 to 5e-4), train longer, or check that the reward rewards what "
        "you want.",
    }


def held_out_verdict(
    before: Optional[Mapping[str, Any]], after: Optional[Mapping[str, Any]], history: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """Whether the held-out score moved between the `before` and `after` evaluations (`EvaluationReport.to_dict()`)
    by more than its noise, and when it did not rise, the most likely reason from `history`.

    Returns `moved` (True, False, or None without both evaluations), `direction` ("up", "down" or None), `before`,
    `after` and `change` (mean reward over the tasks scored both times), `noise`, `tasks`, `reason` (code, message,
    fix; None when the score rose) and `message`, one plain sentence.
    """
    if before is None or after is None:
        return {
            "moved": None,
            "direction": None,
            "reason": None,
            "message": "No held-out evaluation before and after training (pass val_dataset to see one).",
        }
    pairs = [(b, a) for b, a in zip(_rewards(before), _rewards(after), strict=False) if b is not None and a is not None]
    if not pairs:
        return {
            "moved": None,
            "direction": None,
            "reason": None,
            "message": "No held-out task has a reward both before and after training.",
        }
    changes = [a - b for b, a in pairs]
    change = statistics.fmean(changes)
    noise = NOISE_Z * statistics.stdev(changes) / math.sqrt(len(changes)) if len(changes) > 1 else 0.0
    moved = abs(change) > noise and change != 0
    direction = ("up" if change > 0 else "down") if moved else None
    reason = None if direction == "up" else _likely_reason(history)
    score = (
        f"The held-out score went from {statistics.fmean(b for b, _ in pairs):.3f} to "
        f"{statistics.fmean(a for _, a in pairs):.3f} over {len(pairs)} tasks (noise ±{noise:.3f})"
    )
    if direction == "up":
        message = f"{score}: training improved it."
    else:
        state = "fell" if direction == "down" else "did not move"
        message = f"{score}: it {state}. Most likely reason: {reason['message']} {reason['fix']}"  # type: ignore[index]
    return {
        "moved": moved,
        "direction": direction,
        "before": round(statistics.fmean(b for b, _ in pairs), 4),
        "after": round(statistics.fmean(a for _, a in pairs), 4),
        "change": round(change, 4),
        "noise": round(noise, 4),
        "tasks": len(pairs),
        "reason": reason,
        "message": message,
    }
