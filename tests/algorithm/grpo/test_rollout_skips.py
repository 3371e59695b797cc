"""Rollouts that cannot be learned from are counted by reason, and never produce samples."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

from agentlightning.algorithm.grpo import GRPOConfig
from agentlightning.algorithm.grpo.learning.samples import build_samples
from agentlightning.algorithm.grpo.rollouts.reading import RolloutData, SkipCounts, count_skips
from agentlightning.types import Triplet


def _data(status: str, reward: Any, with_ids: bool = True) -> RolloutData:
    rollout: Any = SimpleNamespace(status=status, rollout_id=f"r-{status}-{reward}-{with_ids}")
    calls = [Triplet(prompt={"token_ids": [1, 2]}, response={"token_ids": [3]}, reward=None)] if with_ids else []
    return RolloutData(rollout, reward, calls)


def test_each_reason_is_counted_once() -> None:
    counts = count_skips(
        [
            _data("failed", None, with_ids=False),
            _data("succeeded", None),
            _data("succeeded", math.inf),
            _data("succeeded", 1.0, with_ids=False),
            _data("succeeded", 1.0),
        ]
    )
    assert counts == SkipCounts(
        rollouts_failed=1, rollouts_without_reward=1, rollouts_reward_not_finite=1, rollouts_without_token_ids=1
    )


def test_non_finite_rewards_never_become_samples_and_do_not_poison_the_group() -> None:
    config = GRPOConfig(group_size=2, tasks_per_step=1)
    data = [_data("succeeded", math.nan), _data("succeeded", 1.0), _data("succeeded", 0.0)]
    skips = SkipCounts()
    built = build_samples(data, [0, 0, 0], [5], skips, config)
    samples, rewards = built.samples, built.rewards
    assert sorted(s.advantage > 0 for s in samples) == [False, True]
    assert all(math.isfinite(s.advantage) for s in samples)
    assert rewards == [1.0, 0.0]


def test_rollout_without_token_ids_keeps_its_reward_in_the_group_but_is_not_trained_on() -> None:
    config = GRPOConfig(group_size=2, tasks_per_step=1)
    data = [_data("succeeded", 1.0, with_ids=False), _data("succeeded", 0.0)]
    samples = build_samples(data, [0, 0], [0], SkipCounts(), config).samples
    assert len(samples) == 1 and samples[0].advantage < 0


def test_overlong_responses_are_truncated_and_counted() -> None:
    config = GRPOConfig(group_size=2, tasks_per_step=1, max_response_tokens=2)
    long_call = Triplet(prompt={"token_ids": [1]}, response={"token_ids": [5, 6, 7, 8]}, reward=None)
    first = _data("succeeded", 1.0)
    first.calls = [long_call]
    skips = SkipCounts()
    samples = build_samples([first, _data("succeeded", 0.0)], [0, 0], [0], skips, config).samples
    assert samples[0].response_ids == [5, 6] and skips.responses_truncated == 1
