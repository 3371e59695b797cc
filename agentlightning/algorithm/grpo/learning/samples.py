"""From a step's rewarded rollouts to the samples the update trains on.

Rewards are compared within each task's group: by default every LLM call of a rollout gets its rollout's advantage
(`group_advantages` on the final reward); with `credit="turn"` each call gets its own, from its step reward and
the outcome on the final call (`agentlightning.adapter.rewards`, then `turn_advantages`). The calls of a rollout are then stitched into conversations by their
token ids (`agentlightning.adapter.trajectory`): with `aggregation="trajectory"` (the default) a conversation is one
sample whose loss mask covers only the model's own tokens; with `aggregation="transition"`, or where a call did not
extend its conversation exactly (drift, counted), each call is a sample. Responses longer than
`max_response_tokens` are cut (counted), and a conversation holding one is trained call by call. A rollout whose
history is not append-only (an agent that compacts its context, a sub-agent with a fresh conversation) gives several
conversations, its *lineages*; `DriftCounts` counts them, the calls that fitted none, and the share of the model's
generated tokens that ended up in the loss.

Each call is first checked against what the proxy recorded of it (`rollouts.call_checks`): calls sampled otherwise than
configured, served by another agent's adapter, or (with `truncated="mask"`) stopped on the length limit keep their
place in their conversation but leave the loss (counted in `SkipCounts`); with `truncated="failure_reward"` a
rollout with a truncated call is rewarded `truncation_reward`. A group that failed throughout (`failed_group_reward`)
trains its truncated calls too, with its negative advantage: masked, they would be the one thing the push down
spares, and a policy pushed off its short wrong answers drifts into ever longer cut ones. The sampler's recorded log-probs of each call follow
its tokens into the sample (`Sample.sampler_log_probs`, None on the tokens the model did not generate).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Optional

from agentlightning.adapter.trajectory import StitchedSequence, call_ids, stitch_calls

from ..config import GRPOConfig, RewardSettings
from ..rollouts.call_checks import CallVerdict, ServedBy, judge_call
from ..rollouts.proxy_calls import ProxyCall
from ..rollouts.reading import RolloutData, SkipCounts
from .advantages import FailedGroups, group_advantages, turn_advantages
from .loss import Sample

__all__ = ["DriftCounts", "StepSamples", "build_samples", "call_ids"]


@dataclass
class DriftCounts:
    """How a step's (or a run's) calls joined into conversations (see `agentlightning.adapter.trajectory`): the
    lineages they formed, the calls that fitted none (drifted), and the share of the model's tokens trained."""

    rollouts: int = 0  # rollouts with at least one call
    calls: int = 0
    continuations: int = 0  # calls that continued an earlier conversation of their rollout
    drifted: int = 0  # continuations whose prompt did not extend the conversation's ids exactly (fit no lineage)
    rollouts_drifted: int = 0
    lineages: int = 0  # root conversations of those rollouts (each trained as one multi-turn sample)
    generated_tokens: int = 0  # tokens the model generated in the rollouts the step trained on (its trained groups)
    trained_tokens: int = 0  # of those, the tokens in the loss of a sample (after masking and cuts)

    @property
    def rate(self) -> float:
        """Drifted calls per continuation (0.0 when nothing continued)."""
        return self.drifted / self.continuations if self.continuations else 0.0

    @property
    def lineages_per_rollout(self) -> Optional[float]:
        """Lineages per rollout with calls (None when no rollout had one)."""
        return self.lineages / self.rollouts if self.rollouts else None

    @property
    def trained_share(self) -> Optional[float]:
        """Generated tokens trained per generated token of the rollouts trained on (None when none was)."""
        return self.trained_tokens / self.generated_tokens if self.generated_tokens else None

    def add(self, other: DriftCounts) -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)

    def to_dict(self) -> dict[str, Any]:
        per_rollout, share = self.lineages_per_rollout, self.trained_share
        return {
            **asdict(self),
            "rate": round(self.rate, 4),
            "lineages_per_rollout": None if per_rollout is None else round(per_rollout, 4),
            "trained_share": None if share is None else round(share, 4),
        }

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> DriftCounts:
        """Counts saved with `to_dict` (a checkpoint's; counts it lacks are 0, derived figures are recomputed)."""
        return cls(**{f.name: int(values.get(f.name, 0)) for f in fields(cls)})

    def lineage_summary(self) -> dict[str, Any]:
        """The per-run lineage figures: lineages per rollout, calls that fitted no lineage (the drifted ones) and
        the share of the model's generated tokens that were trained."""
        return {
            "lineages_per_rollout": self.to_dict()["lineages_per_rollout"],
            "calls_fitting_no_lineage": self.drifted,
            "generated_tokens": self.generated_tokens,
            "trained_tokens": self.trained_tokens,
            "trained_share": self.to_dict()["trained_share"],
        }


