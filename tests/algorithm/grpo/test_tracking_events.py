"""GRPO's records reach experiment tracking: the settings, every step's numbers at their step, each evaluation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentlightning.algorithm.grpo.reporting.tracking import track_event
from agentlightning.algorithm.tracking import Tracker


class Recording(Tracker):
    def __init__(self) -> None:
        self.metrics: list[tuple[int, dict[str, float]]] = []
        self.texts: list[tuple[int, str, str]] = []
        self.params: dict[str, Any] = {}
        self.closed = 0

    def log_params(self, params: Any) -> None:
        self.params.update(params)

    def log_metrics(self, metrics: Any, step: int) -> None:
        self.metrics.append((step, dict(metrics)))

    def log_text(self, name: str, text: str, step: int) -> None:
        self.texts.append((step, name, text))

    def close(self) -> None:
        self.closed += 1


def test_a_step_event_becomes_its_numbers_at_its_step_and_its_warnings_as_text() -> None:
    tracker = Recording()
    entry = {
        "step": 4,
        "reward_mean": 0.5,
        "seconds": {"update": 2.0},
        "agents": {"solver": {"reward_mean": 0.75}},
        "health": {"warnings": [{"code": "collapse", "message": "90 % of tool calls pick add"}]},
    }
    track_event(tracker, "step", entry, step=3)
    assert tracker.metrics == [(4, {"reward_mean": 0.5, "seconds/update": 2.0, "agents/solver/reward_mean": 0.75})]
    assert tracker.texts == [(4, "warnings", "90 % of tool calls pick add")]


def test_an_evaluation_becomes_eval_label_numbers_without_its_items() -> None:
    tracker = Recording()
    report = {"label": "after", "step": 12, "mean_reward": 0.9, "n": 50, "failed": 0, "items": [{"task": 1}]}
    track_event(tracker, "evaluation", report, step=12)
    assert tracker.metrics == [(12, {"eval/after/mean_reward": 0.9, "eval/after/n": 50.0, "eval/after/failed": 0.0})]


def test_other_events_and_no_tracker_record_nothing() -> None:
    tracker = Recording()
    track_event(tracker, "rollouts", {"done": 1, "total": 2}, step=0)
    track_event(None, "step", {"step": 1, "reward_mean": 1.0}, step=0)
    assert tracker.metrics == [] and tracker.texts == []


def test_a_grpo_run_writes_its_settings_steps_and_evaluations_to_tensorboard(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    import agentlightning as agl
    from agentlightning.algorithm.grpo import GRPO
    from agentlightning.inference.tiny import build_tiny_engine

    from .agents import digit_agent

    algorithm = GRPO(
        engine=build_tiny_engine(seed=0),
        output_dir=tmp_path / "run",
        group_size=2,
        tasks_per_step=2,
        learning_rate=3e-2,
        temperature=1.0,
        seed=0,
        max_steps=2,
        tracking="tensorboard",
    )
    trainer = agl.Trainer(algorithm=algorithm, n_runners=1, strategy="cs", progress="off")
    trainer.fit(digit_agent, [{"id": i} for i in range(4)], val_dataset=[{"id": 100}, {"id": 101}])
    events = EventAccumulator(str(tmp_path / "run" / "tensorboard"), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    steps = [event.step for event in events.Scalars("rollouts")]
    assert steps == [1, 2]
    assert [e.value for e in events.Scalars("reward_mean")] == [
        pytest.approx(entry["reward_mean"]) for entry in algorithm.history
    ]
    assert [e.step for e in events.Scalars("eval/before/mean_reward")] == [0]
    assert [e.step for e in events.Scalars("eval/after/mean_reward")] == [2]
    assert "params" in events.Tags()["tensors"]
