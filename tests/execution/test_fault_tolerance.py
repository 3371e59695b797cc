"""Fault tolerance with real processes: a runner killed mid-rollout, a store server restarted mid-run, a runner
stopped past its unresponsive timeout and resumed."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import agentlightning as agl
from agentlightning.runner import LitAgentRunner
from agentlightning.store.base import LightningStore
from agentlightning.store.http.client.client import LightningStoreClient
from agentlightning.store.http.client.retry import RetryPolicy
from agentlightning.types import RolloutConfig

from ..runner.agents import PidAgent
from .helpers import EnqueueAllAlgorithm

pytestmark = pytest.mark.slow


def _runner() -> LitAgentRunner[Any]:
    return LitAgentRunner(heartbeat_interval=0.3, interval_jitter=0.0, poll_interval=0.1)


def _fit_in_thread(
    trainer: agl.Trainer, agent: Any, dataset: list[Any]
) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def target() -> None:
        try:
            trainer.fit(agent, dataset)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, errors


def _wait_for(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _busy_runner_pid(store: LightningStore) -> int:
    """The pid of a runner process that is running an attempt right now."""

    def find() -> Any:
        workers = agl_run(store.query_workers())
        for worker in workers:
            stats = worker.heartbeat_stats or {}
            if worker.status == "busy" and worker.current_rollout_id and stats.get("pid") not in (None, os.getpid()):
                return stats["pid"]
        return None

    return _wait_for(find, 60, "a busy runner process")


def agl_run(coroutine: Any) -> Any:
    import asyncio

    return asyncio.run(coroutine)


def test_a_runner_killed_mid_rollout_has_its_rollout_retried_by_another_runner() -> None:
    config = RolloutConfig(max_attempts=3, retry_condition=["unresponsive", "failed"], unresponsive_seconds=5.0)
    algorithm = EnqueueAllAlgorithm(config=config, timeout=120)
    trainer = agl.Trainer(algorithm=algorithm, n_runners=2, runner=_runner(), progress="off")
    thread, errors = _fit_in_thread(trainer, PidAgent(), [{"sleep": 0.4} for _ in range(16)])
    victim = _busy_runner_pid(trainer.store)
    os.kill(victim, signal.SIGKILL)
    thread.join(120)
    assert not thread.is_alive() and not errors, errors
    assert len(algorithm.finished) == 16
    assert all(rollout.status == "succeeded" for rollout in algorithm.finished)
    retried = []
    for rollout in algorithm.finished:
        attempts = agl_run(trainer.store.query_attempts(rollout.rollout_id))
        if len(attempts) > 1:
            retried.append(attempts)
    assert retried, "the killed runner's rollout should have a second attempt"
    first = retried[0][0]
    assert first.status == "unresponsive"
    assert "died with signal SIGKILL" in (first.metadata or {})["error"]
    assert retried[0][-1].status == "succeeded"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def sqlite_server(tmp_path: Path) -> Iterator[tuple[str, Callable[[], None], Callable[[], None]]]:
    """An `agl store` process on a SQLite file, with functions to stop and start it again on the same port."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        sys.executable,
        "-m",
        "agentlightning",
        "store",
        "--backend",
        f"sqlite:///{tmp_path / 'run.db'}",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    state: dict[str, subprocess.Popen[bytes]] = {}

    def start() -> None:
        state["process"] = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def up() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    return True
            except OSError:
                return False

        _wait_for(up, 30, "the store server")

    def stop() -> None:
        process = state["process"]
        process.send_signal(signal.SIGTERM)
        process.wait(30)

    start()
    try:
        yield url, stop, start
    finally:
        if state["process"].poll() is None:
            state["process"].kill()
            state["process"].wait(10)


def test_runners_ride_out_a_restart_of_the_store_server(sqlite_server: tuple[str, Any, Any]) -> None:
    url, stop_server, start_server = sqlite_server
    config = RolloutConfig(max_attempts=3, retry_condition=["unresponsive"], unresponsive_seconds=10.0)
    algorithm = EnqueueAllAlgorithm(config=config, timeout=120)
    # The algorithm's client waits out the restart however long the new server takes to start on a loaded machine
    # (the default policy gives up after 3-6 s).
    patient = LightningStoreClient(url, retry_policy=RetryPolicy(max_retries=15, max_delay=5.0))
    trainer = agl.Trainer(algorithm=algorithm, n_runners=2, runner=_runner(), store=patient, progress="off")
    thread, errors = _fit_in_thread(trainer, PidAgent(), [{"sleep": 0.1} for _ in range(30)])
    client = agl.store_from_url(url)

    def some_done() -> bool:
        return len(agl_run(client.query_rollouts(status_in=["succeeded"]))) >= 5

    _wait_for(some_done, 60, "the first rollouts")
    stop_server()
    time.sleep(1.5)
    start_server()
    thread.join(120)
    assert not thread.is_alive() and not errors, errors
    finished = agl_run(client.query_rollouts(status_in=["succeeded"]))
    assert len(finished) == 30
    for rollout in finished:
        spans = agl_run(client.query_spans(rollout.rollout_id, "latest"))
        assert agl.find_final_reward(spans) is not None


def test_a_resumed_runner_does_not_overwrite_the_retry_that_superseded_it() -> None:
    config = RolloutConfig(max_attempts=2, retry_condition=["unresponsive"], unresponsive_seconds=1.5)
    algorithm = EnqueueAllAlgorithm(config=config, timeout=120)
    trainer = agl.Trainer(algorithm=algorithm, n_runners=2, runner=_runner(), progress="off")
    thread, errors = _fit_in_thread(trainer, PidAgent(), [{"sleep": 1.0} for _ in range(6)])
    store = trainer.store
    victim = _busy_runner_pid(store)
    workers = agl_run(store.query_workers())
    (stopped,) = [w for w in workers if (w.heartbeat_stats or {}).get("pid") == victim]
    stopped_rollout = stopped.current_rollout_id
    os.kill(victim, signal.SIGSTOP)
    try:

        def superseded() -> bool:
            attempts = agl_run(store.query_attempts(stopped_rollout))
            return len(attempts) == 2 and attempts[1].status == "succeeded"

        _wait_for(superseded, 60, "the retry of the stopped runner's rollout")
    finally:
        os.kill(victim, signal.SIGCONT)
    thread.join(120)
    assert not thread.is_alive() and not errors, errors
    rollout = agl_run(store.get_rollout_by_id(stopped_rollout))
    attempts = agl_run(store.query_attempts(stopped_rollout))
    assert rollout.status == "succeeded"
    assert rollout.attempt.attempt_id == attempts[1].attempt_id
    assert attempts[1].worker_id != stopped.worker_id
    assert (attempts[1].metadata or {})["final_reward"] != float(victim)
    latest_spans = agl_run(store.query_spans(stopped_rollout, "latest"))
    assert all(span.attempt_id == attempts[1].attempt_id for span in latest_spans)
