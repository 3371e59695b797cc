"""GRPO through the whole loop: Trainer, runner processes, store server, LLM proxy, adapter, in-process inference.

A tiny random model learns to answer with digits (reward: the share of digits in the answer) within a few steps.
"""

from __future__ import annotations

import logging
import statistics
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

import agentlightning as agl
from agentlightning.algorithm.grpo import GRPO
from agentlightning.inference.tiny import build_tiny_engine

from .agents import digit_agent, quirky_agent


def _grpo(tmp_path: Path, **settings: Any) -> GRPO:
    defaults: dict[str, Any] = dict(
        engine=build_tiny_engine(seed=0),
        output_dir=tmp_path / "run",
        group_size=8,
        tasks_per_step=2,
        learning_rate=3e-2,
        temperature=1.0,
        seed=0,
        checkpoint_every=3,
        truncated="keep",  # the tiny random model seldom ends an answer before max_tokens: train the cut answers
    )
    defaults.update(settings)
    return GRPO(**defaults)


def _fit(algorithm: GRPO, agent: Any, train: list[Any], val: Any = None, runners: int = 2) -> agl.Trainer:
    trainer = agl.Trainer(algorithm=algorithm, n_runners=runners, strategy="cs", progress="off")
    trainer.fit(agent, train, val_dataset=val)
    return trainer


def test_reward_rises_through_the_full_loop(tmp_path: Path) -> None:
    algorithm = _grpo(tmp_path, max_steps=12)
    _fit(algorithm, digit_agent, [{"id": i} for i in range(8)], val=[{"id": 100 + i} for i in range(4)])
    rewards = [entry["reward_mean"] for entry in algorithm.history]
    assert len(rewards) == 12
    assert statistics.fmean(rewards[-3:]) > statistics.fmean(rewards[:3]) + 0.15
    assert statistics.fmean(rewards[-3:]) > 0.5
    first = algorithm.history[0]  # every call of the first step with ids is trained on; one without is counted
    assert first["samples"] == 16 - first["skips"]["rollouts_without_token_ids"]
    assert algorithm.skips.rollouts_without_token_ids <= 2 and algorithm.skips.rollouts_failed == 0
    assert [e.label for e in algorithm.evaluations] == ["before", "after"]
    last_update = max(entry["step"] for entry in algorithm.history if entry["samples"])
    assert algorithm.engine is not None and algorithm.engine.weights_version == f"step-{last_update}"
    assert (tmp_path / "run" / "checkpoints" / "latest").read_text().strip() == "step-000012"


def test_a_second_run_resumes_from_the_last_checkpoint(tmp_path: Path) -> None:
    first = _grpo(tmp_path, max_steps=3)
    _fit(first, digit_agent, [{"id": i} for i in range(8)])
    second = _grpo(tmp_path, max_steps=5)
    _fit(second, digit_agent, [{"id": i} for i in range(8)])
    assert second.resumed_from is not None and second.resumed_from.endswith("step-000003")
    assert [entry["step"] for entry in second.history] == [1, 2, 3, 4, 5]


def test_bad_rollouts_are_skipped_and_counted_without_stopping_the_run(tmp_path: Path) -> None:
    # The order puts every kind that calls no model into a step with one that does (seed 0 draws the tasks
    # [4, 2], [1, 0], [5, 3]): a step whose rollouts make no LLM call at all stops the run (tested elsewhere).
    kinds = ["unparsable", "silent", "no_call", "nan", "constant", "learn"]
    train = [{"id": i, "kind": kind, "value": "not a number"} for i, kind in enumerate(kinds)]
    algorithm = _grpo(tmp_path, max_steps=3, tasks_per_step=2, group_size=2, informative_groups=0)
    _fit(algorithm, quirky_agent, train)
    skips = algorithm.skips  # one epoch: every kind ran once, as a group of 2
    assert skips.rollouts_failed == 4  # the unparsable item and the NaN reward (the runner refuses it)
    assert skips.rollouts_without_reward == 2  # the silent agent
    assert skips.rollouts_without_token_ids >= 2  # answered without calling the model (2 rollouts)
    assert skips.groups_zero_variance >= 2  # the constant reward and the no-call group
    assert len(algorithm.history) == 3
    assert sum(entry["rollouts"] for entry in algorithm.history) == 12


