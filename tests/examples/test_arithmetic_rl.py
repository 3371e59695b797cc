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


def test_the_split_is_fixed_and_disjoint() -> None:
    train = load("arithmetic_rl", "train")
    first, held_out = train.split_tasks()
    assert len(first) == len(held_out) == 50
    assert not {(t["a"], t["b"]) for t in first} & {(t["a"], t["b"]) for t in held_out}
    assert train.split_tasks() == (first, held_out)


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
    assert set(written["mean_seconds_per_step"]) == {"rollout", "adapter", "update", "weight_swap", "total"}

    again = train.main([*args[:2], "3", *args[3:]])  # same run directory: resumes from step 2
    assert again["resumed_from"].endswith("step-000002") and again["steps"] == 3
