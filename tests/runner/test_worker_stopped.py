"""A runner that stops says so in its worker's last heartbeat, and progress displays stop counting it as alive."""

from __future__ import annotations

from typing import Any

from agentlightning.litagent import LitAgent
from agentlightning.runner import LitAgentRunner
from agentlightning.runner.heartbeat import STOPPED_AT
from agentlightning.store import InMemoryLightningStore
from agentlightning.tracer import DummyTracer
from agentlightning.trainer.progress import ProgressMonitor

from .agents import ScriptedAgent


def _runner(**kwargs: Any) -> LitAgentRunner[Any]:
    return LitAgentRunner(tracer=DummyTracer(), heartbeat_interval=5.0, poll_interval=0.05, **kwargs)


async def test_a_runner_that_finished_its_rollouts_records_when_it_stopped() -> None:
    store = InMemoryLightningStore()
    await store.enqueue_rollout({"reward": 1.0})
    runner = _runner(max_rollouts=1)
    with runner.run_context(agent=ScriptedAgent(), store=store):
        await runner.iter()
    worker = await store.get_worker_by_id("Worker-0")
    assert worker is not None and worker.heartbeat_stats is not None
    assert worker.heartbeat_stats[STOPPED_AT] >= (worker.last_dequeue_time or 0.0)
    assert "cpu_percent" in worker.heartbeat_stats  # still a full snapshot


class WorkerStatsAgent(LitAgent[Any]):
    """Records its worker's heartbeat stats as the store holds them while the rollout runs."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Any] = []

    async def rollout_async(self, task: Any, resources: Any, rollout: Any) -> float:
        worker = await self.runner.get_store().get_worker_by_id(self.runner.get_worker_id())
        self.seen.append(worker.heartbeat_stats if worker is not None else None)
        return 1.0


async def test_a_worker_that_starts_again_is_no_longer_marked_stopped() -> None:
    store = InMemoryLightningStore()
    agent = WorkerStatsAgent()
    for _ in range(2):
        await store.enqueue_rollout({})
        runner = _runner(max_rollouts=1)
        with runner.run_context(agent=agent, store=store):
            await runner.iter()
    assert len(agent.seen) == 2
    assert all(stats is not None and STOPPED_AT not in stats for stats in agent.seen)


async def test_the_progress_monitor_does_not_count_a_stopped_worker_as_alive() -> None:
    store = InMemoryLightningStore()
    monitor = ProgressMonitor(store, mode="off")
    await store.enqueue_rollout({"reward": 1.0})
    await store.update_worker("Worker-9", heartbeat_stats={"cpu_percent": 1.0})  # another runner, still running
    runner = _runner(max_rollouts=1)
    with runner.run_context(agent=ScriptedAgent(), store=store):
        await runner.iter()
    snapshot = await monitor._read()  # pyright: ignore[reportPrivateUsage]
    assert snapshot.runners_alive == 1
