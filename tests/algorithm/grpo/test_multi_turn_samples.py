"""Multi-turn samples: a rollout's calls as one masked sequence (trajectory) or one sample per call (transition),
drift counted, turn-level credit, and the same loss either way."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Optional

import pytest

from agentlightning.algorithm.grpo.config import GRPOConfig
from agentlightning.algorithm.grpo.learning.samples import build_samples
from agentlightning.algorithm.grpo.rollouts.reading import RolloutData, SkipCounts
from agentlightning.types import Triplet

SYSTEM = [1, 2, 3]


def _call(prompt: list[int], response: list[int], reward: Optional[float] = None) -> Triplet:
    return Triplet(prompt={"token_ids": prompt}, response={"token_ids": response}, reward=reward)


def _tool_rollout(name: str, reward: float, answer: int, turn_rewards: tuple[Any, Any] = (None, None)) -> RolloutData:
    """Two calls: a tool call (ids 20 21), the tool's result (30 31), then the answer."""
    first = _call([*SYSTEM, 10], [20, 21], turn_rewards[0])
    second = _call([*SYSTEM, 10, 20, 21, 30, 31], [answer], turn_rewards[1])
    rollout: Any = SimpleNamespace(status="succeeded", rollout_id=name)
    return RolloutData(rollout, reward, [first, second])


def _build(data: list[RolloutData], **settings: Any) -> Any:
    config = GRPOConfig(group_size=2, tasks_per_step=1, **settings)
    return build_samples(data, [0] * len(data), [7], SkipCounts(), config)


def test_trajectory_aggregation_makes_one_masked_sample_per_rollout() -> None:
    built = _build([_tool_rollout("a", 1.0, 40), _tool_rollout("b", 0.0, 41)])
    assert len(built.samples) == 2
    sample = built.samples[0]
    assert sample.prompt_ids == [*SYSTEM, 10]
    assert sample.response_ids == [20, 21, 30, 31, 40]
    assert sample.loss_mask == [1, 1, 0, 0, 1]  # the tool's result is never trained on
    assert sample.calls == 2 and sample.group == "7"
    assert built.samples[0].advantage > 0 > built.samples[1].advantage
    assert built.drift.to_dict() == {
        "rollouts": 2,
        "calls": 4,
        "continuations": 2,
        "drifted": 0,
        "rollouts_drifted": 0,
        "lineages": 2,
        "generated_tokens": 6,
        "trained_tokens": 6,
        "rate": 0.0,
        "lineages_per_rollout": 1.0,
        "trained_share": 1.0,
    }


def test_transition_aggregation_makes_one_sample_per_call() -> None:
    built = _build([_tool_rollout("a", 1.0, 40), _tool_rollout("b", 0.0, 41)], aggregation="transition")
    assert [(s.prompt_ids, s.response_ids) for s in built.samples[:2]] == [
        ([*SYSTEM, 10], [20, 21]),
        ([*SYSTEM, 10, 20, 21, 30, 31], [40]),
    ]
    assert all(s.loss_mask is None for s in built.samples)


def test_trajectory_samples_process_fewer_tokens_than_transitions() -> None:
    data = [_tool_rollout("a", 1.0, 40), _tool_rollout("b", 0.0, 41)]
    trajectory = sum(s.length for s in _build(data).samples)
    transition = sum(s.length for s in _build(data, aggregation="transition").samples)
    assert (trajectory, transition) == (18, 30)  # per rollout: 4 + 5 against (4 + 2) + (8 + 1)
    assert _build(data).transition_tokens == 30


def test_a_drifted_call_is_trained_alone_and_counted_for_its_rollout() -> None:
    drifted = _tool_rollout("a", 1.0, 40)
    drifted.calls[1] = _call([*SYSTEM, 10, 22, 30, 31], [40])  # the history came back retokenized (22)
    built = _build([drifted, _tool_rollout("b", 0.0, 41)])
    assert [s.calls for s in built.samples] == [1, 1, 2]
    assert built.drift.drifted == 1 and built.drift.rollouts_drifted == 1
    assert built.drift.rate == pytest.approx(0.5)
    assert built.rollout_drift == {"a": 1.0}


