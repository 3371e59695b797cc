"""The Trainer's progress shows the algorithm's events: the panel beside the rollout counts, one log line per step
and per evaluation, every event in the JSON-lines file; the Trainer subscribes it while progress is on."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

import agentlightning as agl
from agentlightning.store import InMemoryLightningStore
from agentlightning.trainer.progress import JsonLinesSink, LogSink, ProgressMonitor, ProgressSnapshot, RichSink

from ..algorithm.test_events import COLLAPSE, HEALTH, step
from ..execution.helpers import EnqueueAllAlgorithm
from ..runner.agents import ScriptedAgent


def _monitor(*sinks: Any) -> ProgressMonitor:
    monitor = ProgressMonitor(InMemoryLightningStore(), mode="off")
    monitor._sinks = list(sinks)
    return monitor


def _log_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "agentlightning.trainer"]


def test_a_step_event_shows_in_the_panel_beside_the_rollout_counts() -> None:
    from rich.console import Console

    monitor = _monitor()
    monitor.algorithm.minutes = 15
    monitor.on_algorithm_event("step", step(3, health=HEALTH, warnings=[COLLAPSE]))
    monitor.on_algorithm_event("evaluation", {"label": "before", "step": 0, "mean_reward": 0.25, "n": 4})
    sink = RichSink("title", monitor.algorithm)
    try:
        console = Console(record=True, width=200)
        console.print(sink._render(ProgressSnapshot(succeeded=7)))
        text = console.export_text()
    finally:
        sink.close(None)
    assert "7 succeeded" in text
    assert "step         3  (0.0 of 15 min)" in text
    assert "step reward" in text and "rollout 3.0s, update 1.2s, total 4.5s" in text
    assert "entropy 1.234" in text and "92% of calls pick 'add'. Try balanced steps." in text
    assert "eval before  0.250" in text


def test_log_mode_says_each_step_with_its_reward_and_seconds_at_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agentlightning.trainer")
    monitor = _monitor(LogSink(interval=3600))
    monitor.on_algorithm_event("step", step(1))
    monitor.on_algorithm_event("step", step(2))
    lines = _log_lines(caplog)
    assert len(lines) == 2
    assert lines[1].startswith("step 2: reward 0.500, 8 samples")
    assert lines[1].endswith("rollout 3.0s, update 1.2s, total 4.5s")


def test_log_mode_adds_the_health_and_a_warning_line_when_a_warning_starts(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agentlightning.trainer")
    monitor = _monitor(LogSink(interval=3600))
    monitor.on_algorithm_event("step", step(2, health=HEALTH, warnings=[COLLAPSE]))  # the warning starts at step 2
    monitor.on_algorithm_event("step", step(3, health=HEALTH, warnings=[COLLAPSE]))
    lines = _log_lines(caplog)
    assert [line.split(":")[0] for line in lines] == ["step 2", "  health", "  warning", "step 3", "  health"]
    assert lines[2] == "  warning: 92% of calls pick 'add'. Try balanced steps."


def test_log_mode_says_each_evaluation_and_not_the_rollout_counts(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agentlightning.trainer")
    monitor = _monitor(LogSink(interval=3600))
    monitor.on_algorithm_event("rollouts", {"step": 1, "mode": "val", "done": 2, "total": 4})
    monitor.on_algorithm_event("evaluation", {"label": "after", "step": 2, "mean_reward": 0.5, "n": 4})
    assert _log_lines(caplog) == ["evaluation after at step 2: mean reward 0.500 over 4 tasks"]


def test_the_progress_file_records_each_event_once(tmp_path: Path) -> None:
    path = tmp_path / "progress.jsonl"
    monitor = _monitor(JsonLinesSink(str(path)))
    monitor.on_algorithm_event("rollouts", {"step": 1, "mode": "train", "done": 1, "total": 2})
    monitor.on_algorithm_event("rollouts", {"step": 1, "mode": "train", "done": 1, "total": 2})  # nothing new
    monitor.on_algorithm_event("step", step(1))
    monitor._sinks[0].close(None)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [record["event"] for record in records] == ["rollouts", "step"]
    assert records[1]["payload"]["reward_mean"] == 0.5


def test_the_progress_file_keeps_an_evaluations_figures_without_its_per_task_items(tmp_path: Path) -> None:
    path = tmp_path / "progress.jsonl"
    monitor = _monitor(JsonLinesSink(str(path)))
    items = [{"task": i, "reward": 1.0} for i in range(50)]
    monitor.on_algorithm_event("evaluation", {"label": "after", "step": 2, "mean_reward": 0.5, "n": 50, "items": items})
    monitor._sinks[0].close(None)
    (record,) = [json.loads(line) for line in path.read_text().splitlines()]
    assert record["payload"] == {"label": "after", "step": 2, "mean_reward": 0.5, "n": 50}


def test_a_sink_that_fails_on_an_event_does_not_reach_the_algorithm() -> None:
    class Broken:
        def event(self, kind: str, payload: dict[str, Any], algorithm: Any) -> None:
            raise RuntimeError("terminal gone")

    monitor = _monitor(Broken())
    monitor.on_algorithm_event("step", step(1))
    assert monitor.algorithm.step == 1


class _Stepping(EnqueueAllAlgorithm):
    """Runs its rollouts, then says it finished a step; records how many listeners it had meanwhile."""

    listening = -1

    async def run(self, train_dataset: Any = None, val_dataset: Any = None) -> None:
        self.listening = len(self._event_listeners)
        await super().run(train_dataset, val_dataset)
        self.emit_event("step", step(1))


def test_the_trainer_subscribes_its_progress_to_the_algorithms_events_while_it_runs(tmp_path: Path) -> None:
    algorithm = _Stepping()
    path = tmp_path / "progress.jsonl"
    trainer = agl.Trainer(algorithm=algorithm, strategy="shm", progress="log", progress_file=str(path))
    trainer.fit(ScriptedAgent(), [{"reward": 0.5}])
    assert algorithm.listening == 1
    assert algorithm._event_listeners == ()  # unsubscribed after the run
    events = [json.loads(line) for line in path.read_text().splitlines() if '"event"' in line]
    assert [record["event"] for record in events] == ["step"]


def test_with_progress_off_the_trainer_does_not_subscribe() -> None:
    algorithm = _Stepping()
    agl.Trainer(algorithm=algorithm, strategy="shm", progress="off").fit(ScriptedAgent(), [{"reward": 0.5}])
    assert algorithm.listening == 0
