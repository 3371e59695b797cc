"""The rewards training reads: a rollout's outcome and its step rewards, one rule for GRPO and VERL.

An agent may emit rewards along the way (a step reward after a tool call) and one at the end (the outcome):

- The **outcome** is the rollout's last reward span, in the order the spans are given (the store's: what
  `find_final_reward` reads and the runner records as the attempt's `final_reward`). It belongs to the rollout: it
  is placed on the rollout's final call, in addition to any step reward of that call, and is never dropped nor moved
  to an earlier call. An agent that emits a single reward emits only an outcome.
- Every other reward span is a **step reward**. It belongs to the call it follows: the latest call that ended before
  the reward started when every call and reward span carries times (a call recorded by the LLM proxy is numbered when
  it arrives, a reward when the runner writes it, so sequence ids alone would hand a reward emitted between two calls
  to the later one; this assumes the runner's and the proxy's clocks agree), else the latest call with a smaller
  sequence id. Several step rewards that follow the same call add up; a step reward emitted before the first call
  counts with the first call.
- A rollout in which the agent raised an exception reached no outcome: every reward span it emitted is a step
  reward, and its outcome is what the caller scores a failure with (`failed=True`, then `with_outcome`).

The triplets users read keep the adapters' documented matching (spec: `RewardMatchPolicy`, the proxy's sequence-id
rule); only training reads this view. Pure functions: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Optional

from agentlightning.emitter.reward import get_reward_value
from agentlightning.types import Span

__all__ = ["RolloutRewards", "reward_spans", "rollout_rewards"]


@dataclass(frozen=True)
class RolloutRewards:
    """The training view of a rollout's rewards.

    Attributes:
        steps: the step reward of each call, in call order (None: no step reward followed that call).
        outcome: the rollout's outcome (None: the agent emitted no reward, or no usable one).
    """

    steps: tuple[Optional[float], ...]
    outcome: Optional[float]

    def per_call(self) -> list[Optional[float]]:
        """Each call's reward: its step reward, plus the outcome on the final call (None: neither)."""
        rewards = list(self.steps)
        if rewards and self.outcome is not None:
            rewards[-1] = (rewards[-1] or 0.0) + self.outcome
        return rewards

    def with_outcome(self, outcome: Optional[float]) -> RolloutRewards:
        """The same step rewards with another outcome (a failure reward)."""
        return replace(self, outcome=outcome)


def _number(span: Span) -> Optional[float]:
    value = get_reward_value(span)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def reward_spans(spans: Sequence[Span]) -> list[tuple[Span, float]]:
    """The spans holding a numeric reward, with their values, in the order given."""
    return [(span, value) for span in spans if (value := _number(span)) is not None]


def _follows(calls: Sequence[Span], reward: Span, timed: bool) -> Optional[int]:
    """The index of the call `reward` follows (see the module docstring), or None when it follows none."""
    best: Optional[int] = None
    best_key: tuple[float, int] = (-math.inf, -1)
    for index, call in enumerate(calls):
        if timed:
            if call.end_time > reward.start_time:  # type: ignore[operator]
                continue
            key = (float(call.end_time), index)  # type: ignore[arg-type]
        else:
            if call.sequence_id >= reward.sequence_id:
                continue
            key = (float(call.sequence_id), index)
        if key > best_key:
            best, best_key = index, key
    return best


def rollout_rewards(calls: Sequence[Optional[Span]], spans: Sequence[Span], *, failed: bool = False) -> RolloutRewards:
    """The outcome and each call's step reward (see the module docstring).

    Args:
        calls: the span of each call training uses, in call order; None where the adapter could not name the
            span of a call (a custom adapter): step rewards are then not attributed (the outcome still is).
        spans: the rollout's spans (or just its reward spans); spans without a reward are ignored.
        failed: the agent raised: no reward span is the outcome (it is None; see `with_outcome`).
    """
    rewards = reward_spans(spans)
    outcome: Optional[float] = None
    if rewards and not failed:
        outcome = rewards.pop()[1]
    steps: list[Optional[float]] = [None] * len(calls)
    known = [call for call in calls if call is not None]
    if not calls or len(known) != len(calls):
        return RolloutRewards(tuple(steps), outcome)
    timed = all(call.end_time is not None for call in known) and all(span.start_time is not None for span, _ in rewards)
    for span, value in rewards:
        if not math.isfinite(value):
            continue
        index = _follows(known, span, timed)
        index = 0 if index is None else index
        steps[index] = (steps[index] or 0.0) + value
    return RolloutRewards(tuple(steps), outcome)
