"""Group-relative advantages against hand-computed values, and the groups and rewards they leave out."""

from __future__ import annotations

import math

import pytest

from agentlightning.algorithm.grpo import group_advantages
from agentlightning.algorithm.grpo.learning.advantages import returns_to_go, turn_advantages


def test_advantages_are_rewards_centred_and_scaled_by_the_group_std() -> None:
    # rewards 1, 0, 0, 1: mean 0.5, population std 0.5 -> +-0.5 / (0.5 + 1e-4)
    result = group_advantages({"task": [("a", 1.0), ("b", 0.0), ("c", 0.0), ("d", 1.0)]})
    expected = 0.5 / (0.5 + 1e-4)
    assert result.advantages == pytest.approx({"a": expected, "b": -expected, "c": -expected, "d": expected})
    assert result.groups_used == 1


def test_uneven_group_advantages() -> None:
    # rewards 3, 0, 0: mean 1, std sqrt(2) -> (2, -1, -1) / (sqrt(2) + 1e-4)
    result = group_advantages({"t": [("a", 3.0), ("b", 0.0), ("c", 0.0)]})
    scale = math.sqrt(2) + 1e-4
    assert result.advantages["a"] == pytest.approx(2 / scale)
    assert result.advantages["b"] == pytest.approx(-1 / scale)


def test_unscaled_advantages_are_only_centred() -> None:
    result = group_advantages({"t": [("a", 0.75), ("b", 0.25)]}, scale=False)
    assert result.advantages == pytest.approx({"a": 0.25, "b": -0.25})


def test_groups_are_normalised_separately() -> None:
    result = group_advantages({"x": [("a", 1.0), ("b", 0.0)], "y": [("c", 10.0), ("d", 0.0)]})
    assert result.advantages["a"] == pytest.approx(result.advantages["c"], rel=1e-3)  # epsilon aside, equal


def test_zero_variance_group_is_skipped_and_counted() -> None:
    result = group_advantages({"same": [("a", 1.0), ("b", 1.0)], "mixed": [("c", 1.0), ("d", 0.0)]})
    assert set(result.advantages) == {"c", "d"}
    assert result.groups_zero_variance == 1
    assert result.groups_used == 1


def test_nan_and_infinite_rewards_are_dropped_and_counted() -> None:
    result = group_advantages({"t": [("a", float("nan")), ("b", float("inf")), ("c", 1.0), ("d", 0.0)]})
    assert set(result.advantages) == {"c", "d"}
    assert result.rewards_not_finite == 2


def test_group_with_one_usable_reward_is_skipped_as_too_small() -> None:
    result = group_advantages({"t": [("a", float("nan")), ("b", 1.0)]})
    assert result.advantages == {}
    assert result.groups_too_small == 1


# ------------------------------------------------------------------------------------------- turn-level credit
def test_returns_to_go_sum_the_rewards_of_a_call_and_every_later_call() -> None:
    assert returns_to_go([0.2, None, 1.0]) == pytest.approx([1.2, 1.0, 1.0])


def test_turn_advantages_compare_each_turn_with_the_same_turn_of_the_group() -> None:
    # rollout a: turn rewards 0.5 then 1 (returns 1.5, 1); b: 0 then 1 (returns 1, 1); c: 0 then 0 (0, 0)
    # turn 0: returns 1.5, 1, 0 -> mean 5/6, pstdev sqrt(((2/3)^2 + (1/6)^2 + (5/6)^2) / 3)
    # turn 1: returns 1, 1, 0 -> mean 2/3, pstdev sqrt(2)/3
    result = turn_advantages({"t": [("a", [0.5, 1.0]), ("b", [0.0, 1.0]), ("c", [0.0, 0.0])]})
    std0 = math.sqrt(((2 / 3) ** 2 + (1 / 6) ** 2 + (5 / 6) ** 2) / 3)
    std1 = math.sqrt(2) / 3
    assert result.advantages["a"] == pytest.approx([(2 / 3) / (std0 + 1e-4), (1 / 3) / (std1 + 1e-4)])
    assert result.advantages["b"] == pytest.approx([(1 / 6) / (std0 + 1e-4), (1 / 3) / (std1 + 1e-4)])
    assert result.advantages["c"] == pytest.approx([(-5 / 6) / (std0 + 1e-4), (-2 / 3) / (std1 + 1e-4)])
    assert result.groups_used == 1


def test_a_final_reward_alone_gives_every_turn_of_a_rollout_the_same_centred_return() -> None:
    # only the last call is rewarded: every turn's return is the final reward
    result = turn_advantages({"t": [("a", [None, 1.0]), ("b", [None, 0.0])]}, scale=False)
    assert result.advantages["a"] == pytest.approx([0.5, 0.5])
    assert result.advantages["b"] == pytest.approx([-0.5, -0.5])


def test_a_turn_only_one_rollout_reached_gets_no_advantage() -> None:
    # a made three calls, b two: turn 2 has a single return, nothing to compare it with
    result = turn_advantages({"t": [("a", [0.0, 0.0, 1.0]), ("b", [0.0, 0.0])]}, scale=False)
    assert result.advantages["a"] == pytest.approx([0.5, 0.5, 0.0])
    assert result.advantages["b"] == pytest.approx([-0.5, -0.5])


def test_a_group_whose_turn_returns_never_vary_is_skipped_and_counted() -> None:
    result = turn_advantages({"t": [("a", [0.0, 1.0]), ("b", [0.0, 1.0])], "u": [("c", [1.0])]})
    assert result.advantages == {}
    assert (result.groups_zero_variance, result.groups_too_small) == (1, 1)
