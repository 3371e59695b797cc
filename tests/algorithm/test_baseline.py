"""Baseline: every task once through the real queue, logged per rollout and summarized (store + scripted runner)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from agentlightning import InMemoryLightningStore, PromptTemplate, TraceToMessages
from agentlightning.algorithm import Baseline
from agentlightning.algorithm.baseline_report import RolloutReport, summarize

from .scripted import ScriptedRunner, category_tasks

RESOURCES = {"prompt": PromptTemplate(template="Task {id} in category {category}.\nRule: red.", engine="f-string")}


def _baseline(store: InMemoryLightningStore, **kwargs: Any) -> Baseline:
    baseline = Baseline(polling_interval=0.02, **kwargs)
    baseline.set_store(store)
    baseline.set_initial_resources(dict(RESOURCES))  # type: ignore[arg-type]
    return baseline


async def test_each_rollout_is_logged_with_attempts_spans_and_adapted_data(caplog: pytest.LogCaptureFixture) -> None:
    store = InMemoryLightningStore()
    baseline = _baseline(store, span_verbosity="key_values")
    adapter = TraceToMessages()
    baseline.set_adapter(adapter)
    caplog.set_level(logging.INFO, logger="agentlightning.algorithm")
    async with ScriptedRunner(store, workers=1):
        await baseline.run(category_tasks(["red"], 1, "t"), None)
    text = caplog.text
    assert "Finished with status succeeded" in text
    assert "| Attempt 1] ID: " in text and "Status: succeeded. Worker: runner-0" in text
    assert "| Span " in text and "From " in text and "Attributes: {" in text
    assert "Adapted data: [{'messages': [{" in text and "'role': 'user'" in text


async def test_span_verbosity_keys_logs_attribute_names_only(caplog: pytest.LogCaptureFixture) -> None:
    store = InMemoryLightningStore()
    caplog.set_level(logging.INFO, logger="agentlightning.algorithm")
    async with ScriptedRunner(store, workers=1):
        await _baseline(store).run(category_tasks(["red"], 1, "t"))
    assert "Attribute keys: [" in caplog.text
    assert "Attributes: {" not in caplog.text


async def test_a_short_queue_never_skips_a_sample_and_keeps_dataset_order() -> None:
    store = InMemoryLightningStore()
    tasks = category_tasks(["red", "blue"], 3, "t")
    async with ScriptedRunner(store, workers=1, delay=0.03):
        await _baseline(store, max_queue_length=1).run(tasks)
    rollouts = await store.query_rollouts()
    assert [rollout.input for rollout in rollouts] == tasks
    assert all(rollout.status == "succeeded" for rollout in rollouts)


async def test_initial_resources_are_published_as_default_and_used_by_every_rollout() -> None:
    store = InMemoryLightningStore()
    async with ScriptedRunner(store, workers=2):
        await _baseline(store).run(category_tasks(["red"], 2, "t"), category_tasks(["blue"], 1, "v"))
    assert (await store.get_resources_by_id("default")) is not None
    rollouts = await store.query_rollouts()
    assert {rollout.resources_id for rollout in rollouts} == {"default"}
    assert [rollout.mode for rollout in rollouts] == ["train", "train", "val"]


async def test_the_summary_reports_rewards_statuses_and_spans_per_mode() -> None:
    store = InMemoryLightningStore()
    baseline = _baseline(store, n_epochs=2)
    async with ScriptedRunner(store, workers=2):
        await baseline.run(category_tasks(["red", "blue"], 1, "t"), category_tasks(["red"], 1, "v"))
    summary = baseline.summary
    assert summary is not None and summary.rollouts == 6
    train, val = summary.by_mode["train"], summary.by_mode["val"]
    assert train.statuses == {"succeeded": 4} and train.mean_reward == 0.5  # rule only for red
    assert (train.min_reward, train.max_reward) == (0.0, 1.0)
    assert val.mean_reward == 1.0 and val.mean_spans == 2.0
    assert any("mean reward 0.5000" in line for line in summary.lines())


async def test_an_agent_without_rewards_is_reported_as_such() -> None:
    store = InMemoryLightningStore()
    baseline = _baseline(store)
    async with ScriptedRunner(store, workers=1, reward_fn=lambda rendered, task: None):
        await baseline.run(category_tasks(["red"], 2, "t"))
    assert baseline.summary is not None
    assert baseline.summary.by_mode["train"].mean_reward is None
    assert "no rewards recorded" in baseline.summary.lines()[1]


async def test_empty_datasets_log_an_error_and_return(caplog: pytest.LogCaptureFixture) -> None:
    store = InMemoryLightningStore()
    baseline = _baseline(store)
    await baseline.run([], None)
    assert "nothing to run" in caplog.text
    assert baseline.summary is not None and baseline.summary.rollouts == 0
    assert len(await store.query_rollouts()) == 0


async def test_a_dataset_that_is_not_indexable_is_named_in_the_error() -> None:
    baseline = _baseline(InMemoryLightningStore())
    with pytest.raises(ValueError, match="The val dataset must be indexable"):
        await baseline.run([{"id": 1}], 42)  # type: ignore[arg-type]


async def test_without_initial_resources_runners_use_the_latest(caplog: pytest.LogCaptureFixture) -> None:
    store = InMemoryLightningStore()
    await store.add_resources(dict(RESOURCES))  # type: ignore[arg-type]
    baseline = Baseline(polling_interval=0.02)
    baseline.set_store(store)
    async with ScriptedRunner(store, workers=1):
        await baseline.run(category_tasks(["red"], 1, "t"))
    assert "no initial resources" in caplog.text
    assert baseline.summary is not None and baseline.summary.by_mode["train"].mean_reward == 1.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"train_split": 1.0}, "train_split"),
        ({"n_epochs": 0}, "n_epochs"),
        ({"polling_interval": 0}, "polling_interval"),
        ({"max_queue_length": 0}, "max_queue_length"),
        ({"span_verbosity": "all"}, "span_verbosity"),
    ],
)
def test_bad_arguments_are_rejected_by_name(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Baseline(**kwargs)


def test_summarize_counts_retried_rollouts_and_rollouts_without_mode() -> None:
    reports = [
        RolloutReport("r1", None, "succeeded", attempts=2, spans=3, reward=1.0, seconds=1.0),
        RolloutReport("r2", None, "failed", attempts=1, spans=0, reward=None, seconds=None),
    ]
    summary = summarize(reports, wall_seconds=2.0).by_mode["none"]
    assert summary.retried == 1 and summary.statuses == {"succeeded": 1, "failed": 1}
    assert summary.with_reward == 1 and summary.max_spans == 3
