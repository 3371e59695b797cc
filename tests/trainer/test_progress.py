"""Progress: the tracker's arithmetic, log lines, and the rich panel."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import pytest

from agentlightning.trainer.progress import (
    LogSink,
    ProgressSnapshot,
    ProgressTracker,
    RichSink,
    RunSummary,
    format_line,
)
from agentlightning.types import Attempt, AttemptedRollout
from agentlightning.utils.bookkeeping import bookkeeping_metadata


def _finished(
    rollout_id: str, status: str, reward: object, end_time: Optional[float] = None, mode: Optional[str] = None
) -> AttemptedRollout:
    metadata = {"final_reward": reward} if reward != "absent" else {}
    return AttemptedRollout(
        rollout_id=rollout_id,
        input={},
        mode=mode,  # type: ignore[arg-type]
        start_time=0.0,
        end_time=end_time,
        status=status,  # type: ignore[arg-type]
        attempt=Attempt(rollout_id=rollout_id, attempt_id="a", sequence_id=1, start_time=0.0, metadata=metadata),
    )


def test_counts_exclude_what_the_store_held_before_the_run() -> None:
    tracker = ProgressTracker()
    tracker.set_baseline({"succeeded": 5, "failed": 1})
    snapshot = tracker.update({"succeeded": 8, "failed": 2, "running": 3, "queued": 4}, [], 2, 2)
    assert (snapshot.succeeded, snapshot.failed, snapshot.running, snapshot.queued) == (3, 1, 3, 4)
    assert snapshot.done == 4 and snapshot.runners_alive == 2


def test_reward_mean_and_rollouts_without_reward_come_from_attempt_metadata() -> None:
    tracker = ProgressTracker(reward_window=2)
    finished = [_finished("a", "succeeded", 1.0), _finished("b", "succeeded", 0.0), _finished("c", "succeeded", 0.5)]
    finished.append(_finished("d", "succeeded", None))
    finished.append(_finished("e", "succeeded", "absent"))  # not reported by our runner: unknown, not counted
    snapshot = tracker.update({"succeeded": 5}, finished, 1, 1)
    assert snapshot.reward_mean == pytest.approx(0.25)  # the last two rewards
    assert snapshot.without_reward == 1
    again = tracker.update({"succeeded": 5}, finished, 1, 1)  # the same rollouts are not counted twice
    assert again.without_reward == 1


def test_validation_rewards_are_averaged_apart_from_the_training_reward() -> None:
    tracker = ProgressTracker()
    finished = [
        _finished("t1", "succeeded", 0.0, mode="train"),
        _finished("t2", "succeeded", 0.5),  # no mode: a training rollout
        _finished("v1", "succeeded", 1.0, mode="val"),
        _finished("v2", "succeeded", 1.0, mode="test"),
    ]
    snapshot = tracker.update({"succeeded": 4}, finished, 1, 1)
    assert snapshot.reward_mean == pytest.approx(0.25)
    assert snapshot.val_reward_mean == pytest.approx(1.0)
    line = format_line(snapshot)
    assert "reward 0.25, validation reward 1" in line
    assert "validation reward" not in format_line(ProgressSnapshot(reward_mean=0.5))


def test_the_reward_window_keeps_the_newest_rewards_as_the_store_lists_them() -> None:
    tracker = ProgressTracker(reward_window=2)
    oldest_first = [
        _finished(f"r{i}", "succeeded", reward, end_time=100.0 + i) for i, reward in enumerate([0, 0, 1, 1])
    ]
    newest_first = list(reversed(oldest_first))  # what query_rollouts(sort_by="end_time", sort_order="desc") gives
    assert tracker.update({"succeeded": 4}, newest_first, 1, 1).reward_mean == pytest.approx(1.0)


def _bookkeeping(rollout_id: str) -> AttemptedRollout:
    rollout = _finished(rollout_id, "succeeded", "absent")
    rollout.metadata = bookkeeping_metadata("apo_checkpoint")
    return rollout


def test_bookkeeping_rollouts_created_during_the_run_are_not_counted() -> None:
    tracker = ProgressTracker()
    tracker.set_baseline({"succeeded": 0})
    finished = [_finished("a", "succeeded", 1.0), _bookkeeping("ckpt")]
    snapshot = tracker.update({"succeeded": 2}, finished, 1, 1)
    assert snapshot.succeeded == 1 and snapshot.done == 1
    assert tracker.update({"succeeded": 2}, finished, 1, 1).succeeded == 1  # seen once, subtracted once


def test_bookkeeping_rollouts_from_before_the_run_are_left_to_the_baseline() -> None:
    tracker = ProgressTracker()
    tracker.set_baseline({"succeeded": 3}, [_bookkeeping("old-ckpt")])  # a resumed run's record
    snapshot = tracker.update({"succeeded": 4}, [_bookkeeping("old-ckpt"), _finished("a", "succeeded", 1.0)], 1, 1)
    assert snapshot.succeeded == 1


async def test_the_run_summary_leaves_out_an_apo_checkpoint_record() -> None:
    from agentlightning.algorithm.apo.checkpoint import CheckpointRecord
    from agentlightning.algorithm.apo.state import SearchState
    from agentlightning.algorithm.apo.types import APOStats
    from agentlightning.store import InMemoryLightningStore
    from agentlightning.trainer.progress import ProgressMonitor

    store = InMemoryLightningStore()
    await store.start_rollout(input={"old": True})  # already there before the run: the baseline
    monitor = ProgressMonitor(store, mode="off")
    await monitor.start_async()
    work = await store.start_rollout(input={"task": 1})
    await store.update_attempt(work.rollout_id, work.attempt.attempt_id, status="succeeded")
    record = CheckpointRecord(store, "apo")
    await record.save(SearchState(seed=1, stats=APOStats()).to_checkpoint("apo", "fingerprint"))
    await record.save(
        SearchState(seed=1, stats=APOStats()).to_checkpoint("apo", "fingerprint")
    )  # overwritten after a round
    summary = await monitor.stop_async()
    assert (summary.snapshot.succeeded, summary.snapshot.done) == (1, 1)


def test_the_log_sink_writes_at_most_one_line_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agentlightning.trainer")
    sink = LogSink(interval=3600)
    sink.show(ProgressSnapshot(succeeded=3, queued=2))
    sink.show(ProgressSnapshot(succeeded=4))
    lines = [record.getMessage() for record in caplog.records]
    assert lines == [
        "Progress: 3 done (3 succeeded, 0 failed), 0 running, 2 queued, 0.0 rollouts/s, reward n/a, runners 0 alive"
    ]


def test_the_rich_panel_renders_the_counts() -> None:
    from rich.console import Console

    sink = RichSink("title")
    try:
        console = Console(record=True, width=120)
        console.print(sink._render(ProgressSnapshot(succeeded=7, failed=1, reward_mean=0.5, runners_alive=4)))
        text = console.export_text()
    finally:
        sink.close(RunSummary(ProgressSnapshot()))
    assert "7 succeeded" in text and "1 failed" in text and "0.5" in text and "4 alive" in text


_UNCONFIGURED_RUN = """
import agentlightning as agl
from tests.execution.helpers import EnqueueAllAlgorithm
from tests.runner.agents import ScriptedAgent

