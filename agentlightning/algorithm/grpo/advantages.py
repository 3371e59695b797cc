"""Group-relative advantages: each rollout's reward compared with the other rollouts of the same task.

Pure Python (no torch) so the rules are easy to test: rewards that are not finite numbers are dropped and counted
before the statistics; a group whose rewards do not vary carries no learning signal and is skipped and counted.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["GroupAdvantages", "group_advantages"]


@dataclass
class GroupAdvantages:
    """The advantage of every kept rollout (by its key) and what was left out."""

    advantages: dict[Hashable, float] = field(default_factory=dict)
    groups_used: int = 0
    groups_zero_variance: int = 0
    groups_too_small: int = 0
    rewards_not_finite: int = 0


def group_advantages(
    groups: Mapping[Hashable, Sequence[tuple[Hashable, float]]],
    *,
    scale: bool = True,
    min_std: float = 1e-6,
    epsilon: float = 1e-4,
) -> GroupAdvantages:
    """Advantages per rollout: `(reward - group mean) / (group std + epsilon)` (std: population, `scale=True`).

    `groups` maps a group key (the task) to `(rollout key, reward)` pairs. NaN/infinite rewards are dropped and
    counted; a group with fewer than two usable rewards, or whose standard deviation is at most `min_std`, is
    skipped and counted.
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
            result.groups_zero_variance += 1
            continue
        result.groups_used += 1
        for key, reward in usable:
            centred = reward - mean
            result.advantages[key] = centred / (std + epsilon) if scale else centred
    return result
