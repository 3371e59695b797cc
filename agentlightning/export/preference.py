"""Preference pairs: the best and the worst response of a group, as TRL's DPOTrainer reads them.

A group is the rollouts enqueued together for one task by GRPO (`metadata["grpo"]`), or, for other rollouts, those
of an identical task input (`records.group_key`), further split by the exact prompt ids of their conversation, so
the two sides of a pair always answer the same prompt token for token. Only rollouts with a reward and exactly one
conversation take part (a rollout whose calls form several conversations has no single "response" to compare).

Pairing needs a group's rewards before its records, and a group's rollouts need not be adjacent in the store, so it
takes two passes: the first keeps, per group, only the identifiers and rewards of its best and worst rollout (under
a kilobyte a group, never spans); the second reads those two rollouts again and writes the pair. Ties keep the
earliest rollout.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Optional

from agentlightning.types import Triplet

from .records import ExportedRollout, chat_messages, tools_json
from .source import RolloutRef

__all__ = ["PREFERENCE_COLUMNS", "GroupExtremes", "PairCandidates", "preference_record"]

PREFERENCE_COLUMNS = [
    "prompt",
    "chosen",
    "rejected",
    "tools",
    "prompt_ids",
    "chosen_ids",
    "rejected_ids",
    "chosen_mask",
    "rejected_mask",
    "chosen_reward",
    "rejected_reward",
    "chosen_rollout_id",
    "rejected_rollout_id",
    "chosen_attempt_id",
    "rejected_attempt_id",
    "chosen_resources_id",
    "rejected_resources_id",
    "agent_name",
    "group",
    "group_size",
]


@dataclass(slots=True)
class GroupExtremes:
    """The best and worst rollout of a group seen so far, and how many took part."""

    best: RolloutRef
    best_reward: float
    worst: RolloutRef
    worst_reward: float
    size: int = 1


@dataclass
class PairCandidates:
    """Pass one: the extremes of every group (see the module docstring) and what could not take part."""

    groups: dict[str, GroupExtremes] = field(default_factory=dict)
    skipped: Counter[str] = field(default_factory=Counter)

    def add(self, rollout: ExportedRollout) -> None:
        if rollout.reward is None:
            self.skipped["no reward"] += 1
            return
        sequences = rollout.stitched.sequences
        if len(sequences) != 1:
            self.skipped["several conversations"] += 1
            return
        prompt = ",".join(map(str, sequences[0].prompt_ids)).encode("ascii")
        key = f"{rollout.group}|{hashlib.sha256(prompt).hexdigest()[:24]}"
        ref = RolloutRef(rollout.rollout_id, rollout.attempt_id, rollout.resources_id, rollout.group)
        reward = rollout.reward
        extremes = self.groups.get(key)
        if extremes is None:
            self.groups[key] = GroupExtremes(ref, reward, ref, reward)
            return
        extremes.size += 1
        if reward > extremes.best_reward:
            extremes.best, extremes.best_reward = ref, reward
        if reward < extremes.worst_reward:
            extremes.worst, extremes.worst_reward = ref, reward

    def pairs(self, min_reward: Optional[float] = None) -> Iterator[GroupExtremes]:
        """The groups that make a pair: two or more rollouts whose rewards differ (and whose best reaches
        `min_reward`); the others are counted in `skipped`."""
        for extremes in self.groups.values():
            if extremes.size < 2:
                self.skipped["group of one"] += 1
            elif extremes.best_reward == extremes.worst_reward:
                self.skipped["group without reward variance"] += 1
            elif min_reward is not None and extremes.best_reward < min_reward:
                self.skipped["best reward below --min-reward"] += 1
            else:
                yield extremes


def _prompt_messages(first_call: Triplet) -> list[dict[str, Any]]:
    messages = chat_messages(first_call)
    return messages[:-1] if messages else []


def _side(rollout: ExportedRollout, prompt_messages: int) -> tuple[list[dict[str, Any]], list[int], list[int]]:
    sequence = rollout.stitched.sequences[0]
    messages = chat_messages(rollout.calls[sequence.calls[-1]])
    return messages[prompt_messages:], list(sequence.response_ids), list(sequence.loss_mask)


def preference_record(chosen: ExportedRollout, rejected: ExportedRollout, group_size: int) -> dict[str, Any]:
    """One pair: the shared prompt (messages and ids), each side's messages after it, its ids and the mask of the
    tokens the model generated there (a multi-turn side holds tool results too, masked 0)."""
    first = chosen.calls[chosen.stitched.sequences[0].calls[0]]
    prompt = _prompt_messages(first)
    chosen_messages, chosen_ids, chosen_mask = _side(chosen, len(prompt))
    rejected_messages, rejected_ids, rejected_mask = _side(rejected, len(prompt))
    agent = first.metadata.get("agent_name") if isinstance(first.metadata, dict) else None
    return {
        "prompt": prompt,
        "chosen": chosen_messages,
        "rejected": rejected_messages,
        "tools": tools_json(first),
        "prompt_ids": list(chosen.stitched.sequences[0].prompt_ids),
        "chosen_ids": chosen_ids,
        "rejected_ids": rejected_ids,
        "chosen_mask": chosen_mask,
        "rejected_mask": rejected_mask,
        "chosen_reward": chosen.reward,
        "rejected_reward": rejected.reward,
        "chosen_rollout_id": chosen.rollout_id,
        "rejected_rollout_id": rejected.rollout_id,
        "chosen_attempt_id": chosen.attempt_id,
        "rejected_attempt_id": rejected.attempt_id,
        "chosen_resources_id": chosen.resources_id,
        "rejected_resources_id": rejected.resources_id,
        "agent_name": str(agent) if agent else None,
        "group": chosen.group,
        "group_size": group_size,
    }
