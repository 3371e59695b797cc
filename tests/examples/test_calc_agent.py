"""The second example (examples/calc_agent/): its split, and the whole training script on a tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("openai")

from ._load import load

task = load("calc_agent", "task")


def _pairs(tasks: list[dict[str, int]]) -> set[tuple[str, int, int]]:
    return {(t["op"], min(t["a"], t["b"]), max(t["a"], t["b"])) for t in tasks}


def test_the_split_is_fixed_and_shares_no_unordered_pair_between_training_and_held_out() -> None:
    train, held_out = task.split_tasks()
    assert (len(train), len(held_out)) == (240, 50)
    assert task.split_tasks() == (train, held_out)
    assert not _pairs(train) & _pairs(held_out)


def test_the_split_holds_as_many_products_as_sums_and_every_wording() -> None:
    train, held_out = task.split_tasks()
    for tasks in (train, held_out):
        ops = [t["op"] for t in tasks]
        assert ops.count("multiply") == ops.count("add") == len(tasks) // 2
        for op in ("multiply", "add"):
            assert {t["wording"] for t in tasks if t["op"] == op} == set(range(len(task.WORDINGS[op])))


def test_mixed_example_order_gives_half_of_each_operation_the_other_order() -> None:
    train, held_out = task.split_tasks()
    for tasks in (train, held_out):
        mixed = task.mix_example_orders(tasks, seed=1)
        assert [{k: v for k, v in t.items() if k != "example_order"} for t in mixed] == tasks  # nothing else changed
        assert all("example_order" not in t for t in tasks)  # the input is left as it was
        for op in ("multiply", "add"):
            orders = [t["example_order"] for t in mixed if t["op"] == op]
            assert abs(orders.count("add-first") - orders.count("multiply-first")) <= 1


def test_the_examples_come_in_the_order_the_task_asks_for() -> None:
    item = {"op": "multiply", "a": 12, "b": 34, "wording": 0}
    assert [e.tool for e in task.examples_for(item)] == [e.tool for e in task.EXAMPLES] == ["multiply", "add"]
    assert [e.tool for e in task.examples_for({**item, "example_order": "add-first"})] == ["add", "multiply"]
    with pytest.raises(ValueError, match="example_order"):
        task.examples_for({**item, "example_order": "sideways"})


def test_each_framework_puts_the_tasks_example_order_in_front_of_the_question() -> None:
    pytest.importorskip("langchain_core")
    openai_agent, langgraph_agent = load("calc_agent", "agent_openai"), load("calc_agent", "agent_langgraph")
    item = {"op": "multiply", "a": 12, "b": 34, "wording": 0, "example_order": "add-first"}
    calls = [m["tool_calls"][0]["function"]["name"] for m in openai_agent.worked_examples(item) if m.get("tool_calls")]
    assert calls == ["add", "multiply"]
    graph_calls = [
        m.tool_calls[0]["name"] for m in langgraph_agent.worked_examples(item) if getattr(m, "tool_calls", None)
    ]
    assert graph_calls == ["add", "multiply"]


def test_training_script_trains_the_plain_openai_agent_on_a_tiny_model(tmp_path: Path) -> None:
    train = load("calc_agent", "train")
    run_dir = tmp_path / "run"
    args = ["--framework", "openai", "--tiny", "--max-steps", "1", "--run-dir", str(run_dir), "--runners", "2"]
    summary = train.main([*args, "--held-out", "4", "--group-size", "2", "--tasks-per-step", "1", "--no-live"])
    assert summary["steps"] == 1
    assert summary["framework"] == "openai"
    assert summary["held_out"]["before"] is not None and summary["held_out"]["after"] is not None
    assert summary["drift"]["drifted"] == 0
    written = json.loads((run_dir / "summary.json").read_text())
    assert written["steps"] == 1 and written["settings"]["group_size"] == 2
    for held in (written["held_out"]["before"], written["held_out"]["after"]):
        assert {"top_tool_share", "tool_calls_by_name", "strict_by_op"} <= set(held)
        assert set(held["strict_by_op"]) <= {"add", "multiply"}
    assert (run_dir / "store.db").exists() and (run_dir / "train.log").exists()


def test_balance_by_op_gives_each_step_of_four_questions_two_products_and_two_sums() -> None:
    from agentlightning.algorithm.grpo.sampling.balance import balanced_tasks_at, stratify

    train_script = load("calc_agent", "train")
    assert train_script.parse_args([]).balance_by_op is False  # off unless asked for
    train, _ = task.split_tasks()
    strata = stratify(train, train_script.balance_by_op, seed=0)
    assert sorted((str(key), len(members)) for key, members in zip(strata.keys, strata.members, strict=True)) == [
        ("add", 120),
        ("multiply", 120),
    ]
    for step in range(20):
        ops = sorted(train[i]["op"] for i in balanced_tasks_at(strata, 0, 4 * step, 4))
        assert ops == ["add", "add", "multiply", "multiply"]


def test_the_time_budget_says_it_bounds_the_training_and_what_comes_on_top() -> None:
    train = load("calc_agent", "train")
    note = train.budget_note(train.parse_args(["--minutes", "1"]))
    assert note.startswith("Time budget: 1 min of GRPO training (no step starts after that)")
    assert "held-out evaluations before and after training (50 questions each" in note
    assert "loading the model" in note and "--held-out N" in note


def test_the_minutes_option_says_in_its_help_that_it_bounds_only_the_training(
    capsys: pytest.CaptureFixture[str],
) -> None:
    train = load("calc_agent", "train")
    with pytest.raises(SystemExit):
        train.parse_args(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "It bounds the training only" in help_text and "held-out evaluations before and after" in help_text


def _item(op: str, reward: float, *tools: str) -> dict[str, object]:
    task_item = {"op": op, "a": 12, "b": 34}
    calls = [{"name": tool, "arguments": '{"a": 12, "b": 34}'} for tool in tools]
    return {"task": task_item, "reward": reward, "answer": None, "status": "succeeded", "calls": 2, "tool_calls": calls}


def test_held_out_tool_use_gives_the_most_called_tools_share_and_strict_accuracy_per_kind_of_question() -> None:
    train = load("calc_agent", "train")
    # A model that adds whatever it is asked: every sum right, every product wrong, all calls to `add`...
    collapsed = [_item("add", 1.0, "add"), _item("add", 1.0, "add"), _item("multiply", 0.0, "add", "add")]
    found = train.tool_use({"items": collapsed})
    assert found["top_tool_share"] == 1.0 and found["tool_calls_by_name"] == {"add": 4}
    assert found["strict_by_op"] == {"add": 1.0, "multiply": 0.0}
    assert found["strict"] == 2 / 3  # the earlier keys keep their meaning
    # ...and one that picks the tool from the question, but gets one product wrong.
    mixed = [_item("add", 1.0, "add"), _item("multiply", 1.0, "multiply"), _item("multiply", 0.0, "multiply", "bogus")]
    found = train.tool_use({"items": mixed})
    assert found["top_tool_share"] == 0.5 and found["tool_calls_by_name"] == {"multiply": 2, "add": 1, "bogus": 1}
    assert found["strict_by_op"] == {"add": 1.0, "multiply": 0.5}


def test_held_out_tool_use_without_tool_calls_has_no_top_tool_share() -> None:
    train = load("calc_agent", "train")
    found = train.tool_use({"items": [_item("add", 0.0)]})
    assert found["top_tool_share"] is None and found["tool_calls_by_name"] == {}
    assert found["strict_by_op"] == {"add": 0.0}
    assert train.tool_use(None)["top_tool_share"] is None and train.tool_use(None)["strict_by_op"] is None