def test_drift_is_counted_even_for_groups_without_signal() -> None:
    drifted = _tool_rollout("a", 1.0, 40)
    drifted.calls[1] = _call([*SYSTEM, 10, 22, 30, 31], [40])
    built = _build([drifted, _tool_rollout("b", 1.0, 41)])
    assert built.samples == [] and built.drift.drifted == 1


def test_a_response_over_the_limit_is_cut_and_its_conversation_trained_call_by_call() -> None:
    skips = SkipCounts()
    config = GRPOConfig(group_size=2, tasks_per_step=1, max_response_tokens=1)
    built = build_samples([_tool_rollout("a", 1.0, 40), _tool_rollout("b", 0.0, 41)], [0, 0], [0], skips, config)
    assert [s.response_ids for s in built.samples[:2]] == [[20], [40]]
    assert skips.responses_truncated == 2


def test_final_credit_gives_every_turn_the_rollouts_advantage() -> None:
    built = _build([_tool_rollout("a", 1.0, 40, (0.5, 1.0)), _tool_rollout("b", 0.0, 41)])
    assert built.samples[0].token_advantages is None
    assert built.samples[0].advantage == pytest.approx(0.5 / (0.5 + 1e-4))


def test_turn_credit_gives_each_turn_its_own_advantage() -> None:
    # c: turn rewards 0 and 1 (returns 1, 1); d: 1 and 0 (returns 1, 0). Unscaled: turn 0 returns are equal (no
    # advantage), turn 1 mean 0.5 -> +-0.5: the same outcome, but d's answer turn earned nothing.
    c = _tool_rollout("c", 1.0, 40, (0.0, 1.0))
    d = _tool_rollout("d", 1.0, 41, (1.0, 0.0))  # same outcome, but credit came at a different turn
    built = _build([c, d], credit="turn", scale_rewards=False)
    assert built.samples[0].token_advantages == pytest.approx([0.0, 0.0, 0.0, 0.0, 0.5])
    assert built.samples[1].token_advantages == pytest.approx([0.0, 0.0, 0.0, 0.0, -0.5])


def test_turn_credit_with_equal_advantages_on_every_turn_keeps_one_advantage() -> None:
    # a: returns 1.5, 1; b: 0.5, 0. Unscaled: turn 0 mean 1 -> +-0.5, turn 1 mean 0.5 -> +-0.5
    built = _build(
        [_tool_rollout("a", 1.0, 40, (0.5, 1.0)), _tool_rollout("b", 0.0, 41, (0.5, 0.0))],
        credit="turn",
        scale_rewards=False,
    )
    assert [(s.advantage, s.token_advantages) for s in built.samples] == [(0.5, None), (-0.5, None)]


def test_turn_credit_falls_back_to_the_final_reward_on_the_last_call() -> None:
    built = _build([_tool_rollout("a", 1.0, 40), _tool_rollout("b", 0.0, 41)], credit="turn", scale_rewards=False)
    assert built.samples[0].advantage == pytest.approx(0.5)
    assert built.samples[0].token_advantages is None  # every turn has the same advantage


# ------------------------------------------------------------------------------------------ the loss both ways
torch = pytest.importorskip("torch")


def _loss(samples: list[Any], model: Any) -> float:
    from agentlightning.algorithm.grpo.learning.loss import clipped_policy_loss, make_batch, sequence_log_probs

    batch = make_batch(samples, pad_token_id=0)
    with torch.no_grad():
        log_probs = sequence_log_probs(model, batch)
    total = float(batch.response_mask.sum())
    loss, _ = clipped_policy_loss(
        log_probs, log_probs, batch.advantages, batch.response_mask, clip_epsilon=0.2, token_normaliser=total
    )
    return float(loss)


def test_trajectory_and_transition_samples_give_the_same_token_loss() -> None:
    from agentlightning.inference.tiny import build_tiny_engine

    model = build_tiny_engine(seed=0).model.float().eval()
    data = [_tool_rollout("a", 1.0, 40, (0.5, 1.0)), _tool_rollout("b", 0.0, 41, (0.0, 0.0))]
    for credit in ("final", "turn"):
        trajectory = _build(data, credit=credit).samples
        transition = _build(data, credit=credit, aggregation="transition").samples
        assert len(trajectory) == 2 and len(transition) == 4
        assert _loss(trajectory, model) == pytest.approx(_loss(transition, model), rel=1e-5, abs=1e-6)