def test_a_step_where_every_group_has_equal_rewards_is_logged_as_info_not_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agentlightning.algorithm.grpo")
    algorithm = _grpo(tmp_path, max_steps=1, tasks_per_step=2, group_size=2, informative_groups=0)
    _fit(algorithm, quirky_agent, [{"id": i, "kind": "constant"} for i in range(2)])
    (record,) = [r for r in caplog.records if "nothing to learn from" in r.getMessage()]
    assert record.levelno == logging.INFO
    assert algorithm.skips.groups_zero_variance == 2 and algorithm.skips.steps_without_update == 1


def test_a_step_samples_fresh_tasks_until_it_has_the_informative_groups_asked_for(tmp_path: Path) -> None:
    # 3 tasks with a constant reward (no signal) and 2 whose rewards vary; the step looks for 2 varying groups
    train = [{"id": i, "kind": "constant"} for i in range(3)] + [{"id": 3 + i, "kind": "random"} for i in range(2)]
    algorithm = _grpo(tmp_path, max_steps=1, tasks_per_step=1, group_size=4, informative_groups=2, max_tasks_per_step=5)
    _fit(algorithm, quirky_agent, train)
    (entry,) = algorithm.history
    assert entry["informative_groups"] == 2
    assert entry["samples"] == 8  # the two varying groups, 4 rollouts each, one call per rollout
    assert entry["sampling_rounds"] >= 2  # one task per round at first: a single round cannot give 2 groups
    assert 2 <= entry["tasks"] <= 5
    assert algorithm.group_sampling.extra_tasks == entry["tasks"] - 1
    assert algorithm.skips.groups_zero_variance == entry["tasks"] - 2
    assert algorithm.group_sampling.steps_short == 0


def test_a_step_builds_each_of_its_rollouts_into_samples_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentlightning.algorithm.grpo.learning import samples

    built: list[int] = []  # the rollouts given to each call of the sample builder, wherever it is called from

    def counting(data: list[Any], *args: Any, **kwargs: Any) -> Any:
        built.append(len(data))
        return original(data, *args, **kwargs)

    original = samples.build_samples
    for name, module in list(sys.modules.items()):
        if name.startswith("agentlightning.algorithm.grpo") and getattr(module, "build_samples", None) is original:
            monkeypatch.setattr(module, "build_samples", counting)
    train = [{"id": i, "kind": "constant"} for i in range(3)] + [{"id": 3 + i, "kind": "random"} for i in range(2)]
    algorithm = _grpo(tmp_path, max_steps=1, tasks_per_step=1, group_size=4, informative_groups=2, max_tasks_per_step=5)
    _fit(algorithm, quirky_agent, train)
    (entry,) = algorithm.history
    assert entry["sampling_rounds"] >= 2 and len(built) == entry["sampling_rounds"]
    assert sum(built) == entry["rollouts"]  # every rollout was built once, and the update trained on that build
    assert len(algorithm.last_samples) == entry["samples"] == 8


def test_sampling_for_informative_groups_stops_at_the_task_budget_and_is_counted(tmp_path: Path) -> None:
    algorithm = _grpo(tmp_path, max_steps=1, tasks_per_step=1, group_size=2, informative_groups=1, max_tasks_per_step=3)
    _fit(algorithm, quirky_agent, [{"id": i, "kind": "constant"} for i in range(4)])
    (entry,) = algorithm.history
    assert (entry["tasks"], entry["sampling_rounds"], entry["samples"]) == (3, 3, 0)
    assert algorithm.group_sampling.to_dict() == {"steps": 1, "tasks": 3, "extra_tasks": 2, "steps_short": 1}
    assert algorithm.skips.steps_without_update == 1
