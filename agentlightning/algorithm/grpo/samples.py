"""From a step's rewarded rollouts to the samples the update trains on.

Rewards are normalised within each task's group (`group_advantages`); every selected LLM call of a kept rollout
becomes one `Sample` with that rollout's advantage and the call's exact token ids (responses cut at
`max_response_tokens`). What is left out is counted in the step's `SkipCounts`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from .advantages import group_advantages
from .config import GRPOConfig
from .loss import Sample
from .rollouts import RolloutData, SkipCounts

__all__ = ["build_samples"]


def build_samples(
    data: list[RolloutData], groups: list[int], indices: list[int], skips: SkipCounts, config: GRPOConfig
) -> tuple[list[Sample], list[float]]:
    """The samples of one step and the finite rewards seen; `groups[i]` is the position in `indices` of `data[i]`'s
    task, and `indices` holds the dataset indices (a sample's `group`)."""
    by_group: dict[Any, list[tuple[Any, float]]] = defaultdict(list)
    rewards: list[float] = []
    for position, (item, group) in enumerate(zip(data, groups, strict=True)):
        if item.reward is not None:
            by_group[group].append((position, item.reward))
            if math.isfinite(item.reward):
                rewards.append(item.reward)
    result = group_advantages(by_group, scale=config.scale_rewards, min_std=config.min_reward_std)
    skips.groups_zero_variance += result.groups_zero_variance
    skips.groups_too_small += result.groups_too_small
    samples: list[Sample] = []
    limit = config.max_response_tokens
    for position, advantage in result.advantages.items():
        item = data[position]  # type: ignore[index]
        for call in item.calls:
            response = [int(t) for t in call.response["token_ids"]]
            if len(response) > limit:
                skips.responses_truncated += 1
                response = response[:limit]
            samples.append(
                Sample(
                    prompt_ids=[int(t) for t in call.prompt["token_ids"]],
                    response_ids=response,
                    advantage=advantage,
                    rollout_id=item.rollout.rollout_id,
                    group=str(indices[groups[position]]),  # type: ignore[index]
                )
            )
    return samples, rewards
