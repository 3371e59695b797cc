"""How `agl runner` leaves: its workers say they stopped, and SIGTERM stops it like Ctrl-C (attempts recorded,
nothing leaked)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import agentlightning as agl
from agentlightning.runner.heartbeat import STOPPED_AT

ROOT = Path(__file__).resolve().parents[1]


def _command(url: str, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "agentlightning",
        "runner",
        "--store",
        url,
        "--agent",
        "tests.runner.agents:ScriptedAgent",
        "--heartbeat-interval",
        "0.5",
        *args,
    ]


async def _open(url: str) -> Any:
    return agl.store_from_url(url)


def test_the_worker_of_an_agl_runner_that_finished_its_max_rollouts_is_recorded_as_stopped(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'run.db'}"

    async def enqueue() -> None:
        store = await _open(url)
        await store.enqueue_rollout({"reward": 1.0})
        await store.close()

    asyncio.run(enqueue())
    result = subprocess.run(_command(url, "--max-rollouts", "1"), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr

    async def workers() -> list[Any]:
        store = await _open(url)
        try:
            return list(await store.query_workers())
        finally:
            await store.close()

    (worker,) = asyncio.run(workers())
    assert worker.heartbeat_stats is not None and worker.heartbeat_stats[STOPPED_AT] > 0


@pytest.mark.parametrize("n_runners", [1, 2])
def test_sigterm_stops_agl_runner_like_ctrl_c_without_leaking_semaphores(tmp_path: Path, n_runners: int) -> None:
    url = f"sqlite:///{tmp_path / 'run.db'}"

    async def enqueue() -> str:
        store = await _open(url)
        try:
            return (await store.enqueue_rollout({"sleep": 60})).rollout_id
        finally:
            await store.close()

    rollout_id = asyncio.run(enqueue())

    async def latest_attempt() -> Any:
        store = await _open(url)
        try:
            return await store.get_latest_attempt(rollout_id)
        finally:
            await store.close()

    process = subprocess.Popen(
        _command(url, "--n-runners", str(n_runners)), cwd=ROOT, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while asyncio.run(latest_attempt()) is None:  # the agent is running once its attempt exists
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    assert process.returncode == 0, stderr
    assert "leaked semaphore" not in stderr
    attempt = asyncio.run(latest_attempt())
    assert attempt.status == "failed"
    assert (attempt.metadata or {})["error_type"] == "RunnerInterrupted"


def test_a_second_sigterm_while_agl_runner_stops_prints_no_traceback(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'run.db'}"

    async def enqueue() -> None:
        store = await _open(url)
        try:
            for _ in range(2):
                await store.enqueue_rollout({"sleep": 60})
        finally:
            await store.close()

    async def busy_workers() -> int:
        store = await _open(url)
        try:
            return sum(1 for worker in await store.query_workers() if worker.status == "busy")
        finally:
            await store.close()

    asyncio.run(enqueue())
    process = subprocess.Popen(_command(url, "--n-runners", "2"), cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while asyncio.run(busy_workers()) < 2:
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        for _ in range(4):  # the first stops the runners; the others land at different moments of that stop
            process.send_signal(signal.SIGTERM)
            time.sleep(0.1)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    assert "Traceback" not in stderr, stderr
    assert "Interrupted again: killing the runner processes" in stderr
    # 0, or killed by a last SIGTERM that arrived once the stop was over and the default action was back.
    assert process.returncode in (0, -signal.SIGTERM), stderr
