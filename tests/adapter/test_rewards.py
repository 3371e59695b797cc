"""The training view of a rollout's rewards (`adapter.rewards`): the outcome always on the final call, step rewards
on the call they follow (by time when every span has one, else by sequence id)."""

from __future__ import annotations

from typing import Optional

from agentlightning.adapter.rewards import RolloutRewards, rollout_rewards
from agentlightning.emitter.reward import find_final_reward
from agentlightning.types import Span


def _span(name: str, sequence_id: int, start: Optional[float], end: Optional[float], **attributes: float) -> Span:
    return Span.from_attributes(
        attributes=dict(attributes),
        rollout_id="ro",
        attempt_id="at",
        sequence_id=sequence_id,
        name=name,
        start_time=start,
        end_time=end,
    )


def call(sequence_id: int, start: Optional[float] = None, end: Optional[float] = None) -> Span:
    return _span("openai.chat.completion", sequence_id, start, end)


def reward(sequence_id: int, value: float, at: Optional[float] = None) -> Span:
    return _span("agentlightning.reward", sequence_id, at, at, reward=value)


def test_a_step_reward_after_every_call_and_then_the_outcome_puts_the_outcome_on_the_final_call() -> None:
    calls = [call(1, 0, 1), call(3, 2, 3), call(5, 4, 5)]
    rewards = [reward(2, 0.1, 1.5), reward(4, 0.2, 3.5), reward(6, 0.3, 5.5), reward(7, 1.0, 6.0)]
    view = rollout_rewards(calls, calls + rewards)
    assert view == RolloutRewards((0.1, 0.2, 0.3), 1.0)
    assert view.per_call() == [0.1, 0.2, 1.3]


def test_a_step_reward_on_call_three_then_the_outcome_puts_the_outcome_on_the_final_call_not_call_two() -> None:
    calls = [call(1, 0, 1), call(2, 2, 3), call(3, 4, 5)]
    rewards = [reward(4, 0.5, 5.5), reward(5, 1.0, 6.0)]
    assert rollout_rewards(calls, calls + rewards).per_call() == [None, None, 1.5]


def test_a_single_reward_is_the_outcome_and_no_step_reward() -> None:
    calls = [call(1, 0, 1), call(2, 2, 3)]
    assert rollout_rewards(calls, [*calls, reward(3, 0.7, 4.0)]) == RolloutRewards((None, None), 0.7)


def test_with_times_a_step_reward_goes_to_the_call_that_ended_before_it_whatever_its_sequence_id() -> None:
    # the proxy numbered both calls (1, 2) before the runner wrote its rewards (3, 4)
    calls = [call(1, 10.0, 11.0), call(2, 12.0, 13.0)]
    view = rollout_rewards(calls, [*calls, reward(3, 0.5, 11.5), reward(4, 1.0, 13.5)])
    assert view.per_call() == [0.5, 1.0]


def test_without_times_the_sequence_order_decides() -> None:
    calls = [call(1), call(3)]
    view = rollout_rewards(calls, [calls[0], reward(2, 0.5), calls[1], reward(4, 1.0)])
    assert view == RolloutRewards((0.5, None), 1.0)


def test_step_rewards_that_follow_the_same_call_add_up() -> None:
    calls = [call(1, 0, 1), call(4, 5, 6)]
    view = rollout_rewards(calls, [*calls, reward(2, 0.25, 2), reward(3, 0.5, 3), reward(5, 1.0, 7)])
    assert view.steps == (0.75, None)


def test_a_step_reward_before_the_first_call_counts_with_the_first_call() -> None:
    calls = [call(2, 1, 2), call(3, 3, 4)]
    view = rollout_rewards(calls, [reward(1, 0.2, 0.5), *calls, reward(4, 1.0, 5)])
    assert view.per_call() == [0.2, 1.0]


def test_a_failed_rollout_has_only_step_rewards_and_takes_the_outcome_it_is_given() -> None:
    calls = [call(1, 0, 1), call(3, 2, 3)]
    view = rollout_rewards(calls, [*calls, reward(2, 0.1, 1.5), reward(4, 0.2, 3.5)], failed=True)
    assert view == RolloutRewards((0.1, 0.2), None)
    assert view.with_outcome(-1.0).per_call() == [0.1, -0.8]


def test_calls_without_spans_get_no_step_reward_but_the_outcome() -> None:
    view = rollout_rewards([None, None], [reward(1, 0.3, 1), reward(2, 1.0, 2)])
    assert view.per_call() == [None, 1.0]


def test_a_rollout_without_calls_keeps_its_outcome() -> None:
    assert rollout_rewards([], [reward(1, 0.3), reward(2, 0.9)]) == RolloutRewards((), 0.9)


def test_the_outcome_is_the_last_reward_span_in_store_order_as_find_final_reward_reads_it() -> None:
    calls = [call(1, 0, 1)]
    spans = [*calls, reward(2, 0.4, 2), reward(3, 1.0, 3)]
    assert rollout_rewards(calls, spans).outcome == find_final_reward(spans) == 1.0
