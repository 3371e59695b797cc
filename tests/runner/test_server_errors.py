"""A store server that answers 500 now and then (a real server, a real HTTP 500): a finished result is written or kept
until it is, never stranded, and a 500 on a claim or on the worker registration does not end the runner."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Optional

import pytest

from agentlightning.runner import LitAgentRunner, store_calls
from agentlightning.store import InMemoryLightningStore
from agentlightning.store.client_server import LightningStoreClient, LightningStoreServer
from agentlightning.tracer import DummyTracer

from .agents import ScriptedAgent

ROOT = Path(__file__).resolve().parents[2]


class FaultyStore(InMemoryLightningStore):
    """An in-memory store that raises an unexpected error (the server answers 500) on the next `faults[name]` calls
    of an operation; for `update_attempt`, only on status writes (heartbeats get through)."""

    def __init__(self) -> None:
        super().__init__()
        self.faults: dict[str, int] = {}
        self.injected: dict[str, int] = {}

    def _fault(self, name: str) -> None:
        if self.faults.get(name, 0) > 0:
            self.faults[name] -= 1
            self.injected[name] = self.injected.get(name, 0) + 1
            raise RuntimeError(f"injected fault in {name}")

    async def update_attempt(self, rollout_id: str, attempt_id: str, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("status") is not None:
            self._fault("update_attempt")
        return await super().update_attempt(rollout_id, attempt_id, *args, **kwargs)

    async def dequeue_many_rollouts(self, *, limit: int = 1, worker_id: Optional[str] = None) -> Any:
        self._fault("dequeue_many_rollouts")
        return await super().dequeue_many_rollouts(limit=limit, worker_id=worker_id)

    async def update_worker(self, worker_id: str, *args: Any, **kwargs: Any) -> Any:
        self._fault("update_worker")
        return await super().update_worker(worker_id, *args, **kwargs)


@pytest.fixture
async def served() -> AsyncIterator[tuple[FaultyStore, LightningStoreServer]]:
    store = FaultyStore()
    server = LightningStoreServer(store, host="127.0.0.1", port=0)
    await server.start()
    try:
        yield store, server
    finally:
        await server.stop()


def _runner(**kwargs: Any) -> LitAgentRunner[Any]:
    return LitAgentRunner(
        tracer=DummyTracer(), heartbeat_interval=0.2, interval_jitter=0.0, poll_interval=0.05, **kwargs
    )


async def _run(server: LightningStoreServer, max_rollouts: int) -> None:
    client = LightningStoreClient(server.endpoint)
    runner = _runner(max_rollouts=max_rollouts)
    try:
        with runner.run_context(agent=ScriptedAgent(), store=client):
            await asyncio.wait_for(runner.iter(), timeout=60)
    finally:
        await client.close()


async def test_a_500_on_the_final_status_write_is_retried_and_the_rollout_finishes(
    served: tuple[FaultyStore, LightningStoreServer],
) -> None:
    store, server = served
    rollout = await store.enqueue_rollout({"reward": 0.5})  # the default RolloutConfig: no unresponsive timeout
    store.faults["update_attempt"] = 1
    await _run(server, max_rollouts=1)
    assert store.injected == {"update_attempt": 1}
    finished = await store.get_rollout_by_id(rollout.rollout_id)
    assert finished is not None and finished.status == "succeeded"
    (worker,) = await store.query_workers()
    assert worker.status == "idle"


async def test_a_final_status_refused_past_the_retry_window_is_kept_and_written_before_the_next_claim(
    served: tuple[FaultyStore, LightningStoreServer],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(store_calls, "SERVER_ERROR_RETRY_SECONDS", 0.3)
    store, server = served
    first = await store.enqueue_rollout({"reward": 0.5})
    second = await store.enqueue_rollout({"reward": 0.7})
    store.faults["update_attempt"] = 8  # outlasts the retries of one status write
    with caplog.at_level(logging.WARNING, logger="agentlightning.runner"):
        await _run(server, max_rollouts=2)
    assert store.injected == {"update_attempt": 8}
    assert "the runner keeps it and writes it before it claims another rollout" in caplog.text
    done = {r.rollout_id: r for r in await store.query_rollouts()}
    assert done[first.rollout_id].status == "succeeded" and done[second.rollout_id].status == "succeeded"
    first_attempt = await store.get_latest_attempt(first.rollout_id)
    second_attempt = await store.get_latest_attempt(second.rollout_id)
    assert first_attempt is not None and second_attempt is not None and first_attempt.end_time is not None
    assert second_attempt.start_time >= first_attempt.end_time  # not claimed while the first status was unwritten


async def test_a_500_on_the_worker_registration_is_retried_and_the_runner_goes_on(
    served: tuple[FaultyStore, LightningStoreServer],
) -> None:
    store, server = served
    rollout = await store.enqueue_rollout({"reward": 0.5})
    store.faults["update_worker"] = 2
    await _run(server, max_rollouts=1)
    assert store.injected == {"update_worker": 2}
    finished = await store.get_rollout_by_id(rollout.rollout_id)
    assert finished is not None and finished.status == "succeeded"


@pytest.mark.slow
async def test_a_500_on_a_claim_does_not_end_the_agl_runner_process(
    served: tuple[FaultyStore, LightningStoreServer],
) -> None:
    store, server = served
    rollout = await store.enqueue_rollout({"reward": 0.5})
    store.faults["dequeue_many_rollouts"] = 1
    command = [sys.executable, "-m", "agentlightning", "runner", "--store", server.endpoint]
    command += ["--agent", "tests.runner.agents:ScriptedAgent", "--max-rollouts", "1", "--tracer", "dummy"]
    done = await asyncio.to_thread(subprocess.run, command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert store.injected == {"dequeue_many_rollouts": 1}
    assert "answered the claim with a server error" in done.stderr
    finished = await store.get_rollout_by_id(rollout.rollout_id)
    assert finished is not None and finished.status == "succeeded"
