"""The Trainer's runner bundle: one copy of the runner per worker, worker ids that name the host and process."""

from __future__ import annotations

import os
import socket
import threading
from typing import Any

import pytest

import agentlightning as agl
from agentlightning.trainer.bundle import AgentRunnerBundle

from ..execution.helpers import EnqueueAllAlgorithm
from ..runner.agents import ScriptedAgent


class RunnerWithALock(agl.LitAgentRunner[Any]):
    """A runner holding something deepcopy cannot copy."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__  # keeps the lock, so copying fails


def test_a_runner_that_cannot_be_copied_is_refused_not_shared() -> None:
    trainer = agl.Trainer(
        algorithm=EnqueueAllAlgorithm(timeout=10), runner=RunnerWithALock(), strategy="shm", n_runners=2
    )
    with pytest.raises(TypeError, match=r"runner \(RunnerWithALock\) cannot be copied for worker \d"):
        trainer.fit(ScriptedAgent(), [{}])


def test_each_worker_gets_its_own_runner_with_an_id_naming_host_and_process() -> None:
    bundle = AgentRunnerBundle(agl.LitAgentRunner(), ScriptedAgent(), ())
    first, second = bundle.runner_for_worker(0), bundle.runner_for_worker(1)
    assert isinstance(first, agl.LitAgentRunner) and isinstance(second, agl.LitAgentRunner)
    assert first is not second and first is not bundle.runner
    first.worker_id, second.worker_id = 0, 1  # what init_worker sets
    prefix = f"{socket.gethostname()}-{os.getpid()}-runner-"
    assert [first.get_worker_id(), second.get_worker_id()] == [f"{prefix}0", f"{prefix}1"]


def test_a_worker_id_prefix_chosen_by_the_user_is_kept() -> None:
    bundle = AgentRunnerBundle(agl.LitAgentRunner(worker_id_prefix="gpu-box-"), ScriptedAgent(), ())
    runner = bundle.runner_for_worker(0)
    assert isinstance(runner, agl.LitAgentRunner) and runner.worker_id_prefix == "gpu-box-"


def test_workers_of_a_fit_are_registered_under_host_and_pid() -> None:
    algorithm = EnqueueAllAlgorithm(timeout=30)
    trainer = agl.Trainer(algorithm=algorithm, strategy="shm", n_runners=2, progress="off")
    trainer.fit(ScriptedAgent(), [{}] * 4)
    import asyncio

    workers = asyncio.run(trainer.store.query_workers())
    prefix = f"{socket.gethostname()}-{os.getpid()}-runner-"
    assert sorted(worker.worker_id for worker in workers) == [f"{prefix}0", f"{prefix}1"]
