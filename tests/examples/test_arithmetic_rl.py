"""The main job's example: the agent's checks, and the whole training script on a tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from ._load import load

agent = load("arithmetic_rl", "agent")


@pytest.mark.parametrize(
    ("answer", "strict", "lenient"),
    [
        ("7", True, True),
        (" 7. ", True, True),
        ("3 + 4 = 7", False, False),
        ("Seven: 7", False, True),
        ("8", False, False),
    ],
)
def test_strict_and_lenient_checks(answer: str, strict: bool, lenient: bool) -> None:
    task = {"a": 3, "b": 4}
    assert agent.strict_correct(answer, task) is strict
    assert agent.lenient_correct(answer, task) is lenient


def _unordered(tasks: list[dict[str, int]]) -> set[tuple[int, int]]:
    return {(min(t["a"], t["b"]), max(t["a"], t["b"])) for t in tasks}


def test_the_split_is_fixed_and_no_held_out_question_is_a_training_one_with_swapped_operands() -> None:
    train = load("arithmetic_rl", "train")
    first, held_out = train.split_tasks()
    assert len(first) == len(held_out) == 50
    assert len({(t["a"], t["b"]) for t in first + held_out}) == 100
    assert not _unordered(first) & _unordered(held_out)
    assert train.split_tasks() == (first, held_out)


def test_the_evaluation_covers_the_held_out_half_and_the_v1_splits_held_out_half() -> None:
    train = load("arithmetic_rl", "train")
    held_out, v1_held_out = train.split_tasks()[1], train.v1_split_tasks()[1]
    v1_train = train.v1_split_tasks()[0]
    assert sum(1 for t in v1_held_out if _unordered([t]) <= _unordered(v1_train)) == 22  # why the split changed
    evaluated = train.evaluation_tasks(held_out, v1_held_out)
    assert evaluated[:50] == held_out
    assert {(t["a"], t["b"]) for t in evaluated} == {(t["a"], t["b"]) for t in held_out + v1_held_out}
    assert len(evaluated) == len({(t["a"], t["b"]) for t in evaluated})


def test_accuracy_counts_unanswered_tasks_as_wrong_and_is_computed_per_split() -> None:
    train = load("arithmetic_rl", "train")
    items = [
        {"task": {"a": 1, "b": 2}, "answer": "3", "status": "succeeded"},
        {"task": {"a": 2, "b": 2}, "answer": None, "status": "unfinished"},
        {"task": {"a": 5, "b": 1}, "answer": "6", "status": "succeeded"},
    ]
    report = {"items": items}
    assert train.accuracy(report)["strict"] == 2 / 3
    assert train.accuracy(report, [{"a": 1, "b": 2}, {"a": 2, "b": 2}])["strict"] == 0.5
    assert train.accuracy(report, [{"a": 9, "b": 9}]) == {"strict": None, "lenient": None}  # not evaluated


def test_training_script_writes_plots_summary_store_and_model(tmp_path: Path) -> None:
    train = load("arithmetic_rl", "train")
    run_dir = tmp_path / "run"
    args = ["--tiny", "--max-steps", "2", "--run-dir", str(run_dir), "--runners", "2", "--no-live"]
    summary = train.main(args)
    for name in ("summary.json", "reward_curve.png", "accuracy.png", "store.db", "final_model/config.json"):
        assert (run_dir / name).exists(), name
    written = json.loads((run_dir / "summary.json").read_text())
    assert written["steps"] == 2 == summary["steps"]
    assert set(written["held_out_accuracy"]["before"]) == {"strict", "lenient"}
    assert set(written["v1_split_held_out_accuracy"]["after"]) == {"strict", "lenient"}
    assert written["evaluation_unfinished"] == {"before": 0, "after": 0}
    assert len(written["evaluations"]["before"]["items"]) == 73  # both held-out halves, each question once
    assert set(written["mean_seconds_per_step"]) == {"rollout", "adapter", "update", "weight_swap", "total"}

    again = train.main([*args[:2], "3", *args[3:]])  # same run directory: resumes from step 2
    assert again["resumed_from"].endswith("step-000002") and again["steps"] == 3