if __name__ == "__main__":
    trainer = agl.Trainer(algorithm=EnqueueAllAlgorithm(), strategy="shm", progress="log", progress_interval=0.01)
    trainer.fit(ScriptedAgent(), [{"sleep": 0.7, "reward": 0.5}] * 3)  # one runner: longer than a store read (1 s)
"""


def test_progress_and_the_summary_show_when_nothing_configured_logging(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    script = tmp_path / "run.py"
    script.write_text(_UNCONFIGURED_RUN)
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root,
        env=dict(os.environ, PYTHONPATH=str(root)),
        stdin=subprocess.DEVNULL,  # not a terminal: "auto" would log as well
    )
    assert done.returncode == 0, done.stderr
    assert "Progress: " in done.stderr
    assert "Run summary: 3 rollouts finished" in done.stderr


async def test_the_monitor_spends_at_most_a_hundredth_of_the_time_reading_the_store() -> None:
    import time

    from agentlightning.store import InMemoryLightningStore
    from agentlightning.trainer.progress import ProgressMonitor

    class SlowCounts(InMemoryLightningStore):
        reads = 0

        async def query_workers(self, *args: Any, **kwargs: Any) -> Any:
            SlowCounts.reads += 1
            time.sleep(0.05)  # a read of a large store
            return await super().query_workers(*args, **kwargs)

    monitor = ProgressMonitor(SlowCounts(), mode="log", interval=0.01, log_interval=0.05)
    await monitor.start_async()
    await asyncio.sleep(1.5)
    reads = SlowCounts.reads
    await monitor.stop_async()
    assert 1 <= reads <= 2  # the first read after 0.01 s, the next one not before 5 s


def test_the_log_sink_says_at_once_when_the_store_stops_answering(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agentlightning.trainer")
    sink = LogSink(interval=3600)
    sink.show(ProgressSnapshot(succeeded=3))
    sink.show(ProgressSnapshot(succeeded=3, store_unreachable_for=2.0))
    sink.show(ProgressSnapshot(succeeded=3, store_unreachable_for=4.0))  # within the interval: not repeated
    sink.show(ProgressSnapshot(succeeded=5))  # answering again: at once
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 3
    assert lines[1].startswith("Progress: waiting for the store (unreachable for 2 s); last seen: 3 done")
    assert lines[2].startswith("Progress: 5 done")


async def test_the_monitor_shows_a_store_it_cannot_reach_as_waiting() -> None:
    from agentlightning.store import InMemoryLightningStore
    from agentlightning.store.http.errors import StoreConnectionError
    from agentlightning.trainer.progress import ProgressMonitor

    class Restarting(InMemoryLightningStore):
        down = False

        async def query_workers(self, *args: Any, **kwargs: Any) -> Any:
            if self.down:
                raise StoreConnectionError("Cannot reach the LightningStore server")
            return await super().query_workers(*args, **kwargs)

    class Shown:
        def __init__(self) -> None:
            self.snapshots: list[ProgressSnapshot] = []

        def show(self, snapshot: ProgressSnapshot) -> None:
            self.snapshots.append(snapshot)

    store = Restarting()
    monitor = ProgressMonitor(store, mode="off")
    shown = Shown()
    monitor._sinks = [shown]  # type: ignore[list-item]
    await asyncio.to_thread(monitor._tick)
    store.down = True
    await asyncio.to_thread(monitor._tick)
    store.down = False
    await asyncio.to_thread(monitor._tick)
    assert [snapshot.store_unreachable_for is not None for snapshot in shown.snapshots] == [False, True, False]
