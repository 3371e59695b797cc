"""Group-relative advantages: each rollout's reward compared with the other rollouts of the same task.

Pure Python (no torch) so the rules are easy to test: rewards that are not finite numbers are dropped and counted
before the statistics; a group whose rewards do not vary carries no relative signal and is skipped and counted.
`group_advantages` gives one advantage per rollout (its final reward, given to every call); `turn_advantages` one
per LLM call, from rewards attributed to the calls (turn-level credit).

`FailedGroups` optionally trains the groups in which every rollout failed (rewards that do not vary and are all at
most `reward`) with one negative advantage for every rollout: negative reinforcement, which lowers what the model
did on those tasks and spreads the probability over what it did not try (see Zhu et al., 2025, "The Surprising
Effectiveness of Negative Reinforcement in LLM Reasoning"). Such groups are counted as `groups_failed`, not as
zero-variance or informative ones.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Optional

__all__ = ["FailedGroups", "GroupAdvantages", "TurnAdvantages", "group_advantages", "returns_to_go", "turn_advantages"]


@dataclass(frozen=True)
class FailedGroups:
    """Groups whose rewards are all at most `reward` (and do not vary) get `advantage` (< 0) for every rollout."""

    reward: float
    advantage: float

    def holds(self, rewards: Sequence[float]) -> bool:
        """Whether a group with these (non-varying) rewards failed throughout."""
        return bool(rewards) and max(rewards) <= self.reward


@dataclass
class GroupAdvantages:
    """The advantage of every kept rollout (by its key) and what was left out."""

    advantages: dict[Hashable, float] = field(default_factory=dict)
    groups_used: int = 0
    groups_zero_variance: int = 0
    groups_too_small: int = 0
    rewards_not_finite: int = 0
    groups_failed: int = 0  # zero-variance groups trained as failures (`FailedGroups`)
    failed_keys: set[Hashable] = field(default_factory=set)  # the rollouts of those groups


def group_advantages(
    groups: Mapping[Hashable, Sequence[tuple[Hashable, float]]],
    *,
    scale: bool = True,
    min_std: float = 1e-6,
    epsilon: float = 1e-4,
    failed: Optional[FailedGroups] = None,
) -> GroupAdvantages:
    """Advantages per rollout: `(reward - group mean) / (group std + epsilon)` (std: population, `scale=True`).

    `groups` maps a group key (the task) to `(rollout key, reward)` pairs. NaN/infinite rewards are dropped and
    counted; a group with fewer than two usable rewards, or whose standard deviation is at most `min_std`, is
    skipped and counted, except that with `failed` a group that failed throughout gets `failed.advantage` for every
    rollout (counted in `groups_failed`).
    """
    result = GroupAdvantages()
    for members in groups.values():
        usable: list[tuple[Hashable, float]] = []
        for key, reward in members:
            if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not math.isfinite(reward):
                result.rewards_not_finite += 1
                continue
            usable.append((key, float(reward)))
        if len(usable) < 2:
            result.groups_too_small += 1
            continue
        rewards = [reward for _, reward in usable]
        mean = statistics.fmean(rewards)
        std = statistics.pstdev(rewards, mu=mean)
        if std <= min_std:
            if failed is not None and failed.holds(rewards):
                result.groups_failed += 1
                result.advantages.update((key, failed.advantage) for key, _ in usable)
                result.failed_keys.update(key for key, _ in usable)
            else:
                result.groups_zero_variance += 1
            continue
        result.groups_used += 1
        for key, reward in usable:
            centred = reward - mean
            result.advantages[key] = centred / (std + epsilon) if scale else centred
    return result


@dataclass
class TurnAdvantages:
    """The advantage of every LLM call of every kept rollout (by rollout key, one per call in order)."""

    advantages: dict[Hashable, list[float]] = field(default_factory=dict)
    groups_used: int = 0
    groups_zero_variance: int = 0
    groups_too_small: int = 0
    groups_failed: int = 0  # groups trained as failures (`FailedGroups`)
    failed_keys: set[Hashable] = field(default_factory=set)  # the rollouts of those groups


def returns_to_go(rewards: Sequence[Optional[float]]) -> list[float]:
    """Each call's return: the sum of the rewards of that call and of every later call (None counts as 0)."""
    result: list[float] = []
    running = 0.0
    for reward in reversed(rewards):
        running += reward or 0.0
        result.append(running)
    return result[::-1]


def turn_advantages(
    groups: Mapping[Hashable, Sequence[tuple[Hashable, Sequence[Optional[float]]]]],
    *,
    scale: bool = True,
    min_std: float = 1e-6,
    epsilon: float = 1e-4,
    failed: Optional[FailedGroups] = None,
) -> TurnAdvantages:
    """Advantages per call from turn-level rewards: call k's return-to-go compared with the returns-to-go of call k
    of the group's other rollouts (those that made a call k).

    `groups` maps a group key (the task) to `(rollout key, rewards of its calls in order)`. For turn k the baseline
    is the mean return-to-go at turn k over the group's rollouts with a turn k (scaled by their standard deviation
    with `scale`); a turn made by a single rollout, or whose returns do not vary, gets advantage 0. A group in which
    no turn varies carries no signal and is skipped and counted, except that with `failed` a group whose rollouts'
    returns (at their first call) are all at most `failed.reward` gets `failed.advantage` on every call (counted in
    `groups_failed`). Rewards must be finite (the caller filters).
    """
    result = TurnAdvantages()
    for members in groups.values():
        if len(members) < 2:
            result.groups_too_small += 1
            continue
        returns = {key: returns_to_go(rewards) for key, rewards in members}
        longest = max((len(r) for r in returns.values()), default=0)
        advantages = {key: [0.0] * len(r) for key, r in returns.items()}
        varied = False
        for turn in range(longest):
            at_turn = [(key, r[turn]) for key, r in returns.items() if len(r) > turn]
            if len(at_turn) < 2:
                continue
            values = [value for _, value in at_turn]
            mean = statistics.fmean(values)
            std = statistics.pstdev(values, mu=mean)
            if std <= min_std:
                continue
            varied = True
            for key, value in at_turn:
                advantages[key][turn] = (value - mean) / (std + epsilon) if scale else value - mean
        if not varied:
            if failed is not None and failed.holds([r[0] for r in returns.values() if r]):
                result.groups_failed += 1
                result.advantages.update((key, [failed.advantage] * len(r)) for key, r in returns.items())
                result.failed_keys.update(returns)
            else:
                result.groups_zero_variance += 1
            continue
        result.groups_used += 1
        result.advantages.update(advantages)
    return result
