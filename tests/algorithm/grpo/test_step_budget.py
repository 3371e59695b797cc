"""When a GRPO run starts another training step (`sampling.schedule.StepBudget`)."""

from __future__ import annotations

import logging

import pytest

from agentlightning.algorithm.grpo import GRPOConfig
from agentlightning.algorithm.grpo.sampling import schedule
from agentlightning.algorithm.grpo.sampling.schedule import StepBudget


def test_a_step_count_stops_the_run_at_max_steps() -> None:
    budget = StepBudget(GRPOConfig(max_steps=2), n_tasks=10)
    assert [budget.allows(step) for step in range(4)] == [True, True, False, False]


def test_without_a_step_count_or_time_budget_the_run_stops_after_its_epochs() -> None:
    budget = StepBudget(GRPOConfig(tasks_per_step=4, epochs=2), n_tasks=10)  # ceil(10 * 2 / 4) = 5 steps
    assert budget.allows(4) and not budget.allows(5)


def test_a_time_budget_stops_the_run_once_its_minutes_have_passed(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    now = [1000.0]
    monkeypatch.setattr(schedule.time, "monotonic", lambda: now[0])
    with caplog.at_level(logging.INFO, logger="agentlightning.algorithm.grpo.grpo"):
        budget = StepBudget(GRPOConfig(max_minutes=1.0), n_tasks=10)
        assert budget.allows(0)
        now[0] += 59.0
        assert budget.allows(7)  # no step count: only the time stops it
        now[0] += 1.0
        assert not budget.allows(8)
    assert "max_minutes=1 bounds the training steps" in caplog.text
    assert "time budget (1.0 min) is used up after step 8" in caplog.text


def test_max_steps_stops_a_run_with_time_left() -> None:
    budget = StepBudget(GRPOConfig(max_minutes=60.0, max_steps=1), n_tasks=10)
    assert budget.allows(0) and not budget.allows(1)
