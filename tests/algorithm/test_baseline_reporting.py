"""What a `dev` run (Baseline) tells the user about trajectories: each cause once, counted in the summary, and the
real cause for a rollout that failed; the rollout config (timeout) it enqueues with."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

import agentlightning as agl
from agentlightning.algorithm.baseline_report import summarize
from agentlightning.types import RolloutConfig


class RewardingAgent(agl.LitAgent[Any]):
    def rollout(self, task: Any, resources: Any, rollout: Any) -> float:
        return 1.0  # no LLM call: the adapter finds nothing to train on


class FailingAgent(agl.LitAgent[Any]):
    def rollout(self, task: Any, resources: Any, rollout: Any) -> float:
        raise RuntimeError(f"tool crashed on {task}")


def _dev(agent: Any, tasks: list[Any], **baseline: Any) -> agl.Baseline:
    algorithm = agl.Baseline(polling_interval=0.05, **baseline)
    agl.Trainer(strategy="shm", algorithm=algorithm, progress="off").dev(agent, tasks)
    return algorithm


def _warnings(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and text in r.getMessage()]


def test_an_empty_trajectory_is_warned_about_once_per_run_and_counted_in_the_summary(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    algorithm = _dev(RewardingAgent(), [1, 2, 3, 4])
    (warning,) = _warnings(caplog, "empty trajectory")
    assert "no LLM call captured" in warning and "counted in the summary" in warning
    assert algorithm.summary is not None
    assert algorithm.summary.adapter_notes == {"empty trajectory: no LLM call captured": 4}
    assert "adapter: empty trajectory: no LLM call captured in 4 of 4 rollouts" in algorithm.summary.lines()


def test_a_rollout_that_failed_before_any_span_is_not_blamed_on_the_trace_context(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    algorithm = _dev(FailingAgent(), [1, 2])
    assert _warnings(caplog, "trace context") == []
    assert _warnings(caplog, "empty trajectory") == []
    not_adapted = [r.getMessage() for r in caplog.records if "Not adapted" in r.getMessage()]
    assert len(not_adapted) == 2
    assert "failed before recording any span (RuntimeError: tool crashed on" in not_adapted[0]
    assert algorithm.summary is not None and algorithm.summary.adapter_notes == {}
    assert algorithm.summary.by_mode["train"].statuses == {"failed": 2}


class SlowAgent(agl.LitAgent[Any]):
    async def rollout_async(self, task: Any, resources: Any, rollout: Any) -> float:
        await asyncio.sleep(task)
        return 1.0


def test_a_rollout_timeout_is_set_through_the_baseline_of_a_dev_run() -> None:
    trainer = agl.Trainer(
        strategy="shm",
        progress="off",
        algorithm=agl.Baseline(polling_interval=0.05, rollout_config=RolloutConfig(timeout_seconds=0.5)),
    )
    trainer.dev(SlowAgent(), [60, 0])
    rollouts = asyncio.run(trainer.store.query_rollouts())
    assert sorted(r.status for r in rollouts) == ["failed", "succeeded"]
    assert all(r.config.timeout_seconds == 0.5 for r in rollouts)


def test_trainer_dev_passes_a_rollout_config_to_its_default_baseline() -> None:
    trainer = agl.Trainer(strategy="shm", progress="off")
    trainer.dev(SlowAgent(), [60], rollout_config=RolloutConfig(timeout_seconds=0.5))
    (rollout,) = asyncio.run(trainer.store.query_rollouts())
    assert rollout.status == "failed" and rollout.config.timeout_seconds == 0.5


def test_trainer_dev_refuses_a_rollout_config_its_own_algorithm_would_ignore() -> None:
    trainer = agl.Trainer(strategy="shm", progress="off", algorithm=agl.Baseline())
    with pytest.raises(ValueError, match="rollout_config"):
        trainer.dev(SlowAgent(), [0], rollout_config=RolloutConfig(timeout_seconds=0.5))


def test_summary_lines_name_each_adapter_note_with_its_count() -> None:
    summary = summarize([], adapter_notes={"triplets without token ids": 3})
    assert summary.lines()[-1] == "adapter: triplets without token ids in 3 of 0 rollouts"