@dataclass
class StepSamples:
    """What one step trains on, and what the step's rollouts looked like."""

    samples: list[Sample] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)  # the finite final rewards seen
    drift: DriftCounts = field(default_factory=DriftCounts)
    rollout_drift: dict[str, float] = field(default_factory=dict)  # drift rate of each rollout that drifted
    informative_groups: int = 0  # groups whose rewards varied (they, and any failed groups, produced the samples)
    failed_groups: int = 0  # groups that failed throughout, trained with `failed_group_advantage`
    transition_tokens: int = 0  # tokens one sample per call would process for the same rollouts (for comparison)
    calls_recorded: int = 0  # calls with a proxy record (checked for sampling, adapter and truncation)
    calls_hit_length_limit: int = 0  # of those, calls that stopped on the length limit

    def add(self, other: StepSamples) -> None:
        """Count `other` (samples of other groups of the same step, or another agent's) into this one."""
        self.samples.extend(other.samples)
        self.rewards.extend(other.rewards)
        self.drift.add(other.drift)
        self.rollout_drift.update(other.rollout_drift)
        self.informative_groups += other.informative_groups
        self.failed_groups += other.failed_groups
        self.transition_tokens += other.transition_tokens
        self.calls_recorded += other.calls_recorded
        self.calls_hit_length_limit += other.calls_hit_length_limit

    @property
    def truncation_rate(self) -> float:
        """Calls that stopped on the length limit per call with a proxy record (0.0 when none had one)."""
        return self.calls_hit_length_limit / self.calls_recorded if self.calls_recorded else 0.0


def build_samples(
    data: list[RolloutData],
    groups: list[int],
    indices: list[int],
    skips: SkipCounts,
    config: GRPOConfig,
    *,
    agent: Optional[str] = None,
    served: Optional[ServedBy] = None,
) -> StepSamples:
    """The samples of one step; `groups[i]` is the position in `indices` of `data[i]`'s task, and `indices` holds the
    dataset indices (a sample's `group`). With one adapter per agent, `agent` is the adapter whose calls `data` holds
    and `served` what may serve them."""
    step = StepSamples()
    stitched: dict[int, Any] = {}
    checked: dict[int, tuple[list[Optional[ProxyCall]], list[CallVerdict]]] = {}
    for position, item in enumerate(data):
        if item.reward is not None and math.isfinite(item.reward):
            step.rewards.append(item.reward)
        if not item.calls:
            continue
        checked[position] = _check_calls(item, config, skips, step, agent, served)
        report = stitch_calls([call_ids(call) for call in item.calls])
        stitched[position] = report
        step.drift.rollouts += 1
        step.drift.calls += report.calls
        step.drift.continuations += report.continuations
        step.drift.drifted += report.drifted
        step.drift.lineages += report.lineages
        if report.drifted:
            step.drift.rollouts_drifted += 1
            step.rollout_drift[item.rollout.rollout_id] = round(report.drift_rate, 4)

    if config.rewards.truncated == "failure_reward":
        data = [
            _with_truncation_reward(item, checked[p][1], config.rewards) if p in checked else item
            for p, item in enumerate(data)
        ]
    advantages, failed = _call_advantages(data, groups, skips, config.rewards, step)
    for position, per_call in advantages.items():
        item = data[position]
        group = str(indices[groups[position]])
        step.transition_tokens += sum(len(c.prompt["token_ids"]) + len(c.response["token_ids"]) for c in item.calls)
        records, verdicts = checked[position]
        if position in failed:  # pushed down with the rest of its failed group (see the module docstring)
            verdicts = [replace(v, excluded=None) if v.excluded == "truncated" else v for v in verdicts]
        for sequence in stitched[position].sequences:
            made = _sequence_samples(item, sequence, per_call, group, skips, config, records, verdicts)
            step.drift.generated_tokens += sequence.generated_tokens
            step.drift.trained_tokens += sum(sample.trained_tokens for sample in made)
            step.samples.extend(made)
    return step


