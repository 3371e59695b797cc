"""What `Baseline` reports: one span as a log line, a finished rollout as a record, and the run's summary.

Pure functions over the store's models, so the report format is tested without a store or a runner.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Literal, Optional

from agentlightning.emitter.reward import find_final_reward
from agentlightning.types import Attempt, Rollout, Span

__all__ = ["BaselineSummary", "ModeSummary", "RolloutReport", "span_to_string", "summarize"]


def _iso(timestamp: Optional[float]) -> str:
    if timestamp is None:
        return "unknown"
    return datetime.fromtimestamp(timestamp, tz=timezone.utc).isoformat()


def span_to_string(
    rollout_id: str, attempt: Optional[Attempt], span: Span, verbosity: Literal["keys", "key_values", "none"]
) -> str:
    """One log line for a span: ids, sequence number, name, timing and its attributes (names or names and values)."""
    if verbosity == "none":
        return ""
    attempt_label = str(attempt.sequence_id) if attempt is not None else span.attempt_id
    text = f"[Rollout {rollout_id} | Attempt {attempt_label} | Span {span.span_id}] #{span.sequence_id} ({span.name}) "
    if span.start_time is not None and span.end_time is not None:
        seconds = span.end_time - span.start_time
        text += f"From {_iso(span.start_time)}, to {_iso(span.end_time)}, {seconds:.3f} seconds. "
    else:
        text += f"From {_iso(span.start_time)}, to {_iso(span.end_time)}. "
    if verbosity == "key_values":
        text += f"Attributes: {dict(span.attributes)}"
    else:
        text += f"Attribute keys: {list(span.attributes)}"
    return text


@dataclass(frozen=True)
class RolloutReport:
    """The facts about one finished rollout that the summary aggregates."""

    rollout_id: str
    mode: Optional[str]
    status: str
    attempts: int
    spans: int
    reward: Optional[float]
    seconds: Optional[float]

    @classmethod
    def from_rollout(cls, rollout: Rollout, attempts: Sequence[Attempt], latest_spans: Sequence[Span]) -> RolloutReport:
        seconds = rollout.end_time - rollout.start_time if rollout.end_time is not None else None
        return cls(
            rollout_id=rollout.rollout_id,
            mode=rollout.mode,
            status=rollout.status,
            attempts=len(attempts),
            spans=len(latest_spans),
            reward=find_final_reward(latest_spans),
            seconds=seconds,
        )


@dataclass(frozen=True)
class ModeSummary:
    """Aggregates over the rollouts of one mode ("train", "val", ...)."""

    rollouts: int
    statuses: dict[str, int]
    with_reward: int
    mean_reward: Optional[float]
    min_reward: Optional[float]
    max_reward: Optional[float]
    mean_spans: float
    max_spans: int
    retried: int


@dataclass(frozen=True)
class BaselineSummary:
    """What a Baseline run did: per-mode aggregates and the wall time."""

    by_mode: dict[str, ModeSummary] = field(default_factory=dict)
    wall_seconds: float = 0.0
    adapter_notes: dict[str, int] = field(default_factory=dict)
    """What the adapter diagnosed (e.g. "empty trajectory: no LLM call captured") and for how many rollouts."""

    @property
    def rollouts(self) -> int:
        return sum(mode.rollouts for mode in self.by_mode.values())

    def lines(self) -> list[str]:
        """Human-readable summary lines (logged at the end of a run)."""
        lines = [f"{self.rollouts} rollouts in {self.wall_seconds:.1f} s"]
        for mode, summary in self.by_mode.items():
            statuses = ", ".join(f"{count} {status}" for status, count in sorted(summary.statuses.items()))
            if summary.mean_reward is None:
                reward_text = "no rewards recorded (does the agent emit a reward or return a float?)"
            else:
                reward_text = (
                    f"mean reward {summary.mean_reward:.4f} (min {summary.min_reward:.4f}, max {summary.max_reward:.4f}) "
                    f"over {summary.with_reward} rollouts with a reward"
                )
            lines.append(
                f"{mode}: {summary.rollouts} rollouts ({statuses}); {reward_text}; "
                f"{summary.mean_spans:.1f} spans per rollout (max {summary.max_spans}); {summary.retried} retried"
            )
        for cause, count in sorted(self.adapter_notes.items()):
            lines.append(f"adapter: {cause} in {count} of {self.rollouts} rollouts")
        return lines


def summarize(
    reports: Sequence[RolloutReport], wall_seconds: float = 0.0, adapter_notes: Optional[dict[str, int]] = None
) -> BaselineSummary:
    """Aggregate rollout reports per mode (rollouts without a mode count as "none"); `adapter_notes` counts what the
    adapter diagnosed, per cause."""
    groups: dict[str, list[RolloutReport]] = {}
    for report in reports:
        groups.setdefault(report.mode or "none", []).append(report)
    by_mode: dict[str, ModeSummary] = {}
    for mode, group in groups.items():
        rewards = [report.reward for report in group if report.reward is not None]
        spans = [report.spans for report in group]
        by_mode[mode] = ModeSummary(
            rollouts=len(group),
            statuses=dict(Counter(report.status for report in group)),
            with_reward=len(rewards),
            mean_reward=statistics.fmean(rewards) if rewards else None,
            min_reward=min(rewards) if rewards else None,
            max_reward=max(rewards) if rewards else None,
            mean_spans=statistics.fmean(spans) if spans else 0.0,
            max_spans=max(spans) if spans else 0,
            retried=sum(1 for report in group if report.attempts > 1),
        )
    return BaselineSummary(by_mode=by_mode, wall_seconds=wall_seconds, adapter_notes=dict(adapter_notes or {}))
