"""GRPO reads a rollout's rewards as `adapter.rewards` defines them: the outcome reaches the final call whatever step
rewards were emitted (turn credit included, one agent or several), and with `failure_reward` a rollout in which the
agent raised is trained with that outcome while infrastructure failures stay dropped."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from typing import Any, Union

import pytest

from agentlightning.algorithm.grpo.config import GRPOConfig
from agentlightning.algorithm.grpo.learning.samples import build_samples
from agentlightning.algorithm.grpo.rollouts.agents import read_agent_rollouts
from agentlightning.algorithm.grpo.rollouts.reading import RolloutData, SkipCounts, count_skips, read_rollouts
from agentlightning.litagent import LitAgent
from agentlightning.runner import LitAgentRunner
from agentlightning.store import InMemoryLightningStore
from agentlightning.tracer import DummyTracer
from agentlightning.types import RolloutConfig, Span

from ..stored_rollouts import Call, Reward, stored_rollout


@pytest.fixture
async def store() -> AsyncIterator[InMemoryLightningStore]:
    instance = InMemoryLightningStore()
    yield instance
    await instance.close()


def calls_and_rewards(outcome: float, steps: dict[int, float], calls: int = 3) -> list[Union[Call, Reward]]:
    """`calls` calls (each extending no other: one sample per call), the step reward `steps[k]` after call k, then
    the outcome."""
    events: list[Union[Call, Reward]] = []
    for k in range(1, calls + 1):
        events.append(("call", [10 * k, 1], [10 * k + 1]))
        if k in steps:
            events.append(("reward", steps[k]))
    events.append(("reward", outcome))
    return events


def per_call_advantages(data: list[RolloutData], **settings: Any) -> list[list[float]]:
    config = GRPOConfig(group_size=2, tasks_per_step=1, aggregation="transition", scale_rewards=False, **settings)
    built = build_samples(data, [0] * len(data), [0], SkipCounts(), config)
    by_rollout: dict[str, list[float]] = {}
    for sample in built.samples:
        by_rollout.setdefault(sample.rollout_id, []).append(sample.advantage)
    return [by_rollout.get(item.rollout.rollout_id, []) for item in data]


async def test_turn_credit_with_a_step_reward_after_every_call_includes_the_outcome(
    store: InMemoryLightningStore,
) -> None:
    steps = {1: 0.1, 2: 0.1, 3: 0.1}
    rollouts = [await stored_rollout(store, calls_and_rewards(outcome, steps)) for outcome in (1.0, 0.0)]
    data = await read_rollouts(store, rollouts, None, agent_match=None)
    # returns to go: [1.3, 1.2, 1.1] against [0.3, 0.2, 0.1]: the outcome decides every turn
    assert per_call_advantages(data, credit="turn") == [pytest.approx([0.5] * 3), pytest.approx([-0.5] * 3)]


async def test_turn_credit_puts_the_outcome_on_the_final_call_not_on_the_call_before_a_step_reward(
    store: InMemoryLightningStore,
) -> None:
    rollouts = [await stored_rollout(store, calls_and_rewards(outcome, {3: 0.5})) for outcome in (1.0, 0.0)]
    data = await read_rollouts(store, rollouts, None, agent_match=None)
    assert [item.calls[-1].reward for item in data] == [0.5, 0.5]  # the triplets keep the spec's matching
    assert per_call_advantages(data, credit="turn") == [pytest.approx([0.5] * 3), pytest.approx([-0.5] * 3)]


async def test_final_credit_trains_every_call_on_the_outcome(store: InMemoryLightningStore) -> None:
    rollouts = [await stored_rollout(store, calls_and_rewards(outcome, {1: 0.3})) for outcome in (1.0, 0.0)]
    data = await read_rollouts(store, rollouts, None, agent_match=None)
    assert [item.reward for item in data] == [1.0, 0.0]
    assert per_call_advantages(data) == [pytest.approx([0.5] * 3), pytest.approx([-0.5] * 3)]


async def test_an_agents_turn_credit_includes_its_own_outcome(store: InMemoryLightningStore) -> None:
    steps = {1: 0.1, 2: 0.1, 3: 0.1}
    rollouts = [
        await stored_rollout(store, calls_and_rewards(outcome, steps), agent="solver") for outcome in (1.0, 0.0)
    ]
    read = await read_agent_rollouts(store, rollouts, {"solver": "^solver$"})
    assert per_call_advantages(read.by_agent["solver"], credit="turn") == [
        pytest.approx([0.5] * 3),
        pytest.approx([-0.5] * 3),
    ]


# ----------------------------------------------------------------------------------------------- failure reward
async def _group_with_failures(store: InMemoryLightningStore) -> list[Any]:
    return [
        await stored_rollout(store, calls_and_rewards(1.0, {})),
        await stored_rollout(  # the agent raised after its first call and a step reward
            store, [("call", [5, 1], [6]), ("reward", 0.2)], status="failed", metadata={"error_source": "agent"}
        ),
        await stored_rollout(
            store, [("call", [7, 1], [8])], status="failed", metadata={"error_source": "infrastructure"}
        ),
        await stored_rollout(store, [("call", [9, 1], [9])], status="timeout", metadata={"error_source": "agent"}),
        await stored_rollout(store, [("call", [3, 1], [3])], status="failed"),  # a runner that names no source
    ]


async def test_a_rollout_in_which_the_agent_raised_is_trained_with_the_failure_reward(
    store: InMemoryLightningStore,
) -> None:
    rollouts = await _group_with_failures(store)
    data = await read_rollouts(store, rollouts, None, agent_match=None, failure_reward=-1.0)
    assert [item.reward for item in data] == [1.0, -1.0, None, None, None]
    assert data[1].failed_scored and [len(item.calls) for item in data] == [3, 1, 0, 0, 0]
    assert data[1].rewards is not None and data[1].rewards.per_call() == [pytest.approx(-0.8)]
    skips = count_skips(data)
    assert (skips.rollouts_failed_scored, skips.rollouts_failed) == (1, 3)
    assert per_call_advantages(data)[:2] == [pytest.approx([1.0] * 3), pytest.approx([-1.0])]


async def test_without_a_failure_reward_every_failed_rollout_is_left_out(store: InMemoryLightningStore) -> None:
    data = await read_rollouts(store, await _group_with_failures(store), None, agent_match=None)
    assert [item.reward for item in data] == [1.0, None, None, None, None]
    assert (count_skips(data).rollouts_failed_scored, count_skips(data).rollouts_failed) == (0, 4)


async def test_several_agents_score_a_rollout_in_which_the_agent_raised_with_the_failure_reward(
    store: InMemoryLightningStore,
) -> None:
    rollouts = await _group_with_failures(store)
    read = await read_agent_rollouts(store, rollouts, {"all": "."}, failure_reward=-1.0)
    assert [item.reward for item in read.merged] == [1.0, -1.0, None, None, None]


@pytest.mark.parametrize("value", [math.nan, math.inf, True, "0"])
def test_a_failure_reward_that_is_not_a_finite_number_is_refused(value: Any) -> None:
    with pytest.raises(ValueError, match="failure_reward must be a finite number or None"):
        GRPOConfig(failure_reward=value)


class _ParsingAgent(LitAgent[Any]):
    """Records one LLM call (as the proxy would) and a step reward, then gives an outcome 1.0, or raises on an answer
    it cannot parse ({"answer": "?"}), or outlives its timeout ({"answer": "slow"})."""

    def __init__(self, store: InMemoryLightningStore) -> None:
        super().__init__()
        self.store = store

    async def rollout_async(self, task: Any, resources: Any, rollout: Any) -> Any:
        rid, aid = rollout.rollout_id, rollout.attempt.attempt_id
        ids = {"prompt_token_ids": [1, 2], "response_token_ids": [3], "gen_ai.response.id": f"{rid}-call"}
        await self.store.add_span(Span.from_attributes(attributes=ids, rollout_id=rid, attempt_id=aid, sequence_id=1))
        if task["answer"] == "?":
            raise ValueError("the model's answer is not a number")
        if task["answer"] == "slow":
            await asyncio.sleep(10)
        return 1.0


async def test_a_real_runners_agent_failure_is_scored_and_its_timeout_is_not(store: InMemoryLightningStore) -> None:
    tasks = [{"answer": "42"}, {"answer": "?"}, {"answer": "slow"}]
    config = RolloutConfig(timeout_seconds=0.5)
    ids = [(await store.enqueue_rollout(task, config=config)).rollout_id for task in tasks]
    runner = LitAgentRunner[Any](tracer=DummyTracer(), max_rollouts=len(tasks), poll_interval=0.05)
    with runner.run_context(agent=_ParsingAgent(store), store=store):
        await asyncio.wait_for(runner.iter(), timeout=30)
    rollouts = list(await store.wait_for_rollouts(rollout_ids=ids, timeout=5))
    data = await read_rollouts(store, rollouts, None, agent_match=None, failure_reward=-1.0)
    assert [(item.reward, len(item.calls)) for item in data] == [(1.0, 1), (-1.0, 1), (None, 0)]
