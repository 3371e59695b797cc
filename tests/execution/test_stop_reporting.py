"""What a run says about its runners when some are killed or stopped by force: a killed runner is not counted alive
beside its replacement, one killed before it started is replaced without advice that does not apply, and the stop
names the wait it really gave."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

import agentlightning as agl
from agentlightning.execution import ClientServerExecutionStrategy
from agentlightning.execution.reaper import release_attempts_of_process
from agentlightning.runner import LitAgentRunner
from agentlightning.runner.heartbeat import has_stopped
from agentlightning.store import InMemoryLightningStore
from agentlightning.types import EnqueueRolloutRequest, RolloutConfig

from ..runner.agents import PidAgent
from .helpers import EnqueueAllAlgorithm, idle_runner, stubborn_runner

pytestmark = pytest.mark.slow


async def test_the_workers_of_a_dead_process_are_recorded_as_stopped() -> None:
    store = InMemoryLightningStore()
    await store.update_worker("w-dead", heartbeat_stats={"pid": 41, "hostname": "h"})
    await store.update_worker("w-live", heartbeat_stats={"pid": 42, "hostname": "h"})
    await release_attempts_of_process(store, pid=41, hostname="h", reason="runner process runner-0 died")
    workers = {worker.worker_id: worker for worker in await store.query_workers()}
    assert has_stopped(workers["w-dead"].heartbeat_stats)
    assert (workers["w-dead"].heartbeat_stats or {})["died"] == "runner process runner-0 died"
    assert not has_stopped(workers["w-live"].heartbeat_stats)


class KillOneRunnerAndWatch(EnqueueAllAlgorithm):
    """Enqueues everything, SIGKILLs a busy runner process, waits until its replacement registered and a few
    progress ticks passed, then waits for the rollouts."""

    async def run(self, train_dataset: Any = None, val_dataset: Any = None) -> None:
        store = self.get_store()
        requests = [EnqueueRolloutRequest(input=item, mode="train", config=self.config) for item in train_dataset or []]
        self.rollout_ids = [rollout.rollout_id for rollout in await store.enqueue_many_rollouts(requests)]
        deadline = time.monotonic() + 90
        victim = None
        while victim is None:
            assert time.monotonic() < deadline, "no busy runner"
            for worker in await store.query_workers():
                pid = (worker.heartbeat_stats or {}).get("pid")
                if worker.status == "busy" and pid not in (None, os.getpid()):
                    victim = pid
            await asyncio.sleep(0.05)
        os.kill(victim, signal.SIGKILL)
        while len(await store.query_workers()) < 3:  # the replacement registered
            assert time.monotonic() < deadline, "the killed runner was not replaced"
            await asyncio.sleep(0.1)
        await asyncio.sleep(3.0)  # a few progress snapshots with the replacement
        self.finished = await store.wait_for_rollouts(rollout_ids=self.rollout_ids, timeout=self.timeout)


def test_progress_does_not_count_a_killed_runner_alive_beside_its_replacement(tmp_path: Path) -> None:
    progress = tmp_path / "progress.jsonl"
    config = RolloutConfig(max_attempts=3, retry_condition=["unresponsive"])
    algorithm = KillOneRunnerAndWatch(config=config, timeout=120)
    runner = LitAgentRunner(heartbeat_interval=0.3, interval_jitter=0.0, poll_interval=0.1)
    trainer = agl.Trainer(algorithm=algorithm, n_runners=2, runner=runner, progress="off", progress_file=str(progress))
    trainer.fit(PidAgent(), [{"sleep": 0.3} for _ in range(30)])
    assert len(algorithm.finished) == 30
    snapshots = [json.loads(line) for line in progress.read_text().splitlines() if not json.loads(line)["final"]]
    assert snapshots and max(snapshot["runners_alive"] for snapshot in snapshots) <= 2


def _spawned_children() -> list[psutil.Process]:
    return [child for child in psutil.Process().children() if "spawn_main" in " ".join(child.cmdline())]


async def _kill_a_starting_runner(store: Any, event: Any) -> None:
    (child,) = _spawned_children()  # still importing: its bundle is not loaded yet
    child.kill()
    await asyncio.sleep(4.0)  # the supervisor notices and replaces it


def test_a_runner_killed_before_it_started_is_replaced_without_the_main_guard_advice(
    caplog: pytest.LogCaptureFixture,
) -> None:
    strategy = ClientServerExecutionStrategy(n_runners=1, graceful_timeout=2.0, terminate_timeout=1.0)
    with caplog.at_level(logging.WARNING):
        strategy.execute(_kill_a_starting_runner, idle_runner, InMemoryLightningStore())
    assert "runner-0 (pid" in caplog.text and "died with signal SIGKILL before it started" in caplog.text
    assert "Replacing runner-0" in caplog.text
    assert "__main__" not in caplog.text


async def _interrupt_once_the_runner_is_up(store: Any, event: Any) -> None:
    await asyncio.sleep(3.0)  # the runner has installed its SIG_IGN by then
    raise KeyboardInterrupt


def test_the_stop_names_the_wait_it_gave_after_an_interrupt(caplog: pytest.LogCaptureFixture) -> None:
    strategy = ClientServerExecutionStrategy(
        n_runners=1, graceful_timeout=10.0, terminate_timeout=1.0, interrupt_grace=0.5
    )
    started = time.monotonic()
    strategy.execute(_interrupt_once_the_runner_is_up, stubborn_runner, InMemoryLightningStore())
    assert time.monotonic() - started < 10.0
    assert "did not stop within 0.5 s after the interrupt and were stopped by signal: runner-0" in caplog.text
