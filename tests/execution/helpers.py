"""Algorithms and agents for the execution tests (module level: runner processes import them)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from typing import Any, Optional

from agentlightning.algorithm.base import Algorithm
from agentlightning.litagent import LitAgent
from agentlightning.types import EnqueueRolloutRequest, Rollout, RolloutConfig


class EnqueueAllAlgorithm(Algorithm):
    """Enqueues every training item at once and waits until all are finished (or `timeout` passes)."""

    def __init__(self, config: Optional[RolloutConfig] = None, timeout: float = 120.0) -> None:
        self.config = config
        self.timeout = timeout
        self.finished: list[Rollout] = []
        self.rollout_ids: list[str] = []

    async def run(self, train_dataset: Any = None, val_dataset: Any = None) -> None:
        store = self.get_store()
        requests = [EnqueueRolloutRequest(input=item, mode="train", config=self.config) for item in train_dataset or []]
        rollouts = await store.enqueue_many_rollouts(requests)
        self.rollout_ids = [rollout.rollout_id for rollout in rollouts]
        self.finished = await store.wait_for_rollouts(rollout_ids=self.rollout_ids, timeout=self.timeout)


def ignore_sigint_then_sleep(ready: Any, ignore_term: bool) -> None:
    """A process target that ignores SIGINT (and SIGTERM too when asked) and sleeps."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ready.set()
    while True:
        time.sleep(0.1)


def exit_on_sigint(ready: Any) -> None:
    try:
        ready.set()
        while True:
            time.sleep(0.05)
    except KeyboardInterrupt:
        os._exit(0)


def die_on_sigint(ready: Any) -> None:
    """A process target that keeps the default SIGINT action (the process dies of the signal) and sleeps."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    ready.set()
    while True:
        time.sleep(0.05)


def exit_with(ready: Any, code: int) -> None:
    ready.set()
    os._exit(code)


STALE_MARK = "stale attempt"


class StopAwareAgent(LitAgent[Any]):
    """Sleeps `task["sleep"]` seconds and returns its pid as the reward. While it sleeps, the file
    `sleeping-<pid>` in `task["markers"]` holds the rollout id and the time the sleep began, so a test can stop the
    process (SIGSTOP) in the middle of a rollout. A process the test stopped (it left `stopped-<pid>` there) fails
    the attempt it resumes instead, so the stale attempt's write differs from the write of the retry."""

    def rollout(self, task: Any, resources: Any, rollout: Any) -> Any:
        pid = os.getpid()
        sleeping = os.path.join(task["markers"], f"sleeping-{pid}")
        with open(sleeping + ".tmp", "w") as file:
            json.dump({"rollout_id": rollout.rollout_id, "since": time.time()}, file)
        os.replace(sleeping + ".tmp", sleeping)
        time.sleep(task["sleep"])
        os.remove(sleeping)
        stopped = os.path.join(task["markers"], f"stopped-{pid}")
        if os.path.exists(stopped):
            os.remove(stopped)
            raise RuntimeError(f"{STALE_MARK} of process {pid}")
        return float(pid)


# ------------------------------------------------------------------------- bundles for the shutdown paths
async def short_algorithm(store: Any, event: Any) -> None:
    await asyncio.sleep(0.2)


async def raising_algorithm(store: Any, event: Any) -> None:
    await asyncio.sleep(0.2)
    raise ValueError("algorithm bug")


async def interrupting_algorithm(store: Any, event: Any) -> None:
    await asyncio.sleep(0.2)
    raise KeyboardInterrupt


async def idle_runner(store: Any, worker_id: int, event: Any) -> None:
    while not event.is_set():
        await asyncio.sleep(0.02)


async def timing_out_runner(store: Any, worker_id: int, event: Any) -> None:
    await asyncio.sleep(0.1)
    raise TimeoutError("the runner timed out")


async def stubborn_runner(store: Any, worker_id: int, event: Any) -> None:
    """Ignores the stop flag and Ctrl-C: only SIGTERM or SIGKILL end it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        await asyncio.sleep(0.05)


async def returning_runner(store: Any, worker_id: int, event: Any) -> None:
    return None


class SlowAlgorithmLeavingAMark:
    """Runs `seconds`, then writes `path` (the mark shows the algorithm finished before `execute` returned)."""

    def __init__(self, path: str, seconds: float) -> None:
        self.path = path
        self.seconds = seconds

    async def __call__(self, store: Any, event: Any) -> None:
        await asyncio.sleep(self.seconds)
        with open(self.path, "w", encoding="utf-8") as file:
            file.write("done")


def refuse_to_load() -> None:
    raise ImportError("this agent cannot be imported in the runner process")


class UnloadableBundle:
    """Pickles fine, but cannot be loaded in a runner process (like an agent whose module is missing there)."""

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return (refuse_to_load, ())

    async def __call__(self, store: Any, worker_id: int, event: Any) -> None:
        raise AssertionError("never runs")


async def wait_for_stop_or_30_s(store: Any, event: Any) -> None:
    deadline = time.monotonic() + 30
    while not event.is_set() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


class BlockingSyncAlgorithm(Algorithm):
    """A synchronous algorithm that never looks at the store or the stop flag for `seconds` seconds."""

    def __init__(self, seconds: float = 60.0) -> None:
        self.seconds = seconds

    def run(self, train_dataset: Any = None, val_dataset: Any = None) -> None:
        deadline = time.monotonic() + self.seconds
        while time.monotonic() < deadline:
            time.sleep(0.05)
