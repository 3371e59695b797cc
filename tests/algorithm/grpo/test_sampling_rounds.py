"""A step's sampling rounds: tasks from the run's task stream, each round's rollouts built into samples once, and
the step's samples exactly those one build over all its rollouts would give."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, Optional

import pytest

from agentlightning.algorithm.grpo import GRPOConfig
from agentlightning.algorithm.grpo.learning import samples as samples_module
from agentlightning.algorithm.grpo.learning.agent_samples import merge_step_samples
from agentlightning.algorithm.grpo.learning.samples import StepSamples
from agentlightning.algorithm.grpo.rollouts.reading import RolloutData, SkipCounts
from agentlightning.algorithm.grpo.sampling import rounds
from agentlightning.algorithm.grpo.sampling.rounds import SampledGroups, sample_groups
from agentlightning.algorithm.grpo.sampling.schedule import SamplingCounts, tasks_at
from agentlightning.algorithm.grpo.sampling.task_stream import TaskStream
from agentlightning.types import Triplet

# Each task's rewards over its group of 4: task 0 never varies, the others do.
REWARDS = {0: [1.0, 1.0, 1.0, 1.0], 1: [1.0, 0.0, 0.5, 0.0], 2: [0.0, 0.25, 1.0, 1.0], 3: [0.5, 0.5, 0.0, 1.0]}
DATASET = [{"id": task} for task in REWARDS]


class FakeRollouts:
    """Runs each task `group_size` times (recording the rounds it was asked for) and reads them back as data."""

    def __init__(self, group_size: int) -> None:
        self.group_size = group_size
        self.runs: list[tuple[list[int], int]] = []

    async def run(self, tasks: list[Any], round: int) -> tuple[list[Any], list[int]]:
        self.runs.append(([task["id"] for task in tasks], round))
        finished = [
            SimpleNamespace(task=task["id"], member=member, rollout_id=f"t{task['id']}-r{round}-{member}")
            for task in tasks
            for member in range(self.group_size)
        ]
        return finished, [position for position in range(len(tasks)) for _ in range(self.group_size)]

    async def read(self, finished: list[Any]) -> tuple[list[RolloutData], Optional[Any]]:
        data = []
        for rollout in finished:
            rollout.status = "succeeded"
            call = Triplet(
                prompt={"token_ids": [1, rollout.task]}, response={"token_ids": [rollout.member]}, reward=None
            )
            data.append(RolloutData(rollout, REWARDS[rollout.task][rollout.member], [call]))
        return data, None


def _config(**settings: Any) -> GRPOConfig:
    defaults: dict[str, Any] = dict(group_size=4, tasks_per_step=1, informative_groups=2, max_tasks_per_step=4)
    return GRPOConfig(**{**defaults, **settings})


def _sample(
    config: GRPOConfig, stream: TaskStream, monkeypatch: pytest.MonkeyPatch
) -> tuple[SampledGroups, FakeRollouts, list[int]]:
    """One step's sampling; also the number of rollouts each call of the sample builder was given."""
    built: list[int] = []
    original = samples_module.build_samples

    def counting(data: list[RolloutData], *args: Any, **kwargs: Any) -> Any:
        built.append(len(data))
        return original(data, *args, **kwargs)

    monkeypatch.setattr(rounds, "build_samples", counting)
    fake = FakeRollouts(config.group_size)
    sampled = asyncio.run(sample_groups(DATASET, config, SamplingCounts(), stream, fake.run, fake.read))
    return sampled, fake, built


def _stream_starting_with_the_constant_task(config: GRPOConfig) -> TaskStream:
    cursor = next(c for c in range(100) if tasks_at(config.seed, len(DATASET), c, 1) == [0])
    return TaskStream(len(DATASET), config.seed, cursor=cursor)


def test_each_rollout_is_built_into_samples_once_per_step(monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config()
    sampled, _, built = _sample(config, _stream_starting_with_the_constant_task(config), monkeypatch)
    assert sampled.rounds >= 2  # the first task gives no informative group: more rounds follow
    assert len(built) == sampled.rounds  # one build per round, on that round's rollouts only
    assert sum(built) == len(sampled.data)  # so every rollout was built exactly once


def test_a_one_round_step_builds_its_samples_once(monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(tasks_per_step=4, informative_groups=0)
    sampled, _, built = _sample(config, TaskStream(len(DATASET), config.seed), monkeypatch)
    assert sampled.rounds == 1 and built == [len(sampled.data)] == [16]


def test_the_step_samples_are_what_one_build_over_all_its_rollouts_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config()
    sampled, _, _ = _sample(config, _stream_starting_with_the_constant_task(config), monkeypatch)
    skips = SkipCounts()
    whole = samples_module.build_samples(sampled.data, sampled.groups, sampled.indices, skips, config)
    assert sampled.built.samples == whole.samples
    assert sampled.built.rewards == whole.rewards
    assert sampled.built.informative_groups == whole.informative_groups == 2
    assert sampled.built.drift == whole.drift
    assert sampled.build_skips == skips and skips.groups_zero_variance == 1


def test_the_rounds_take_their_tasks_from_the_stream_and_run_each_round_by_number(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = _config()
    stream = _stream_starting_with_the_constant_task(config)
    start = stream.cursor
    sampled, fake, _ = _sample(config, stream, monkeypatch)
    assert stream.cursor == start + len(sampled.indices)
    assert sampled.indices == tasks_at(config.seed, len(DATASET), start, len(sampled.indices))
    assert [round for _, round in fake.runs] == list(range(sampled.rounds))
    assert [task for tasks, _ in fake.runs for task in tasks] == sampled.indices


def test_with_several_agents_a_step_samples_until_every_agent_has_its_informative_groups() -> None:
    config = _config(tasks_per_step=1, informative_groups=1, max_tasks_per_step=4)
    # the informative groups each round gives each agent: the solver's first round would do for the step's total
    found = {"solver": [1, 0, 0, 0], "reviewer": [0, 0, 1, 0]}

    def build(sampled: SampledGroups, data: Any, read: Any, groups: Any, config: Any, served: Any) -> None:
        for agent, per_round in found.items():
            part = StepSamples(informative_groups=per_round[sampled.rounds - 1])
            sampled.per_agent.setdefault(agent, StepSamples()).add(part)
        sampled.built = merge_step_samples(list(sampled.per_agent.values()))

    fake = FakeRollouts(config.group_size)
    stream = TaskStream(len(DATASET), config.seed)
    sampled = asyncio.run(sample_groups(DATASET, config, SamplingCounts(), stream, fake.run, fake.read, build))
    assert sampled.rounds == 3 and sampled.informative_groups == 1
    assert sampled.built.informative_groups == 2  # the step's total: one group of each agent


def test_with_several_agents_the_task_budget_still_ends_the_sampling() -> None:
    config = _config(tasks_per_step=1, informative_groups=1, max_tasks_per_step=2)

    def build(sampled: SampledGroups, data: Any, read: Any, groups: Any, config: Any, served: Any) -> None:
        sampled.per_agent.setdefault("solver", StepSamples()).add(StepSamples(informative_groups=1))
        sampled.per_agent.setdefault("reviewer", StepSamples())  # never informative
        sampled.built = merge_step_samples(list(sampled.per_agent.values()))

    fake = FakeRollouts(config.group_size)
    stream = TaskStream(len(DATASET), config.seed)
    counts = SamplingCounts()
    sampled = asyncio.run(sample_groups(DATASET, config, counts, stream, fake.run, fake.read, build))
    assert sampled.rounds == 2 and len(sampled.indices) == 2 and counts.steps_short == 1