def _check_calls(
    item: RolloutData,
    config: GRPOConfig,
    skips: SkipCounts,
    step: StepSamples,
    agent: Optional[str],
    served: Optional[ServedBy],
) -> tuple[list[Optional[ProxyCall]], list[CallVerdict]]:
    """What the proxy recorded of each call of `item`, and the verdict on each (counted)."""
    records: list[Optional[ProxyCall]] = [None] * len(item.calls)
    if item.proxy_calls is not None:
        records = item.proxy_calls.records_for(item.calls)
    verdicts = [
        judge_call(record, temperature=config.temperature, truncated=config.truncated, agent=agent, served=served)
        for record in records
    ]
    for record, verdict in zip(records, verdicts, strict=True):
        if record is not None and record.served_model is not None:
            step.calls_recorded += 1
        if verdict.excluded == "other_sampling":
            skips.calls_other_sampling += 1
        elif verdict.excluded == "other_adapter":
            skips.calls_other_adapter += 1
        if verdict.truncated:
            step.calls_hit_length_limit += 1
            if config.truncated != "keep":  # masked or penalised: what the step could not train as it came
                skips.calls_hit_length_limit += 1
    return records, verdicts


def _with_truncation_reward(item: RolloutData, verdicts: list[CallVerdict], rewards: RewardSettings) -> RolloutData:
    """`item` with `truncation_reward` as its reward (and as the reward of each truncated call, for turn credit)
    when one of its calls stopped on the length limit and it has a reward."""
    if item.reward is None or not any(verdict.truncated for verdict in verdicts):
        return item
    value = float(rewards.truncation_reward)
    calls = [
        call.model_copy(update={"reward": value}) if verdict.truncated else call
        for call, verdict in zip(item.calls, verdicts, strict=True)
    ]
    return replace(item, reward=value, calls=calls)


