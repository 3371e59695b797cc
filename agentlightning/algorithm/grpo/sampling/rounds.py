"""The sampling rounds of one GRPO step: groups of rollouts on fresh tasks until enough groups are informative.

A step runs `tasks_per_step` tasks `group_size` times each; while fewer than `target_informative_groups` groups have
rewards that vary (and the step's task budget is not spent) it samples more fresh tasks, as many as groups are
missing (see `GRPOConfig.informative_groups`). Each round's rollouts are turned into samples once, as soon as they
are read (`learning.samples.build_samples`; groups never span rounds, so the step's samples are the rounds' samples
one after the other), and those are what the step trains on. Where the tasks come from (`TaskStream`), running them
and reading them back are the caller's; this module keeps the bookkeeping: which task each rollout belongs to, the
time spent, the counts.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from agentlightning.types import Dataset, Rollout

from ..config import GRPOConfig
from ..learning.agent_samples import agent_step_samples, merge_step_samples
from ..learning.samples import StepSamples, build_samples
from ..rollouts.agents import AgentRollouts
from ..rollouts.call_checks import ServedBy
from ..rollouts.reading import RolloutData, SkipCounts
from .schedule import SamplingCounts
from .task_stream import TaskStream

__all__ = ["ReadRollouts", "RunRollouts", "SampledGroups", "sample_groups"]

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


def _build_round(
    sampled: SampledGroups,
    data: list[RolloutData],
    read: Optional[AgentRollouts],
    groups: list[int],
    config: GRPOConfig,
    agents: Optional[Mapping[str, str]],
    served: Optional[ServedBy],
) -> None:
    """Build the samples of one round's rollouts (`groups`: their tasks' positions in the step) into `sampled`."""
    if agents is None:
        sampled.built.add(build_samples(data, groups, sampled.indices, sampled.build_skips, config))
        return
    assert read is not None
    per_agent = agent_step_samples(read, agents, groups, sampled.indices, sampled.build_skips, config, served=served)
    for agent, part in per_agent.items():
        sampled.per_agent[agent].add(part)
    # the totals hold each agent's samples together, in the agents' order (what the update and the logs saw before)
    sampled.built = merge_step_samples(list(sampled.per_agent.values()))


async def sample_groups(
    dataset: Dataset[Any],
    config: GRPOConfig,
    counts: SamplingCounts,
    tasks: TaskStream,
    run: RunRollouts,
    read: ReadRollouts,
    agents: Optional[Mapping[str, str]] = None,
    *,
    served: Optional[ServedBy] = None,
    extra: bool = True,
) -> SampledGroups:
    """Sample the step's groups from `dataset` (the next tasks of `tasks`), build their samples, and add to `counts`;
    `extra=False` (the reward saturated, see `saturation`) trains on what the first tasks give. With several
    `agents`, each agent's samples are built from its own view (`served`: what may serve its calls)."""
    schedule = config.schedule
    target = schedule.target_informative_groups if extra else 0
    budget = max(schedule.task_budget_per_step, schedule.tasks_per_step)
    sampled = SampledGroups()
    if agents is not None:
        sampled.per_agent = {agent: StepSamples() for agent in agents}
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
        _build_round(sampled, data, agent_read, groups, config, agents, served)
        missing = target - sampled.built.informative_groups
        if missing <= 0 or len(sampled.indices) >= budget:
            break
        count = min(missing, budget - len(sampled.indices))
    counts.steps += 1
    counts.tasks += len(sampled.indices)
    counts.extra_tasks += len(sampled.indices) - schedule.tasks_per_step
    if target and missing > 0:
        counts.steps_short += 1
    return sampled
