"""From a step's rewarded rollouts to the samples the update trains on.

Rewards are compared within each task's group: by default every LLM call of a rollout gets its rollout's advantage
(`group_advantages` on the final reward); with `credit="turn"` each call gets its own, from its step reward and
the outcome on the final call (`agentlightning.adapter.rewards`, then `turn_advantages`). The calls of a rollout are then stitched into conversations by their
token ids (`agentlightning.adapter.trajectory`): with `aggregation="trajectory"` (the default) a conversation is one
sample whose loss mask covers only the model's own tokens; with `aggregation="transition"`, or where a call did not
extend its conversation exactly (drift, counted), each call is a sample. Responses longer than
`max_response_tokens` are cut (counted), and a conversation holding one is trained call by call.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from agentlightning.adapter.trajectory import StitchedSequence, call_ids, stitch_calls

from .advantages import group_advantages, turn_advantages
from .config import GRPOConfig
from .loss import Sample
from .rollouts import RolloutData, SkipCounts

__all__ = ["DriftCounts", "StepSamples", "build_samples", "call_ids"]


@dataclass
class DriftCounts:
    """How a step's (or a run's) calls joined into conversations (see `agentlightning.adapter.trajectory`)."""

    rollouts: int = 0  # rollouts with at least one call
    calls: int = 0
    continuations: int = 0  # calls that continued an earlier conversation of their rollout
    drifted: int = 0  # continuations whose prompt did not extend the conversation's ids exactly
    rollouts_drifted: int = 0

    @property
    def rate(self) -> float:
        """Drifted calls per continuation (0.0 when nothing continued)."""
        return self.drifted / self.continuations if self.continuations else 0.0

    def add(self, other: DriftCounts) -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "rate": round(self.rate, 4)}


@dataclass
class StepSamples:
    """What one step trains on, and what the step's rollouts looked like."""

    samples: list[Sample] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)  # the finite final rewards seen
    drift: DriftCounts = field(default_factory=DriftCounts)
    rollout_drift: dict[str, float] = field(default_factory=dict)  # drift rate of each rollout that drifted
    informative_groups: int = 0  # groups whose rewards varied (they produced the samples)
    transition_tokens: int = 0  # tokens one sample per call would process for the same rollouts (for comparison)


def build_samples(
    data: list[RolloutData], groups: list[int], indices: list[int], skips: SkipCounts, config: GRPOConfig
) -> StepSamples:
    """The samples of one step; `groups[i]` is the position in `indices` of `data[i]`'s task, and `indices` holds the
    dataset indices (a sample's `group`)."""
    step = StepSamples()
    stitched: dict[int, Any] = {}
    for position, item in enumerate(data):
        if item.reward is not None and math.isfinite(item.reward):
            step.rewards.append(item.reward)
        if not item.calls:
            continue
        report = stitch_calls([call_ids(call) for call in item.calls])
        stitched[position] = report
        step.drift.rollouts += 1
        step.drift.calls += report.calls
        step.drift.continuations += report.continuations
        step.drift.drifted += report.drifted
        if report.drifted:
            step.drift.rollouts_drifted += 1
            step.rollout_drift[item.rollout.rollout_id] = round(report.drift_rate, 4)

    advantages = _call_advantages(data, groups, skips, config, step)
    for position, per_call in advantages.items():
        item = data[position]
        group = str(indices[groups[position]])
        step.transition_tokens += sum(len(c.prompt["token_ids"]) + len(c.response["token_ids"]) for c in item.calls)
        for sequence in stitched[position].sequences:
            step.samples.extend(_sequence_samples(item, sequence, per_call, group, skips, config))
    return step


