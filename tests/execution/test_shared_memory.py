"""The shared-memory strategy: algorithm and runners as threads of one process."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

import agentlightning as agl
from agentlightning.execution import SharedMemoryExecutionStrategy, ThreadingEvent
from agentlightning.execution.loop import run_until_completed_or_canceled
from agentlightning.store import InMemoryLightningStore, LightningStoreThreaded
from agentlightning.tracer.otel import OtelTracer

from ..runner.agents import AsyncScriptedAgent, ScriptedAgent
from .helpers import EnqueueAllAlgorithm


def test_main_thread_defaults_to_the_algorithm_with_several_runners() -> None:
    assert SharedMemoryExecutionStrategy(n_runners=1).main_thread == "runner"
    assert SharedMemoryExecutionStrategy(n_runners=4).main_thread == "algorithm"
    with pytest.raises(ValueError, match="requires n_runners=1"):
        SharedMemoryExecutionStrategy(n_runners=2, main_thread="runner")
    with pytest.raises(ValueError, match="main_thread"):
        SharedMemoryExecutionStrategy(main_thread="both")  # type: ignore[arg-type]


def test_managed_store_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGL_MANAGED_STORE", "0")
    assert not SharedMemoryExecutionStrategy().managed_store
    assert SharedMemoryExecutionStrategy(managed_store=True).managed_store


@pytest.mark.parametrize("agent", [ScriptedAgent(), AsyncScriptedAgent()], ids=["sync", "async"])
def test_four_runner_threads_with_their_own_tracers_finish_every_rollout(agent: Any) -> None:
    algorithm = EnqueueAllAlgorithm(timeout=60)
    trainer = agl.Trainer(algorithm=algorithm, n_runners=4, strategy="shm", tracer=OtelTracer(), progress="off")
    trainer.fit(agent, [{"emit": i / 100} for i in range(100)])
    assert len(algorithm.finished) == 100
    assert all(rollout.status == "succeeded" for rollout in algorithm.finished)
    assert trainer.summary is not None and trainer.summary.snapshot.succeeded == 100


async def test_a_slow_bundle_is_cancelled_after_the_grace_period(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    stop = ThreadingEvent()
    stop.set()
    result = await run_until_completed_or_canceled(asyncio.sleep(10, "late"), stop, graceful_delay=0.1, name="slow")
    assert result is None and "canceling it" in caplog.text


async def test_a_bundle_that_finishes_in_the_grace_period_returns_its_result() -> None:
    stop = ThreadingEvent()
    stop.set()
    assert await run_until_completed_or_canceled(asyncio.sleep(0.05, "done"), stop, graceful_delay=1.0) == "done"


def test_a_runner_crash_stops_the_algorithm_and_is_raised() -> None:
    async def algorithm(store: Any, event: Any) -> None:
        while not event.is_set():
            await asyncio.sleep(0.01)

    async def runner(store: Any, worker_id: int, event: Any) -> None:
        raise RuntimeError("runner bug")

    with pytest.raises(RuntimeError, match="runner bug"):
        SharedMemoryExecutionStrategy(n_runners=2, graceful_delay=0.5).execute(
            algorithm, runner, InMemoryLightningStore()
        )


def test_managed_store_is_wrapped_for_threads() -> None:
    seen: list[Any] = []

    async def algorithm(store: Any, event: Any) -> None:
        seen.append(store)

    async def runner(store: Any, worker_id: int, event: Any) -> None:
        seen.append(store)

    SharedMemoryExecutionStrategy(n_runners=1, main_thread="algorithm").execute(
        algorithm, runner, InMemoryLightningStore()
    )
    assert all(isinstance(store, LightningStoreThreaded) for store in seen)
