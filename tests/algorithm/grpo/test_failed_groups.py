"""Groups that failed throughout, trained as failures (`failed_group_reward`, `failed_group_advantage`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentlightning.algorithm.grpo import GRPO
from agentlightning.algorithm.grpo.config import GRPOConfig
from agentlightning.algorithm.grpo.learning.advantages import FailedGroups, group_advantages, turn_advantages
from agentlightning.algorithm.grpo.learning.samples import build_samples
from agentlightning.algorithm.grpo.reporting.health import step_health
from agentlightning.algorithm.grpo.rollouts.reading import RolloutData, SkipCounts, read_rollouts
from agentlightning.store import InMemoryLightningStore

from ..stored_rollouts import stored_rollout
from .test_call_checks import _rollout as two_call_rollout

FAILED = FailedGroups(reward=0.0, advantage=-0.5)


@pytest.fixture
async def store() -> AsyncIterator[InMemoryLightningStore]:
    instance = InMemoryLightningStore()
    yield instance
    await instance.close()


# ---------------------------------------------------------------------------------------------- the advantages
def test_without_the_option_a_group_that_failed_throughout_is_skipped_as_zero_variance() -> None:
    result = group_advantages({"t": [("a", 0.0), ("b", 0.0)]})
    assert result.advantages == {} and (result.groups_zero_variance, result.groups_failed) == (1, 0)


def test_a_group_that_failed_throughout_gives_every_rollout_the_failed_advantage() -> None:
    result = group_advantages({"t": [("a", 0.0), ("b", 0.0), ("c", 0.0)]}, failed=FAILED)
    assert result.advantages == {"a": -0.5, "b": -0.5, "c": -0.5}
    assert (result.groups_failed, result.groups_zero_variance, result.groups_used) == (1, 0, 0)


def test_a_group_that_succeeded_throughout_is_still_skipped() -> None:
    result = group_advantages({"t": [("a", 1.0), ("b", 1.0)]}, failed=FAILED)
    assert result.advantages == {} and (result.groups_zero_variance, result.groups_failed) == (1, 0)


def test_equal_rewards_above_the_failed_reward_are_not_failures() -> None:
    result = group_advantages({"t": [("a", 0.2), ("b", 0.2)]}, failed=FailedGroups(reward=0.1, advantage=-1.0))
    assert result.advantages == {} and result.groups_zero_variance == 1


def test_rewards_below_the_failed_reward_count_as_failures() -> None:
    result = group_advantages({"t": [("a", -1.0), ("b", -1.0)]}, failed=FAILED)
    assert result.advantages == {"a": -0.5, "b": -0.5}


def test_a_group_whose_rewards_vary_keeps_its_relative_advantages() -> None:
    plain = group_advantages({"t": [("a", 0.0), ("b", 1.0)]})
    with_option = group_advantages({"t": [("a", 0.0), ("b", 1.0)]}, failed=FAILED)
    assert with_option.advantages == plain.advantages and with_option.groups_used == 1


def test_a_failed_group_needs_two_usable_rewards_like_any_other() -> None:
    result = group_advantages({"t": [("a", 0.0), ("b", float("nan"))]}, failed=FAILED)
    assert result.advantages == {} and (result.groups_too_small, result.groups_failed) == (1, 0)


def test_turn_credit_gives_every_call_of_a_failed_group_the_failed_advantage() -> None:
    result = turn_advantages({"t": [("a", [0.0, 0.0]), ("b", [0.0])]}, failed=FAILED)
    assert result.advantages == {"a": [-0.5, -0.5], "b": [-0.5]}
    assert (result.groups_failed, result.groups_zero_variance) == (1, 0)


def test_turn_credit_does_not_call_a_group_with_equal_positive_returns_failed() -> None:
    result = turn_advantages({"t": [("a", [0.0, 1.0]), ("b", [0.0, 1.0])]}, failed=FAILED)
    assert result.advantages == {} and result.groups_zero_variance == 1


# ------------------------------------------------------------------------------------------------- the settings
def test_the_settings_default_to_off() -> None:
    config = GRPOConfig()
    assert (config.failed_group_reward, config.failed_group_advantage) == (None, -0.5)


@pytest.mark.parametrize("value", [0.0, 0.5, float("nan"), float("-inf"), "-1", True])
def test_a_failed_group_advantage_that_is_not_a_negative_number_is_refused(value: Any) -> None:
    with pytest.raises(ValueError, match="failed_group_advantage"):
        GRPOConfig(failed_group_advantage=value)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "0"])
def test_a_failed_group_reward_that_is_not_a_finite_number_is_refused(value: Any) -> None:
    with pytest.raises(ValueError, match="failed_group_reward"):
        GRPOConfig(failed_group_reward=value)


def test_grpo_takes_the_settings_by_name_and_reports_them() -> None:
    algorithm = GRPO(failed_group_reward=0.0, failed_group_advantage=-0.25)
    settings = algorithm.config.to_dict()
    assert (settings["failed_group_reward"], settings["failed_group_advantage"]) == (0.0, -0.25)


# ------------------------------------------------------------------------------------------- the step's samples
async def _rollouts(store: InMemoryLightningStore, rewards: list[float]) -> list[RolloutData]:
    rollouts = [
        await stored_rollout(store, [("call", [10 + k, 1], [20 + k]), ("reward", reward)])
        for k, reward in enumerate(rewards)
    ]
    return await read_rollouts(store, rollouts, None, agent_match=None)


async def test_a_step_trains_its_failed_groups_and_counts_them(store: InMemoryLightningStore) -> None:
    data = await _rollouts(store, [0.0, 0.0, 1.0, 0.0, 1.0, 1.0])  # three tasks of two: failed, mixed, succeeded
    config = GRPOConfig(group_size=2, tasks_per_step=3, aggregation="transition", failed_group_reward=0.0)
    skips = SkipCounts()
    built = build_samples(data, [0, 0, 1, 1, 2, 2], [7, 8, 9], skips, config)
    advantages = {sample.group: [] for sample in built.samples}
    for sample in built.samples:
        advantages[sample.group].append(round(sample.advantage, 3))
    assert advantages == {"7": [-0.5, -0.5], "8": [1.0, -1.0]}
    assert (built.informative_groups, built.failed_groups, skips.groups_zero_variance) == (1, 1, 1)


async def test_without_the_option_a_step_skips_its_failed_groups(store: InMemoryLightningStore) -> None:
    data = await _rollouts(store, [0.0, 0.0, 1.0, 0.0])
    config = GRPOConfig(group_size=2, tasks_per_step=2, aggregation="transition")
    built = build_samples(data, [0, 0, 1, 1], [7, 8], SkipCounts(), config)
    assert {sample.group for sample in built.samples} == {"8"} and built.failed_groups == 0


def test_a_failed_groups_truncated_calls_are_pushed_down_with_the_rest_of_it() -> None:
    cut = {"finish_reason": "length"}  # masked by default: left out of a varying group's loss
    data = [two_call_rollout("a", 0.0, 40, first=cut), two_call_rollout("b", 0.0, 41)]
    config = GRPOConfig(group_size=2, tasks_per_step=1, failed_group_reward=0.0)
    skips = SkipCounts()
    built = build_samples(data, [0, 0], [7], skips, config)
    by_rollout = {sample.rollout_id: sample for sample in built.samples}
    assert by_rollout["a"].advantage == -0.5 and by_rollout["a"].loss_mask == [1, 1, 0, 0, 1]
    assert skips.calls_hit_length_limit == 1 and built.failed_groups == 1  # still counted as cut


def test_a_varying_groups_truncated_calls_stay_masked_with_the_option() -> None:
    cut = {"finish_reason": "length"}
    data = [two_call_rollout("a", 0.0, 40, first=cut), two_call_rollout("b", 1.0, 41)]
    config = GRPOConfig(group_size=2, tasks_per_step=1, failed_group_reward=0.0)
    built = build_samples(data, [0, 0], [7], SkipCounts(), config)
    assert {s.rollout_id: s.loss_mask for s in built.samples}["a"] == [0, 0, 0, 0, 1]


def test_the_health_record_shows_the_share_of_failed_groups() -> None:
    entry = {"step": 1, "tasks": 4, "informative_groups": 1, "failed_groups": 2, "skips": {"groups_zero_variance": 1}}
    record = step_health(entry, {}, [])
    assert (record["informative_share"], record["failed_group_share"], record["zero_variance_share"]) == (
        0.25,
        0.5,
        0.25,
    )
