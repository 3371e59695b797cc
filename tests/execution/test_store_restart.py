"""The algorithm side rides out a restart of the store server that outlasts the store client's own retries: `fit`
finishes, with every task run once (no rollout enqueued twice), and the progress says it was waiting."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

import pytest

import agentlightning as agl
from agentlightning.algorithm.fast import Baseline
from agentlightning.runner import LitAgentRunner

from .._store_server import StoreServerProcess
from ..runner.agents import ScriptedAgent

pytestmark = pytest.mark.slow

OUTAGE_SECONDS = 15.0
"""Longer than the store client's retries (about 6 s at most with the default policy) by more than the progress
monitor's read interval (5 s without a live panel), so the progress sees the algorithm waiting whatever the timing
(at 8 s the algorithm waited only about 2 s after its client gave up, which a loaded machine's reads could miss)."""


def _count(url: str, statuses: list[str]) -> int:
    async def read() -> int:
        client = agl.LightningStoreClient(url)
        try:
            return len(await client.query_rollouts(status_in=statuses))  # type: ignore[arg-type]
        finally:
            await client.close()

    return asyncio.run(read())


def test_baseline_rides_out_a_store_server_restart_longer_than_the_client_retries(tmp_path: Path) -> None:
    tasks = [{"sleep": 0.2, "reward": 1.0} for _ in range(24)]
    progress = tmp_path / "progress.jsonl"
    with StoreServerProcess(tmp_path / "run.db") as server:
        algorithm = Baseline(polling_interval=0.5, max_queue_length=1, span_verbosity="none")
        trainer = agl.Trainer(
            algorithm=algorithm,
            n_runners=2,
            runner=LitAgentRunner(heartbeat_interval=0.5, poll_interval=0.1),
            store=server.url,
            progress="off",
            progress_file=str(progress),
        )
        errors: list[BaseException] = []

        def fit() -> None:
            try:
                trainer.fit(ScriptedAgent(), tasks)
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=fit, daemon=True)
        thread.start()
        deadline = time.monotonic() + 90
        while _count(server.url, ["succeeded"]) < 4:
            assert time.monotonic() < deadline and thread.is_alive(), errors
            time.sleep(0.1)
        server.stop()
        time.sleep(OUTAGE_SECONDS)
        server.start()
        thread.join(120)
        assert not thread.is_alive()
        assert not errors, errors
        assert algorithm.summary is not None and algorithm.summary.rollouts == len(tasks)
        assert _count(server.url, ["succeeded"]) == len(tasks)
        assert _count(server.url, ["queuing", "requeuing", "preparing", "running", "failed"]) == 0
    snapshots = [json.loads(line) for line in progress.read_text().splitlines()]
    waiting = [snapshot for snapshot in snapshots if snapshot.get("store_unreachable_for") is not None]
    assert waiting, "the progress never said it was waiting for the store"
    assert snapshots[-1]["final"] and snapshots[-1]["store_unreachable_for"] is None