def _call_advantages(
    data: list[RolloutData], groups: list[int], skips: SkipCounts, config: GRPOConfig, step: StepSamples
) -> dict[int, list[float]]:
    """The advantage of each call of each rollout that has calls and belongs to an informative group."""
    if config.credit == "turn":
        by_group_turns: dict[Hashable, list[tuple[Hashable, Sequence[Optional[float]]]]] = defaultdict(list)
        for position, (item, group) in enumerate(zip(data, groups, strict=True)):
            if item.reward is None or not math.isfinite(item.reward):
                continue
            by_group_turns[group].append((position, _turn_rewards(item)))
        turns = turn_advantages(by_group_turns, scale=config.scale_rewards, min_std=config.min_reward_std)
        skips.groups_zero_variance += turns.groups_zero_variance
        skips.groups_too_small += turns.groups_too_small
        step.informative_groups = turns.groups_used
        return {int(k): v for k, v in turns.advantages.items() if data[int(k)].calls}  # type: ignore[call-overload]
    by_group: dict[Hashable, list[tuple[Hashable, float]]] = defaultdict(list)
    for position, (item, group) in enumerate(zip(data, groups, strict=True)):
        if item.reward is not None:
            by_group[group].append((position, item.reward))
    result = group_advantages(by_group, scale=config.scale_rewards, min_std=config.min_reward_std)
    skips.groups_zero_variance += result.groups_zero_variance
    skips.groups_too_small += result.groups_too_small
    step.informative_groups = result.groups_used
    return {
        int(k): [advantage] * len(data[int(k)].calls)  # type: ignore[call-overload]
        for k, advantage in result.advantages.items()
        if data[int(k)].calls  # type: ignore[call-overload]
    }


def _turn_rewards(item: RolloutData) -> list[Optional[float]]:
    """Each call's reward: its step reward, plus the outcome (`item.reward`) on the final call
    (`agentlightning.adapter.rewards`). Data built without that view: the triplets' rewards, the final reward on the
    last call when no call has one."""
    if item.rewards is not None:
        return item.rewards.with_outcome(item.reward).per_call()
    rewards: list[Optional[float]] = [
        call.reward if call.reward is not None and math.isfinite(call.reward) else None for call in item.calls
    ]
    if item.reward is not None and rewards and all(r is None for r in rewards):
        rewards[-1] = item.reward
    return rewards


def _sequence_samples(
    item: RolloutData,
    sequence: StitchedSequence,
    per_call: list[float],
    group: str,
    skips: SkipCounts,
    config: GRPOConfig,
) -> list[Sample]:
    limit = config.max_response_tokens
    too_long = any(end - start > limit for start, end in sequence.segments)
    rollout_id = item.rollout.rollout_id
    if config.aggregation == "trajectory" and not too_long:
        advantages = [per_call[call] for call in sequence.calls]
        uniform = all(a == advantages[0] for a in advantages)
        token_advantages: Optional[list[float]] = None
        if not uniform:
            token_advantages = [0.0] * len(sequence.response_ids)
            for (start, end), advantage in zip(sequence.segments, advantages, strict=True):
                token_advantages[start:end] = [advantage] * (end - start)
        single = len(sequence.calls) == 1
        return [
            Sample(
                prompt_ids=list(sequence.prompt_ids),
                response_ids=list(sequence.response_ids),
                advantage=advantages[0],
                rollout_id=rollout_id,
                group=group,
                loss_mask=None if single else list(sequence.loss_mask),
                token_advantages=token_advantages,
                calls=len(sequence.calls),
            )
        ]
    samples = []
    for call in sequence.calls:
        triplet = item.calls[call]
        response = [int(t) for t in triplet.response["token_ids"]]
        if len(response) > limit:
            skips.responses_truncated += 1
            response = response[:limit]
        samples.append(
            Sample(
                prompt_ids=[int(t) for t in triplet.prompt["token_ids"]],
                response_ids=response,
                advantage=per_call[call],
                rollout_id=rollout_id,
                group=group,
            )
        )
    return samples


def sample_tokens(samples: Sequence[Sample]) -> int:
    """Tokens a forward pass over `samples` processes (prompt and response, no padding)."""
    return sum(sample.length for sample in samples)
