"""Whatever an agent raises fails that attempt with the agent's own type and message; only a stop of the runner itself
(its task cancelled) stops the runner. BaseExceptions that are not Exceptions included: KeyboardInterrupt,
CancelledError, GreenletExit, pytest's Failed and a class of the user's own."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

import agentlightning as agl
from agentlightning.runner import LitAgentRunner
from agentlightning.runner.results import AgentBaseException
from agentlightning.store import InMemoryLightningStore
from agentlightning.tracer import DummyTracer

from .base_exception_agents import AsyncRaisingAgent, BaseExceptionAgent, OwnBaseException, SyncRaisingAgent


@pytest.fixture
async def store() -> AsyncIterator[InMemoryLightningStore]:
    instance = InMemoryLightningStore()
    yield instance
    await instance.close()


def _runner(max_rollouts: int) -> LitAgentRunner[Any]:
    return LitAgentRunner(tracer=DummyTracer(), max_rollouts=max_rollouts, heartbeat_interval=5.0, poll_interval=0.05)


async def _serve(agent: Any, store: InMemoryLightningStore, tasks: list[Any]) -> list[agl.Rollout]:
    ids = [(await store.enqueue_rollout(task)).rollout_id for task in tasks]
    runner = _runner(len(tasks))
    with runner.run_context(agent=agent, store=store):
        await asyncio.wait_for(runner.iter(), timeout=30)
    return list(await store.wait_for_rollouts(rollout_ids=ids, timeout=5))


async def _error(store: InMemoryLightningStore, rollout_id: str) -> tuple[Any, Any]:
    attempt = await store.get_latest_attempt(rollout_id)
    assert attempt is not None
    metadata = attempt.metadata or {}
    return metadata.get("error_type"), metadata.get("error")


KINDS = [
    ("own", "OwnBaseException", "OwnBaseException: raised by the agent"),
    ("keyboard", "KeyboardInterrupt", "KeyboardInterrupt: raised by the agent"),
    ("cancelled", "CancelledError", "CancelledError: raised by the agent"),
    ("greenlet", "GreenletExit", "GreenletExit: raised by the agent"),
    ("pytest_failed", "Failed", "Failed: raised by the agent"),
]


@pytest.mark.parametrize("agent_class", [SyncRaisingAgent, AsyncRaisingAgent], ids=["sync", "async"])
@pytest.mark.parametrize(("kind", "error_type", "error"), KINDS, ids=[kind for kind, _, _ in KINDS])
async def test_a_base_exception_raised_by_the_agent_fails_its_attempt_and_the_runner_goes_on(
    store: InMemoryLightningStore, agent_class: type[SyncRaisingAgent], kind: str, error_type: str, error: str
) -> None:
    rollouts = await _serve(agent_class(), store, [{"raise": kind}, {"reward": 0.5}])
    assert [rollout.status for rollout in rollouts] == ["failed", "succeeded"]
    assert await _error(store, rollouts[0].rollout_id) == (error_type, error)


async def test_step_raises_the_agents_failure_as_an_exception_naming_what_it_raised(
    store: InMemoryLightningStore,
) -> None:
    runner = _runner(1)
    with runner.run_context(agent=AsyncRaisingAgent(), store=store), pytest.raises(AgentBaseException) as raised:
        await runner.step({"raise": "own"})
    assert isinstance(raised.value.original, OwnBaseException)
    (rollout,) = await store.query_rollouts()
    assert rollout.status == "failed"


@pytest.mark.parametrize("agent_class", [SyncRaisingAgent, AsyncRaisingAgent], ids=["sync", "async"])
async def test_cancelling_the_runner_while_the_agent_runs_stops_the_runner_and_records_the_interruption(
    store: InMemoryLightningStore, agent_class: type[SyncRaisingAgent]
) -> None:
    agent = agent_class()
    rollout = await store.enqueue_rollout({"wait": True})
    runner = _runner(1)
    with runner.run_context(agent=agent, store=store):
        task = asyncio.ensure_future(runner.iter())
        assert await asyncio.to_thread(agent.started.wait, 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    agent.release()
    assert await _error(store, rollout.rollout_id) == (
        "RunnerInterrupted",
        "the runner was stopped before the rollout finished",
    )


def test_an_shm_dev_run_survives_an_agent_raising_its_own_base_exception() -> None:
    trainer = agl.Trainer(strategy="shm", n_runners=1, progress="off", algorithm=agl.Baseline(polling_interval=0.05))
    trainer.dev(BaseExceptionAgent(), [{"raise": "own"}, {"reward": 1.0}])
    summary = trainer.algorithm.summary  # type: ignore[union-attr]
    assert summary is not None and summary.by_mode["train"].statuses == {"failed": 1, "succeeded": 1}


@pytest.mark.slow
def test_a_cs_runner_process_survives_an_agent_raising_keyboard_interrupt() -> None:
    trainer = agl.Trainer(n_runners=1, progress="off", algorithm=agl.Baseline(polling_interval=0.05))
    trainer.dev(BaseExceptionAgent(), [{"raise": "keyboard"}, {"reward": 1.0}])
    summary = trainer.algorithm.summary  # type: ignore[union-attr]
    assert summary is not None and summary.by_mode["train"].statuses == {"failed": 1, "succeeded": 1}
