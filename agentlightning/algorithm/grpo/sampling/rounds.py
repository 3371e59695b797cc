"""The sampling rounds of one GRPO step: groups of rollouts on fresh tasks until enough groups are informative.

A step runs `tasks_per_step` tasks `group_size` times each; while fewer than `target_informative_groups` groups have
rewards that vary (and the step's task budget is not spent) it samples more fresh tasks, as many as groups are
missing (see `GRPOConfig.informative_groups`; with several agents, until every agent has that many of its own).
Each round's rollouts are turned into samples once, as soon as they are read (`learning.samples.build_samples`;
groups never span rounds, so the step's samples are the rounds' samples one after the other), and those are what
the step trains on. Where the tasks come from (`TaskStream`), running them and reading them back are the caller's;
this module keeps the bookkeeping: which task each rollout belongs to, the time spent, the counts.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Optional

from agentlightning.types import Dataset, Rollout

from ..config import GRPOConfig
from ..learning.samples import StepSamples, build_samples
from ..rollouts.agents import AgentRollouts
from ..rollouts.call_checks import ServedBy
from ..rollouts.reading import RolloutData, SkipCounts
from .schedule import SamplingCounts
from .task_stream import TaskStream

__all__ = ["BuildRound", "ReadRollouts", "RunRollouts", "SampledGroups", "build_round_samples", "sample_groups"]

RunRollouts = Callable[[list[Any], int], Awaitable[tuple[list[Rollout], list[int]]]]
"""Run each of the tasks `group_size` times in sampling round `round` (the second argument): the finished rollouts
and each one's position in the tasks."""

ReadRollouts = Callable[[list[Rollout]], Awaitable[tuple[list[RolloutData], Optional[AgentRollouts]]]]
"""The finished rollouts' calls and rewards (and, with several agents, each agent's view of them)."""


@dataclass
class SampledGroups:
    """The rollouts one step ran (over one or more sampling rounds), the samples built from them, and what reading
    them cost."""

    data: list[RolloutData] = field(default_factory=list)
    groups: list[int] = field(default_factory=list)  # position in `indices` of each rollout's task
    indices: list[int] = field(default_factory=list)  # dataset index of each task sampled
    rounds: int = 0
    rollout_seconds: float = 0.0
    adapter_seconds: float = 0.0
    agents: AgentRollouts = field(default_factory=AgentRollouts)  # each adapter's view (several agents only)
    built: StepSamples = field(default_factory=StepSamples)  # what the step trains on (with several agents: all)
    per_agent: dict[str, StepSamples] = field(default_factory=dict)  # each agent's samples (several agents only)
    build_skips: SkipCounts = field(default_factory=SkipCounts)  # what building the samples left out

    @property
    def informative_groups(self) -> int:
        """The informative groups found so far for the update that has fewest: with several agents each adapter
        trains on its own agent's groups, so another agent's groups do not make up for its own."""
        if self.per_agent:
            return min(part.informative_groups for part in self.per_agent.values())
        return self.built.informative_groups


BuildRound = Callable[
    [SampledGroups, list[RolloutData], Optional[AgentRollouts], list[int], GRPOConfig, Optional[ServedBy]], None
]
"""Build one round's samples into the step's `SampledGroups`, from the round's rollouts (with several agents, each
agent's view of them too) and their tasks' positions in the step (`served`: what may serve the calls). What is trained
decides how: `build_round_samples` for one policy, `trained.AgentAdapters.build_round` for one adapter per agent."""


def build_round_samples(
    sampled: SampledGroups,
    data: list[RolloutData],
    read: Optional[AgentRollouts],
    groups: list[int],
    config: GRPOConfig,
    served: Optional[ServedBy],
) -> None:
    """One policy's samples of one round's rollouts (`groups`: their tasks' positions in the step), into `sampled`."""
    sampled.built.add(build_samples(data, groups, sampled.indices, sampled.build_skips, config))


async def sample_groups(
    dataset: Dataset[Any],
    config: GRPOConfig,
    counts: SamplingCounts,
    tasks: TaskStream,
    run: RunRollouts,
    read: ReadRollouts,
    build: BuildRound = build_round_samples,
    *,
    served: Optional[ServedBy] = None,
    extra: bool = True,
) -> SampledGroups:
    """Sample the step's groups from `dataset` (the next tasks of `tasks`), build their samples, and add to `counts`;
    `extra=False` (the reward saturated, see `saturation`) trains on what the first tasks give. `build` turns each
    round's rollouts into samples (`served`: what may serve their calls)."""
    schedule = config.schedule
    target = schedule.target_informative_groups if extra else 0
    budget = max(schedule.task_budget_per_step, schedule.tasks_per_step)
    sampled = SampledGroups()
    count = schedule.tasks_per_step
    missing = 0
    while True:
        new = tasks.take(count)
        offset = len(sampled.indices)
        sampled.indices.extend(new)
        round_started = time.monotonic()
        finished, positions = await run([dataset[i] for i in new], sampled.rounds)
        adapter_started = time.monotonic()
        sampled.rollout_seconds += adapter_started - round_started
        data, agent_read = await read(finished)
        if agent_read is not None:
            sampled.agents.extend(agent_read)
        sampled.adapter_seconds += time.monotonic() - adapter_started
        groups = [position + offset for position in positions]
        sampled.data.extend(data)
        sampled.groups.extend(groups)
        sampled.rounds += 1
        build(sampled, data, agent_read, groups, config, served)
        missing = target - sampled.informative_groups
        if missing <= 0 or len(sampled.indices) >= budget:
            break
        count = min(missing, budget - len(sampled.indices))
    counts.steps += 1
    counts.tasks += len(sampled.indices)
    counts.extra_tasks += len(sampled.indices) - schedule.tasks_per_step
    if target and missing > 0:
        counts.steps_short += 1
    return sampled
