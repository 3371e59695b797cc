"""A runner runs one loop at a time: a second `step` (or `iter`) on the same runner is refused, not interleaved."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

import agentlightning as agl

from .agents import AsyncScriptedAgent


async def test_a_second_step_on_a_busy_runner_is_refused_and_the_first_completes() -> None:
    runner: agl.LitAgentRunner[Any] = agl.LitAgentRunner(agl.DummyTracer())
    store = agl.InMemoryLightningStore()
    with runner.run_context(agent=AsyncScriptedAgent(), store=store):
        first = asyncio.ensure_future(runner.step({"sleep": 0.3, "reward": 0.5}))
        await asyncio.sleep(0.05)
        with pytest.raises(RuntimeError, match=r"LitAgentRunner.step\(\) cannot start: this runner is running step"):
            await runner.step({"reward": 1.0})
        with pytest.raises(RuntimeError, match=r"iter\(\) cannot start: this runner is running step"):
            await runner.iter()
        rollout = await first
    assert rollout.status == "succeeded"
    assert len(await store.query_rollouts()) == 1


async def test_concurrent_steps_run_on_copies_of_the_runner() -> None:
    template: agl.LitAgentRunner[Any] = agl.LitAgentRunner(agl.DummyTracer())
    store = agl.InMemoryLightningStore()
    agent = AsyncScriptedAgent()

    async def one(task: dict[str, Any]) -> str:
        runner = copy.deepcopy(template)
        with runner.run_context(agent=agent, store=store):
            return (await runner.step(task)).status

    assert await asyncio.gather(*(one({"sleep": 0.1}) for _ in range(3))) == ["succeeded"] * 3


async def test_a_runner_runs_again_after_its_step_returned() -> None:
    runner: agl.LitAgentRunner[Any] = agl.LitAgentRunner(agl.DummyTracer())
    with runner.run_context(agent=AsyncScriptedAgent(), store=agl.InMemoryLightningStore()):
        with pytest.raises(RuntimeError, match="bad"):
            await runner.step({"raise": "bad"})
        assert (await runner.step({"reward": 1.0})).status == "succeeded"  # the guard was released on the error