def _call_advantages(
    data: list[RolloutData], groups: list[int], skips: SkipCounts, rewards: RewardSettings, step: StepSamples
) -> tuple[dict[int, list[float]], set[int]]:
    """The advantage of each call of each rollout that has calls and belongs to an informative group (or, with
    `failed_group_reward`, to a group that failed throughout), and the positions of the rollouts of failed groups."""
    failed = None
    if rewards.failed_group_reward is not None:
        failed = FailedGroups(rewards.failed_group_reward, rewards.failed_group_advantage)
    if rewards.credit == "turn":
        by_group_turns: dict[Hashable, list[tuple[Hashable, Sequence[Optional[float]]]]] = defaultdict(list)
        for position, (item, group) in enumerate(zip(data, groups, strict=True)):
            if item.reward is None or not math.isfinite(item.reward):
                continue
            by_group_turns[group].append((position, _turn_rewards(item)))
        turns = turn_advantages(
            by_group_turns, scale=rewards.scale_rewards, min_std=rewards.min_reward_std, failed=failed
        )
        skips.groups_zero_variance += turns.groups_zero_variance
        skips.groups_too_small += turns.groups_too_small
        step.informative_groups = turns.groups_used
        step.failed_groups = turns.groups_failed
        per_call = {int(k): v for k, v in turns.advantages.items() if data[int(k)].calls}  # type: ignore[call-overload]
        return per_call, {int(k) for k in turns.failed_keys}  # type: ignore[call-overload]
    by_group: dict[Hashable, list[tuple[Hashable, float]]] = defaultdict(list)
    for position, (item, group) in enumerate(zip(data, groups, strict=True)):
        if item.reward is not None:
            by_group[group].append((position, item.reward))
    result = group_advantages(by_group, scale=rewards.scale_rewards, min_std=rewards.min_reward_std, failed=failed)
    skips.groups_zero_variance += result.groups_zero_variance
    skips.groups_too_small += result.groups_too_small
    step.informative_groups = result.groups_used
    step.failed_groups = result.groups_failed
    per_call = {
        int(k): [advantage] * len(data[int(k)].calls)  # type: ignore[call-overload]
        for k, advantage in result.advantages.items()
        if data[int(k)].calls  # type: ignore[call-overload]
    }
    return per_call, {int(k) for k in result.failed_keys}  # type: ignore[call-overload]


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
    records: Sequence[Optional[ProxyCall]],
    verdicts: Sequence[CallVerdict],
) -> list[Sample]:
    limit = config.max_response_tokens
    too_long = any(end - start > limit for start, end in sequence.segments)
    rollout_id = item.rollout.rollout_id
    trained = [verdicts[call].excluded is None for call in sequence.calls]
    if not any(trained):
        return []
    if config.aggregation == "trajectory" and not too_long:
        advantages = [per_call[call] for call in sequence.calls]
        uniform = all(a == advantages[0] for a in advantages)
        token_advantages: Optional[list[float]] = None
        if not uniform:
            token_advantages = [0.0] * len(sequence.response_ids)
            for (start, end), advantage in zip(sequence.segments, advantages, strict=True):
                token_advantages[start:end] = [advantage] * (end - start)
        single = len(sequence.calls) == 1
        loss_mask = None if single else list(sequence.loss_mask)
        if not all(trained):
            loss_mask = list(sequence.loss_mask)
            for (start, end), keep in zip(sequence.segments, trained, strict=True):
                if not keep:
                    loss_mask[start:end] = [0] * (end - start)
        return [
            Sample(
                prompt_ids=list(sequence.prompt_ids),
                response_ids=list(sequence.response_ids),
                advantage=advantages[0],
                rollout_id=rollout_id,
                group=group,
                loss_mask=loss_mask,
                token_advantages=token_advantages,
                calls=len(sequence.calls),
                sampler_log_probs=_stitched_log_probs(sequence, records),
            )
        ]
    samples = []
    for call, keep in zip(sequence.calls, trained, strict=True):
        if not keep:
            continue
        triplet = item.calls[call]
        response = [int(t) for t in triplet.response["token_ids"]]
        record = records[call]
        log_probs: Optional[list[Optional[float]]] = None
        if record is not None and record.logprobs is not None:
            log_probs = list(record.logprobs[:limit])
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
                sampler_log_probs=log_probs,
            )
        )
    return samples


def _stitched_log_probs(
    sequence: StitchedSequence, records: Sequence[Optional[ProxyCall]]
) -> Optional[list[Optional[float]]]:
    """The sampler's log-probs laid out like `sequence.response_ids`: each call's on its generated tokens, None on
    the tokens between (tool results, user turns) and on calls without any (None: no call has any)."""
    values: list[Optional[float]] = [None] * len(sequence.response_ids)
    found = False
    for call, (start, end) in zip(sequence.calls, sequence.segments, strict=True):
        record = records[call]
        if record is None or record.logprobs is None or len(record.logprobs) != end - start:
            continue
        values[start:end] = record.logprobs
        found = True
    return values if found else None


def sample_tokens(samples: Sequence[Sample]) -> int:
    """Tokens a forward pass over `samples` processes (prompt and response, no padding)."""
    return sum(sample.length for sample in samples)
