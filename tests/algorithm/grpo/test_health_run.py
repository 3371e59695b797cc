"""A GRPO run explains itself: each step's health and warnings reach the history, the step events, the log and
summary.json, with the held-out verdict at the end."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

import agentlightning as agl
from agentlightning.algorithm.grpo import GRPO
from agentlightning.algorithm.grpo.report import training_summary, write_summary
from agentlightning.inference.tiny import build_tiny_engine
from agentlightning.store.memory import InMemoryLightningStore
from agentlightning.utils.bookkeeping import is_bookkeeping_rollout

from .agents import digit_agent, quirky_agent


def _fit(algorithm: GRPO, agent: Any, train: list[Any], val: Any = None, store: Any = None) -> None:
    trainer = agl.Trainer(algorithm=algorithm, n_runners=2, strategy="cs", progress="off", store=store)
    trainer.fit(agent, train, val_dataset=val)


def test_each_step_records_its_health_and_summary_json_holds_it_with_the_verdict(tmp_path: Path) -> None:
    events: list[dict[str, Any]] = []
    algorithm = GRPO(
        engine=build_tiny_engine(seed=0),
        truncated="keep",  # the tiny random model always runs to max_tokens
        group_size=4,
        tasks_per_step=2,
        learning_rate=3e-2,
        max_steps=2,
        seed=0,
        balance_by=lambda task: task["kind"],
        on_event=lambda kind, payload: events.append(payload) if kind == "step" else None,
    )
    train = [{"id": i, "kind": "even" if i % 2 == 0 else "odd"} for i in range(4)]
    store = InMemoryLightningStore()
    _fit(algorithm, digit_agent, train, val=[{"id": 100 + i, "kind": "even"} for i in range(4)], store=store)
    for entry in algorithm.history:
        health = entry["health"]
        assert health["step"] == entry["step"] and isinstance(entry["warnings"], list)
        assert health["informative_share"] == entry["informative_groups"] / entry["tasks"]
        if entry["samples"]:
            assert health["entropy"] > 0 and health["sampled_nll"] > 0
        assert set(health["reward_by_stratum"]) <= {"even", "odd"} and health["reward_by_stratum"]
    assert [e["health"] for e in events] == [e["health"] for e in algorithm.history]
    path = write_summary(tmp_path / "summary.json", training_summary(algorithm))
    summary = json.loads(path.read_text())
    verdict = summary["health"]["verdict"]
    assert verdict["moved"] in (True, False) and verdict["tasks"] == 4 and verdict["message"]
    assert summary["history"][-1]["health"]["entropy"] == algorithm.history[-1]["health"]["entropy"]
    # The dashboard's copy: one bookkeeping rollout that every rollout of the run names
    rollouts = asyncio.run(store.query_rollouts())
    (record,) = [r for r in rollouts if is_bookkeeping_rollout(r)]
    assert {r.metadata["grpo"]["health_record"] for r in rollouts if r is not record} == {record.rollout_id}
    stored = record.metadata["grpo_health"]
    assert [s["step"] for s in stored["steps"]] == [1, 2] and stored["verdict"] == verdict
    assert stored["steps"][-1]["entropy"] == algorithm.history[-1]["health"]["entropy"]


def test_a_run_with_nothing_to_learn_warns_once_and_names_it_in_the_summary(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agentlightning.algorithm.grpo")
    algorithm = GRPO(
        engine=build_tiny_engine(seed=0),
        group_size=2,
        tasks_per_step=1,
        max_steps=4,
        informative_groups=0,
        seed=0,
        truncated="keep",  # the tiny random model always runs to max_tokens
    )
    _fit(algorithm, quirky_agent, [{"id": i, "kind": "constant"} for i in range(4)])
    assert [[w["code"] for w in e["warnings"]] for e in algorithm.history] == [[], [], ["no_signal"], ["no_signal"]]
    logged = [r.getMessage() for r in caplog.records if "[no_signal]" in r.getMessage()]
    assert len(logged) == 1 and logged[0].startswith("GRPO step 3: No informative group for 3 steps")
    (seen,) = training_summary(algorithm)["health"]["warnings"]
    assert (seen["code"], seen["first_step"], seen["last_step"], seen["steps"]) == ("no_signal", 3, 4, 2)
