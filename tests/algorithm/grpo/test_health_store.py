"""The run's health record in the store, for the dashboard: one bookkeeping rollout, rewritten each step."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from agentlightning.algorithm.grpo.reporting.health_store import MAX_STEPS_KEPT, HealthRecordWriter, health_record
from agentlightning.store.memory import InMemoryLightningStore
from agentlightning.utils.bookkeeping import is_bookkeeping_rollout

WARNING = {"code": "no_signal", "message": "m", "fix": "f", "since": 2}


def _history(steps: int) -> list[dict[str, Any]]:
    return [
        {"step": s, "health": {"step": s, "entropy": 1.0}, "warnings": [WARNING] if s >= 2 else []}
        for s in range(1, steps + 1)
    ]


def test_the_record_keeps_each_steps_health_with_its_warning_codes_and_the_active_warnings() -> None:
    record = health_record([*_history(3), {"step": 4, "interrupted": True}], {"moved": False})
    assert record["steps"][0] == {"step": 1, "entropy": 1.0, "warnings": []}
    assert [s["warnings"] for s in record["steps"]] == [[], ["no_signal"], ["no_signal"]]
    assert record["warnings"] == [] and record["verdict"] == {"moved": False}  # the last entry holds none
    assert health_record(_history(3))["warnings"] == [WARNING]
    assert len(health_record(_history(MAX_STEPS_KEPT + 3))["steps"]) == MAX_STEPS_KEPT


def test_the_writer_creates_one_finished_bookkeeping_rollout_and_rewrites_it() -> None:
    async def run() -> Any:
        store = InMemoryLightningStore()
        writer = HealthRecordWriter(store)
        first = await writer.save(_history(1))
        assert first is not None and await writer.save(_history(2), {"moved": True}) == first
        return await store.query_rollouts()

    (rollout,) = asyncio.run(run())
    assert is_bookkeeping_rollout(rollout) and rollout.status == "succeeded"
    assert [s["step"] for s in rollout.metadata["grpo_health"]["steps"]] == [1, 2]
    assert rollout.metadata["grpo_health"]["verdict"] == {"moved": True}


class _RefusingStore:
    async def start_rollout(self, **kwargs: Any) -> Any:
        raise ConnectionError("store down")


def test_a_store_that_refuses_the_record_is_logged_once_and_training_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="agentlightning.algorithm.grpo")
    writer = HealthRecordWriter(_RefusingStore())  # type: ignore[arg-type]
    assert asyncio.run(writer.save(_history(1))) is None and asyncio.run(writer.save(_history(2))) is None
    (record,) = [r for r in caplog.records if "health record" in r.getMessage()]
    assert "store down" in record.getMessage()
