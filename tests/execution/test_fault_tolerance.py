"""Fault tolerance with real processes: a runner killed mid-rollout, a store server restarted mid-run, a runner
stopped past its unresponsive timeout and resumed."""

from __future__ import annotations

import json
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
from agentlightning.types import EnqueueRolloutRequest, RolloutConfig

from ..runner.agents import PidAgent
from .helpers import STALE_MARK, EnqueueAllAlgorithm, StopAwareAgent

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


class OutageTolerantAlgorithm(EnqueueAllAlgorithm):
    """EnqueueAllAlgorithm whose waiting rides out a store outage (the test restarts the store server)."""

    async def run(self, train_dataset: Any = None, val_dataset: Any = None) -> None:
        import asyncio

        store = self.get_store()
        requests = [EnqueueRolloutRequest(input=item, mode="train", config=self.config) for item in train_dataset or []]
        self.rollout_ids = [rollout.rollout_id for rollout in await store.enqueue_many_rollouts(requests)]
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            try:
                self.finished = await store.wait_for_rollouts(rollout_ids=self.rollout_ids, timeout=1.0)
            except ConnectionError:  # the server is restarting
                await asyncio.sleep(0.2)
                continue
            if len(self.finished) == len(self.rollout_ids):
                return


def test_runners_ride_out_a_restart_of_the_store_server(sqlite_server: tuple[str, Any, Any]) -> None:
    url, stop_server, start_server = sqlite_server
    config = RolloutConfig(max_attempts=3, retry_condition=["unresponsive"], unresponsive_seconds=10.0)
    algorithm = OutageTolerantAlgorithm(config=config, timeout=120)
    # A URL, not a client object: the runner processes talk to the server itself (a client object would be served
    # through a local proxy that never goes down, and the outage would stay inside the algorithm's process).
    trainer = agl.Trainer(algorithm=algorithm, n_runners=2, runner=_runner(), store=url, progress="off")
    assert trainer.strategy.managed_store is False  # type: ignore[attr-defined]
    thread, errors = _fit_in_thread(trainer, PidAgent(), [{"sleep": 0.2} for _ in range(40)])
    client = agl.store_from_url(url)

    def succeeded() -> int:
        return len(agl_run(client.query_rollouts(status_in=["succeeded"])))

    _wait_for(lambda: succeeded() >= 5, 60, "the first rollouts")
    stop_server()
    time.sleep(1.5)
    start_server()
    assert succeeded() < 40  # the outage hit the run in the middle
    thread.join(120)
    assert not thread.is_alive() and not errors, errors
    finished = agl_run(client.query_rollouts(status_in=["succeeded"]))
    assert len(finished) == 40
    for rollout in finished:
        spans = agl_run(client.query_spans(rollout.rollout_id, "latest"))
        assert agl.find_final_reward(spans) is not None


class WaitForStaleWrite(EnqueueAllAlgorithm):
    """EnqueueAllAlgorithm that, once every rollout finished, keeps the run going until a stale attempt was
    recorded (the resumed runner's write), so the test sees what that write did."""

    async def run(self, train_dataset: Any = None, val_dataset: Any = None) -> None:
        import asyncio

        await super().run(train_dataset, val_dataset)
        store = self.get_store()
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            for rollout_id in self.rollout_ids:
                for attempt in await store.query_attempts(rollout_id):
                    if STALE_MARK in str((attempt.metadata or {}).get("error")):
                        return
            await asyncio.sleep(0.1)


def _stop_a_sleeping_runner(markers: Path, seconds_left: float) -> tuple[int, str]:
    """SIGSTOP a runner process in the middle of its agent's sleep (at least `seconds_left` of it still to go);
    returns its pid and the rollout it was running."""

    def find() -> Any:
        for path in markers.glob("sleeping-*"):
            try:
                state = json.loads(path.read_text())
            except (OSError, ValueError):  # finished meanwhile, or being written
                continue
            if time.time() - state["since"] < 1.0 - seconds_left:
                pid = int(path.name.split("-")[1])
                (markers / f"stopped-{pid}").touch()
                os.kill(pid, signal.SIGSTOP)
                return pid, state["rollout_id"]
        return None

    return _wait_for(find, 60, "a runner in the middle of a rollout")


def test_a_resumed_runner_does_not_overwrite_the_retry_that_superseded_it(tmp_path: Path) -> None:
    config = RolloutConfig(max_attempts=2, retry_condition=["unresponsive"], unresponsive_seconds=1.5)
    algorithm = WaitForStaleWrite(config=config, timeout=60)
    trainer = agl.Trainer(algorithm=algorithm, n_runners=2, runner=_runner(), progress="off")
    tasks = [{"sleep": 1.0, "markers": str(tmp_path)} for _ in range(6)]
    thread, errors = _fit_in_thread(trainer, StopAwareAgent(), tasks)
    store = trainer.store
    victim, stopped_rollout = _stop_a_sleeping_runner(tmp_path, seconds_left=0.5)
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
    stale, retry = agl_run(store.query_attempts(stopped_rollout))
    # The stale write happened (the resumed process failed its attempt), and landed on the stale attempt only.
    assert stale.status == "failed"
    assert f"{STALE_MARK} of process {victim}" in (stale.metadata or {})["error"]
    # The retry's outcome stands: the rollout is succeeded with the retry's attempt and reward.
    assert rollout.status == "succeeded"
    assert rollout.attempt.attempt_id == retry.attempt_id
    assert retry.status == "succeeded" and retry.worker_id != stale.worker_id
    assert (retry.metadata or {})["final_reward"] not in (None, float(victim))
