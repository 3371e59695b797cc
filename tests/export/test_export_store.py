"""`export_store`: what each kind writes for the rollouts of a store, and what it leaves out (counted)."""

from __future__ import annotations

import json
from typing import Any, Optional

import pytest

from agentlightning.export import ExportOptions, ExportSummary, export_store
from agentlightning.store.memory import InMemoryLightningStore

from .builders import Call, add_rollout, two_turns


class ListWriter:
    path = None

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def write(self, record: dict[str, Any]) -> None:
        self.records.append(json.loads(json.dumps(record)))  # what a JSON Lines reader gets back

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


async def _export(store: Any, **options: Any) -> tuple[list[dict[str, Any]], ExportSummary]:
    writer = ListWriter()
    summary = await export_store(store, writer, ExportOptions(**options))
    return writer.records, summary


@pytest.fixture
def store() -> InMemoryLightningStore:
    return InMemoryLightningStore()


async def test_a_conversation_of_two_calls_is_one_sft_record_masking_the_tool_result(
    store: InMemoryLightningStore,
) -> None:
    await add_rollout(store, two_turns([1, 2, 3], [7, 7], ([10, 11], [12])), reward=1.0)
    records, summary = await _export(store, kind="sft")
    assert len(records) == 1
    record = records[0]
    assert record["input_ids"] == [1, 2, 3, 10, 11, 7, 7, 12]
    assert record["assistant_masks"] == [0, 0, 0, 1, 1, 0, 0, 1]
    assert record["prompt_length"] == 3
    assert [m["role"] for m in record["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert record["messages"][-1] == {"role": "assistant", "content": "5"}
    assert record["messages"][2]["tool_call_id"] == "call-1"
    assert record["calls"] == 2 and record["drifted_calls"] == 0 and record["reward"] == 1.0
    assert summary.records == 1 and summary.conversations == 1 and summary.continuations == 1


async def test_per_call_unit_writes_each_call_with_its_own_prompt(store: InMemoryLightningStore) -> None:
    await add_rollout(store, two_turns([1, 2, 3], [7, 7], ([10, 11], [12])), reward=1.0)
    records, _ = await _export(store, kind="sft", unit="call")
    assert [r["input_ids"] for r in records] == [[1, 2, 3, 10, 11], [1, 2, 3, 10, 11, 7, 7, 12]]
    assert records[1]["assistant_masks"] == [0] * 7 + [1]
    assert [r["calls"] for r in records] == [1, 1]


async def test_a_drifted_call_starts_its_own_record_and_the_drift_is_counted(store: InMemoryLightningStore) -> None:
    calls = two_turns([1, 2, 3], [7, 7], ([10, 11], [12]))
    calls[1].prompt_ids = [1, 2, 3, 10, 99, 7, 7]  # the history re-tokenized differently
    await add_rollout(store, calls, reward=1.0)
    records, summary = await _export(store, kind="rl")
    assert [r["prompt_ids"] for r in records] == [[1, 2, 3], [1, 2, 3, 10, 99, 7, 7]]
    assert all(r["drifted_calls"] == 1 for r in records)
    assert (summary.continuations, summary.drifted_calls, summary.drift_rate) == (1, 1, 1.0)


async def test_rl_records_carry_ids_mask_reward_group_and_identifiers(store: InMemoryLightningStore) -> None:
    await store.update_resources("v3", {})
    rollout_id = await add_rollout(
        store,
        two_turns([1, 2], [7], ([10], [12, 13])),
        reward=0.5,
        metadata={"grpo": {"step": 4, "group": 1}},
        resources_id="v3",
    )
    records, _ = await _export(store, kind="rl")
    record = records[0]
    assert record["prompt_ids"] == [1, 2]
    assert record["response_ids"] == [10, 7, 12, 13] and record["loss_mask"] == [1, 0, 1, 1]
    assert record["reward"] == 0.5 and record["call_rewards"] == [None, 0.5]
    assert record["rollout_id"] == rollout_id and record["resources_id"] == "v3"
    assert record["attempt_id"] == (await store.get_latest_attempt(rollout_id)).attempt_id  # type: ignore[union-attr]
    assert record["group"] == 'grpo:{"group":1,"step":4}'


async def test_min_reward_keeps_only_rollouts_that_reached_it(store: InMemoryLightningStore) -> None:
    for reward in (1.0, 0.0, None):
        await add_rollout(store, [Call([1], [2])], reward=reward)
    records, summary = await _export(store, kind="sft", min_reward=0.5)
    assert [r["reward"] for r in records] == [1.0]
    assert summary.skipped == {"reward below --min-reward": 1, "no reward (with --min-reward)": 1}


async def test_unusable_rollouts_are_counted_by_reason_with_an_example(store: InMemoryLightningStore) -> None:
    await add_rollout(store, [Call([1], [2])], reward=1.0, status="failed")
    await add_rollout(store, [Call([], [])], reward=1.0)  # the server returned no token ids
    await add_rollout(store, [Call([1], [2])], reward=float("nan"))
    await add_rollout(store, [Call([1], [2])], reward=1.0)
    records, summary = await _export(store)
    assert len(records) == 1 and summary.rollouts_seen == 4 and summary.rollouts_exported == 1
    assert summary.skipped == {"rollout failed": 1, "no LLM call with token ids": 1, "reward not finite": 1}
    assert summary.no_calls_example is not None and "token ids" in summary.no_calls_example


async def test_agent_match_exports_only_that_agents_calls(store: InMemoryLightningStore) -> None:
    await add_rollout(store, [Call([1], [2])], reward=1.0, agent="solver")
    await add_rollout(store, [Call([5], [6])], reward=1.0, agent="reviewer")
    records, summary = await _export(store, kind="sft", agent_match="^solver$")
    assert [(r["input_ids"], r["agent_name"]) for r in records] == [([1, 2], "solver")]
    assert summary.skipped == {"no call of a matching agent": 1}


async def test_calls_recorded_only_by_the_llm_proxy_are_exported(store: InMemoryLightningStore) -> None:
    await add_rollout(store, [Call([1, 2], [3])], reward=1.0, client_side=False)
    records, _ = await _export(store, kind="sft")
    assert [r["input_ids"] for r in records] == [[1, 2, 3]]
    assert records[0]["messages"] == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]


async def test_tool_calls_and_offered_tools_are_written_in_openai_shape(store: InMemoryLightningStore) -> None:
    recorded = json.dumps([{"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a":2}'}}])
    function = {"name": "add", "description": "adds", "parameters": json.dumps({"type": "object"})}
    await add_rollout(store, [Call([1], [2], answer="", tool_calls=recorded, functions=[function])], reward=1.0)
    records, _ = await _export(store, kind="sft")
    assistant = records[0]["messages"][-1]
    assert assistant["tool_calls"] == [
        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a":2}'}}
    ]
    assert json.loads(records[0]["tools"]) == [
        {"type": "function", "function": {"name": "add", "description": "adds", "parameters": {"type": "object"}}}
    ]


async def test_mode_filter_keeps_only_rollouts_of_that_mode(store: InMemoryLightningStore) -> None:
    await add_rollout(store, [Call([1], [2])], reward=1.0, mode="train")
    await add_rollout(store, [Call([3], [4])], reward=1.0, mode="val")
    records, summary = await _export(store, kind="sft", mode_in=["val"])
    assert [r["input_ids"] for r in records] == [[3, 4]] and summary.rollouts_seen == 1


# ----------------------------------------------------------------------------------------------------- preference
async def _group(
    store: Any, rewards: list[Optional[float]], *, meta: Optional[dict[str, Any]], task: Any = "t"
) -> None:
    for index, reward in enumerate(rewards):
        await add_rollout(
            store, [Call([1, 2], [10 + index], answer=f"a{index}")], reward=reward, metadata=meta, task=task
        )


async def test_preference_pairs_the_best_and_worst_of_a_grpo_group(store: InMemoryLightningStore) -> None:
    await _group(store, [0.5, 1.0, 0.0, 0.5], meta={"grpo": {"step": 1, "round": 0, "group": 0}})
    records, summary = await _export(store, kind="preference")
    assert len(records) == 1
    pair = records[0]
    assert pair["prompt"] == [{"role": "user", "content": "hi"}]
    assert pair["chosen"] == [{"role": "assistant", "content": "a1"}]
    assert pair["rejected"] == [{"role": "assistant", "content": "a2"}]
    assert (pair["prompt_ids"], pair["chosen_ids"], pair["rejected_ids"]) == ([1, 2], [11], [12])
    assert (pair["chosen_reward"], pair["rejected_reward"], pair["group_size"]) == (1.0, 0.0, 4)
    assert pair["chosen_mask"] == [1] and summary.rollouts_exported == 2


async def test_grpo_groups_of_different_steps_never_pair(store: InMemoryLightningStore) -> None:
    await _group(store, [1.0], meta={"grpo": {"step": 1, "round": 0, "group": 0}})
    await _group(store, [0.0], meta={"grpo": {"step": 2, "round": 0, "group": 0}})
    records, summary = await _export(store, kind="preference")
    assert records == [] and summary.skipped == {"group of one": 2}


async def test_without_grpo_metadata_rollouts_of_an_identical_task_input_are_a_group(
    store: InMemoryLightningStore,
) -> None:
    await _group(store, [1.0, 0.0], meta=None, task={"question": "2+3", "answer": 5})
    await _group(store, [0.0, 1.0], meta=None, task={"answer": 5, "question": "2+3"})  # same input, keys reordered
    await _group(store, [1.0], meta=None, task={"question": "2+4", "answer": 6})
    records, summary = await _export(store, kind="preference")
    assert len(records) == 1 and records[0]["group_size"] == 4
    assert summary.skipped == {"group of one": 1}


async def test_groups_whose_rewards_do_not_differ_make_no_pair(store: InMemoryLightningStore) -> None:
    await _group(store, [1.0, 1.0], meta={"grpo": {"step": 1, "group": 0}})
    await _group(store, [0.0, None], meta={"grpo": {"step": 1, "group": 1}})
    records, summary = await _export(store, kind="preference")
    assert records == []
    assert summary.skipped == {"group without reward variance": 1, "group of one": 1, "no reward": 1}


async def test_rollouts_of_a_group_with_different_prompt_ids_never_pair(store: InMemoryLightningStore) -> None:
    meta = {"grpo": {"step": 1, "group": 0}}
    await add_rollout(store, [Call([1, 2], [10])], reward=1.0, metadata=meta)
    await add_rollout(store, [Call([1, 3], [11])], reward=0.0, metadata=meta)
    records, summary = await _export(store, kind="preference")
    assert records == [] and summary.skipped == {"group of one": 2}


async def test_a_multi_turn_pair_keeps_the_tool_turns_in_both_sides_masked(store: InMemoryLightningStore) -> None:
    meta = {"grpo": {"step": 1, "group": 0}}
    await add_rollout(store, two_turns([1, 2], [7], ([10], [12])), reward=1.0, metadata=meta)
    await add_rollout(store, two_turns([1, 2], [7], ([11], [13, 14])), reward=0.0, metadata=meta)
    records, _ = await _export(store, kind="preference")
    pair = records[0]
    assert [m["role"] for m in pair["chosen"]] == ["assistant", "tool", "assistant"]
    assert (pair["chosen_ids"], pair["chosen_mask"]) == ([10, 7, 12], [1, 0, 1])
    assert (pair["rejected_ids"], pair["rejected_mask"]) == ([11, 7, 13, 14], [1, 0, 1, 1])


async def test_min_reward_drops_pairs_whose_best_side_falls_short(store: InMemoryLightningStore) -> None:
    await _group(store, [0.4, 0.2], meta={"grpo": {"step": 1, "group": 0}})
    records, summary = await _export(store, kind="preference", min_reward=0.5)
    assert records == [] and summary.skipped == {"best reward below --min-reward": 1}


def test_preference_needs_whole_conversations() -> None:
    with pytest.raises(ValueError, match="--unit call applies to sft and rl"):
        ExportOptions(kind="preference", unit="call")


# ------------------------------------------------------------------------------------------------------ streaming
class CountingStore:
    """Forwards to a store and records how rollouts and spans were asked for."""

    def __init__(self, inner: InMemoryLightningStore) -> None:
        self.inner = inner
        self.rollout_limits: list[int] = []
        self.span_queries = 0

    async def query_rollouts(self, **kwargs: Any) -> Any:
        self.rollout_limits.append(kwargs.get("limit", -1))
        return await self.inner.query_rollouts(**kwargs)

    async def query_spans(self, *args: Any, **kwargs: Any) -> Any:
        self.span_queries += 1
        return await self.inner.query_spans(*args, **kwargs)


async def test_the_store_is_read_a_page_of_rollouts_at_a_time(store: InMemoryLightningStore) -> None:
    for index in range(7):
        await add_rollout(store, [Call([1], [index + 2])], reward=1.0)
    counting = CountingStore(store)
    records, _ = await _export(counting, kind="sft", page_size=3)
    assert [r["input_ids"][-1] for r in records] == [2, 3, 4, 5, 6, 7, 8]  # creation order
    assert counting.rollout_limits == [3, 3, 3]
    assert counting.span_queries == 7
