"""The sampling loop of one GRPO step: groups of rollouts on fresh tasks until enough groups are informative.

A step runs `tasks_per_step` tasks `group_size` times each; while fewer than `target_informative_groups` groups have
rewards that vary (and the step's task budget is not spent) it samples more fresh tasks, as many as groups are
missing (see `GRPOConfig.informative_groups`). Running rollouts and reading them is the caller's (`RoundRunner`); this
module keeps the bookkeeping: which task each rollout belongs to, the time spent, the counts.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

from agentlightning.types import Dataset, Rollout

from ..config import GRPOConfig
from ..learning.samples import build_samples
from ..rollouts.agents import AgentRollouts
from ..rollouts.reading import RolloutData, SkipCounts
from .schedule import SamplingCounts

__all__ = ["RoundRunner", "SampledGroups", "informative_groups", "sample_groups"]


@dataclass
class SampledGroups:
    """The rollouts one step ran (over one or more sampling rounds) and what reading them cost."""

    data: list[RolloutData] = field(default_factory=list)
    groups: list[int] = field(default_factory=list)  # position in `indices` of each rollout's task
    indices: list[int] = field(default_factory=list)  # dataset index of each task sampled
    rounds: int = 0
    rollout_seconds: float = 0.0
    adapter_seconds: float = 0.0
    agents: AgentRollouts = field(default_factory=AgentRollouts)  # each adapter's view (several agents only)


class RoundRunner(Protocol):
    """What one sampling round needs from the algorithm."""

    def next_tasks(self, count: int) -> list[int]:
        """The dataset indices of the next `count` tasks of the task stream (the stream's cursor moves past them)."""
        ...

    def run(self, tasks: list[Any], round: int) -> Awaitable[tuple[list[Rollout], list[int]]]:
        """Run each task `group_size` times: the finished rollouts and each one's position in `tasks`."""
        ...

    def read(self, finished: list[Rollout]) -> Awaitable[tuple[list[RolloutData], Optional[AgentRollouts]]]:
        """The rollouts' calls and rewards (and, with several agents, each agent's view of them)."""
        ...


def informative_groups(sampled: SampledGroups, config: GRPOConfig, agents: Optional[Mapping[str, str]] = None) -> int:
    """Groups with varying rewards so far (with several agents: summed over the agents' own groups)."""
    args = (sampled.groups, sampled.indices)
    if agents is None:
        return build_samples(sampled.data, *args, SkipCounts(), config).informative_groups
    return sum(
        build_samples(sampled.agents.by_agent[agent], *args, SkipCounts(), config).informative_groups
        for agent in agents
    )


async def sample_groups(
    dataset: Dataset[Any],
    config: GRPOConfig,
    counts: SamplingCounts,
    runner: RoundRunner,
    agents: Optional[Mapping[str, str]] = None,
    *,
    extra: bool = True,
) -> SampledGroups:
    """Sample the step's groups from `dataset` (tasks as `runner.next_tasks` picks them) and add to `counts`;
    `extra=False` (the reward saturated, see `saturation`) trains on what the first tasks give."""
    target = config.target_informative_groups if extra else 0
    budget = max(config.task_budget_per_step, config.tasks_per_step)
    sampled = SampledGroups()
    count = config.tasks_per_step
    missing = 0
    while True:
        new = runner.next_tasks(count)
        offset = len(sampled.indices)
        sampled.indices.extend(new)
        round_started = time.monotonic()
        finished, groups = await runner.run([dataset[i] for i in new], sampled.rounds)
        adapter_started = time.monotonic()
        sampled.rollout_seconds += adapter_started - round_started
        data, read = await runner.read(finished)
        if read is not None:
            sampled.agents.extend(read)
        sampled.adapter_seconds += time.monotonic() - adapter_started
        sampled.data.extend(data)
        sampled.groups.extend(group + offset for group in groups)
        sampled.rounds += 1
        missing = target - informative_groups(sampled, config, agents)
        if missing <= 0 or len(sampled.indices) >= budget:
            break
        count = min(missing, budget - len(sampled.indices))
    counts.steps += 1
    counts.tasks += len(sampled.indices)
    counts.extra_tasks += len(sampled.indices) - config.tasks_per_step
    if target and missing > 0:
        counts.steps_short += 1
    return sampled
