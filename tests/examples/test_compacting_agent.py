"""The compacting agent (examples/compacting_agent/): a sub-agent with a fresh conversation and a summary after each
turn of the main conversation. One GRPO step on the tiny model, then what its captured calls train on: a lineage per
conversation (the helper's, the main one up to its first summary, each one resumed from a summary), no call outside a
lineage, and every summary's tokens in a trained sample."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("openai")

from agentlightning.adapter.trajectory import call_ids, stitch_calls
from agentlightning.algorithm.grpo.config import GRPOConfig
from agentlightning.algorithm.grpo.learning.samples import build_samples
from agentlightning.algorithm.grpo.rollouts.reading import RolloutData, SkipCounts, read_rollouts

from ._load import load

agent = load("compacting_agent", "compacting")


@pytest.mark.parametrize(
    ("reply", "expected"), [("41", 1.0), (" 41. ", 1.0), ("42", 0.0), ("It is 41", 0.0), ("", 0.0)]
)
def test_the_reward_is_the_exact_outcome(reply: str, expected: float) -> None:
    assert agent.reward(reply, {"a": 4, "b": 6, "c": 17}) == expected


def test_the_tasks_are_distinct_fixed_and_never_a_worked_example() -> None:
    tasks = agent.make_tasks(220, seed=3)
    assert tasks == agent.make_tasks(220, seed=3)
    assert len({tuple(t.values()) for t in tasks}) == 220
    assert not any(t in agent.EXAMPLE_TASKS for t in tasks)


def test_each_conversation_opens_with_the_worked_examples_as_real_turns() -> None:
    task = {"a": 7, "b": 8, "c": 30}
    helper = agent.helper_messages(task)
    calls = [m["tool_calls"][0]["function"]["name"] for m in helper if m.get("tool_calls")]
    assert calls == ["multiply"] * len(agent.EXAMPLE_TASKS) and helper[-1]["content"] == "What is 7 times 8?"
    main = agent.main_messages(task, "56")
    assert [m["tool_calls"][0]["function"]["name"] for m in main if m.get("tool_calls")] == ["add", "add"]
    # the main conversation's examples end as a rollout's does before it resumes: the summary with the sum found
    assert [m["content"] for m in main if m["role"] == "user"].count(agent.SUMMARISE) == len(agent.EXAMPLE_TASKS)
    assert "gave 41" in agent.example_notes(agent.EXAMPLE_TASKS[0])
    assert main[-1]["content"].endswith("A helper computed 7 times 8: 56")
    resumed = agent.resumed_messages(task, "found 86")
    assert [m["content"] for m in resumed if m["role"] == "assistant"] == ["41", "52"]
    assert resumed[-1]["content"].endswith("Your notes so far: found 86")


def test_a_bad_tool_call_gets_an_error_the_model_reads() -> None:
    assert agent.run_tool(agent.MAIN_TOOLS, "add", '{"a": 2, "b": 3}') == "5"
    assert agent.run_tool(agent.MAIN_TOOLS, "multiply", {"a": 2, "b": 3}).startswith("error: unknown tool")
    assert agent.run_tool(agent.MAIN_TOOLS, "add", "not json").startswith("error: add needs integer arguments")


async def _captured(run_dir: Path) -> list[RolloutData]:
    from agentlightning.store.url import store_from_url

    store = store_from_url(f"sqlite:///{run_dir / 'store.db'}")
    try:
        finished = await store.query_rollouts(status_in=["succeeded"])
        data = await read_rollouts(store, list(finished), None, agent_match=None)
    finally:
        await store.close()
    return [item for item in data if item.calls]


def _is_summary_call(prompt_ids: list[int], tokenizer: Any) -> bool:
    """The prompt ends with the request for a summary (the main conversation's worked examples hold it too, earlier)."""
    text = tokenizer.decode(prompt_ids)
    return agent.SUMMARISE in text and "What is" not in text.rsplit(agent.SUMMARISE, 1)[1]


def test_one_grpo_step_on_the_tiny_model_trains_each_lineage_with_the_summary(tmp_path: Path) -> None:
    from agentlightning.inference.tiny import build_tiny_tokenizer

    train = load("compacting_agent", "train")
    run_dir = tmp_path / "run"
    summary = train.main(
        ["--tiny", "--max-steps", "1", "--run-dir", str(run_dir), "--held-out", "0", "--group-size", "2",
         "--tasks-per-step", "1", "--max-tasks-per-step", "1", "--runners", "2", "--truncated", "keep"]
    )  # fmt: skip
    assert summary["steps"] == 1
    data = asyncio.run(_captured(run_dir))
    assert len(data) == 2
    tokenizer = build_tiny_tokenizer()
    summaries = [[_is_summary_call(c.prompt["token_ids"], tokenizer) for c in item.calls] for item in data]
    # the random model never answers, so the main conversation compacts before each of its turns after the first
    assert all(sum(flags) == agent.MAX_TURNS - 1 for flags in summaries)
    reports = [stitch_calls([call_ids(c) for c in item.calls]) for item in data]
    # the helper's conversation, the main one up to its first summary call, one resumed from each summary, and one
    # per call that fitted no lineage (a random turn the server cannot give back as its exact ids drifts)
    conversations = 2 + agent.MAX_TURNS - 1
    for report in reports:
        assert report.lineages == conversations + report.drifted
        assert [s.root for s in report.sequences].count("fresh") == conversations
    drifted = sum(report.drifted for report in reports)
    assert summary["lineages"]["calls_fitting_no_lineage"] == summary["drift"]["drifted"] == drifted
    assert summary["history"][0]["drift"]["lineages"] == sum(report.lineages for report in reports)
    assert summary["lineages"]["lineages_per_rollout"] == sum(report.lineages for report in reports) / 2

    # the tiny model answers nothing right, so the group's rewards are all 0: here they differ, to see what a step
    # trains on these calls
    for index, item in enumerate(data):
        item.reward = float(index % 2)
    run = {key: summary["settings"][key] for key in ("temperature", "truncated", "max_response_tokens")}
    config = GRPOConfig(group_size=2, tasks_per_step=1, **run)  # the run's: calls sampled otherwise leave the loss
    built = build_samples(data, [0, 0], [0], SkipCounts(), config)
    assert built.drift.trained_share == 1.0
    assert len(built.samples) == sum(report.lineages for report in reports)
    for item, flags, report in zip(data, summaries, reports, strict=True):
        for position in [index for index, flag in enumerate(flags) if flag]:
            [lineage] = [s for s in report.sequences if position in s.calls]
            [sample] = [
                s
                for s in built.samples
                if s.rollout_id == item.rollout.rollout_id and s.prompt_ids == lineage.prompt_ids
            ]
            summary_ids = [int(t) for t in item.calls[position].response["token_ids"]]
            start, end = lineage.segments[lineage.calls.index(position)]
            assert sample.response_ids[start:end] == summary_ids
            assert sample.loss_mask is None or all(sample.loss_mask[start:end])  # None: one-call lineage, all trained
