"""The Ray strategy on a local Ray instance: 2 runner actors, one killed mid-rollout and replaced."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import pytest

import agentlightning as agl
from agentlightning.types import RolloutConfig

from ..runner.agents import PidAgent
from .helpers import EnqueueAllAlgorithm

ray = pytest.importorskip("ray", reason="the Ray strategy needs the ray extra: pip install 'agentlightning[ray]'")

pytestmark = pytest.mark.slow


def test_a_killed_runner_actor_is_replaced_and_every_rollout_finishes() -> None:
    config = RolloutConfig(max_attempts=3, retry_condition=["unresponsive"], unresponsive_seconds=20.0)
    algorithm = EnqueueAllAlgorithm(config=config, timeout=240)
    strategy = agl.RayExecutionStrategy(
        n_runners=2,
        ray_init_kwargs={"num_cpus": 2, "include_dashboard": False, "log_to_driver": False},
    )
    runner = agl.LitAgentRunner(heartbeat_interval=0.5, interval_jitter=0.0, poll_interval=0.1)
    trainer = agl.Trainer(algorithm=algorithm, strategy=strategy, runner=runner, progress="off")
    errors: list[BaseException] = []

    def fit() -> None:
        try:
            trainer.fit(PidAgent(), [{"sleep": 0.3} for _ in range(16)])
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=fit, daemon=True)
    thread.start()
    import asyncio

    victim: Any = None
    deadline = time.monotonic() + 180
    while victim is None and time.monotonic() < deadline:
        for worker in asyncio.run(trainer.store.query_workers()):
            pid = (worker.heartbeat_stats or {}).get("pid")
            if worker.status == "busy" and pid not in (None, os.getpid()):
                victim = pid
                break
        time.sleep(0.05)
    assert victim is not None, "no runner actor started working"
    os.kill(victim, signal.SIGKILL)
    thread.join(240)
    assert not thread.is_alive() and not errors, errors
    assert len(algorithm.finished) == 16 and all(r.status == "succeeded" for r in algorithm.finished)
    retried = [
        attempts
        for rollout in algorithm.finished
        if len(attempts := asyncio.run(trainer.store.query_attempts(rollout.rollout_id))) > 1
    ]
    assert retried and retried[0][0].status == "unresponsive"
    assert not ray.is_initialized()
