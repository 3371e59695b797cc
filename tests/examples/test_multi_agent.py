"""Two agents: trained one adapter each in one run, or one of them alone as a single policy; the reviewer's
review inputs balanced between right and wrong answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from agentlightning.inference.tiny import build_tiny_tokenizer

from ._load import load


def test_a_right_review_shows_the_sum_whatever_the_solver_answered() -> None:
    team = load("multi_agent", "team")
    task = {"a": 3, "b": 4, "review": "right"}
    assert team.review_input(task, "7") == ("7", True)
    assert team.review_input(task, "9") == ("7", True)  # a wrong solver does not make the input wrong
    assert team.review_input(task, "") == ("7", True)


def test_a_wrong_review_shows_the_solvers_mistake_or_else_the_offset_sum() -> None:
    team = load("multi_agent", "team")
    task = {"a": 3, "b": 4, "review": "wrong", "offset": -2, "solver_mistakes": True}
    assert team.review_input(task, "8") == ("8", False)  # the solver's own mistake
    assert team.review_input(task, "7") == ("5", False)  # a right solver: the perturbed sum
    assert team.review_input(task, "seven") == ("5", False)
    fixed = {"a": 3, "b": 4, "review": "wrong", "offset": 2}  # held-out: the task alone decides
    assert team.review_input(fixed, "8") == ("9", False)


def test_a_correct_review_earns_the_whole_reward() -> None:
    team = load("multi_agent", "team")
    assert team.review_reward("3 + 4 = 7; 7 vs 7, so yes", 3, 4, "7") == 1.0
    assert team.review_reward("3 + 4 = 7; 7 vs 9, so no.", 3, 4, "9") == 1.0
    assert team.review_reward(" 3+4 = 7 ; 7 vs 9, so No", 3, 4, "9") == 1.0  # spacing and case do not matter
    assert team.correct_review("3 + 4 = 7; 7 vs 9, so no.", 3, 4, "9")


def test_a_wrong_verdict_after_faithful_working_earns_half() -> None:
    team = load("multi_agent", "team")
    assert team.review_reward("3 + 4 = 7; 7 vs 7, so no", 3, 4, "7") == 0.5
    assert team.review_reward("3 + 4 = 7; 7 vs 9, so yes", 3, 4, "9") == 0.5
    assert not team.correct_review("3 + 4 = 7; 7 vs 9, so yes", 3, 4, "9")


def test_a_verdict_that_follows_from_wrong_working_earns_half_and_is_not_a_correct_review() -> None:
    team = load("multi_agent", "team")
    assert team.review_reward("3 + 4 = 7; 7 vs 2, so no", 3, 4, "7") == 0.5  # the answer shown miscopied
    assert team.review_reward("3 + 4 = 8; 8 vs 8, so yes", 3, 4, "9") == 0.5  # a wrong sum, then the sum copied
    assert team.review_reward("3 + 5 = 8; 8 vs 9, so no", 3, 4, "9") == 0.5  # not the question's numbers
    assert not team.correct_review("3 + 4 = 7; 7 vs 2, so no", 3, 4, "7")


def test_a_verdict_that_contradicts_wrong_working_earns_nothing() -> None:
    team = load("multi_agent", "team")
    assert team.review_reward("3 + 4 = 7; 7 vs 2, so yes", 3, 4, "7") == 0.0  # right verdict, miscopied, "yes"
    assert team.review_reward("3 + 4 = 8; 8 vs 7, so yes", 3, 4, "7") == 0.0


def test_a_review_not_written_as_the_examples_are_earns_nothing() -> None:
    team = load("multi_agent", "team")
    assert team.review_reward("9 vs 7, so no", 3, 4, "9") == 0.0  # no working
    assert team.review_reward("yes", 3, 4, "7") == 0.0 and team.review_reward("", 3, 4, "7") == 0.0
    assert team.review_checks("7 vs 7", 3, 4, "7") is None


def test_the_verdict_is_the_last_yes_or_no_after_the_written_sum() -> None:
    team = load("multi_agent", "team")
    assert team.verdict("3 + 4 = 7, so yes") is True
    assert team.verdict("3 + 4 = 7, so no.") is False
    assert team.verdict("No, wait: 3 + 4 = 7, so yes") is True
    assert team.verdict("3 + 4 = 7") is None and team.verdict("nothing") is None  # "no" inside a word is not one


def test_the_reviewer_sees_worked_examples_of_both_verdicts_before_its_input() -> None:
    team = load("multi_agent", "team")
    messages = team.review_messages(4, 5, "9")
    replies = [m["content"] for m in messages if m["role"] == "assistant"]
    assert sorted(team.verdict(reply) for reply in replies) == [False, False, True, True]
    assert all(" = " in reply and " vs " in reply for reply in replies)  # sum, then comparison, then verdict
    assert messages[-1] == {"role": "user", "content": team.REVIEW.format(a=4, b=5, answer="9")}


@pytest.mark.parametrize(
    "task, named",
    [
        ({"a": 1, "b": 2}, "'review'"),
        ({"a": 1, "b": 2, "review": "wrong"}, "'offset'"),
        ({"a": 1, "b": 2, "review": "wrong", "offset": 0}, "'offset'"),
        ({"a": 0, "b": 1, "review": "wrong", "offset": -3}, "negative"),
    ],
)
def test_a_malformed_review_task_is_refused_naming_the_field(task: dict[str, object], named: str) -> None:
    team = load("multi_agent", "team")
    with pytest.raises(ValueError, match=named):
        team.review_kind(task)


def test_training_holds_every_pair_once_per_kind_and_held_out_alternates_kinds() -> None:
    train = load("multi_agent", "train")
    pairs, held_pairs = train.split_tasks(0)
    tasks = train.training_tasks(pairs, 0)
    assert len(tasks) == 2 * len(pairs)
    for kind in ("right", "wrong"):
        assert [{"a": t["a"], "b": t["b"]} for t in tasks if t["review"] == kind] == pairs
    held = train.held_out_tasks(held_pairs, 0)
    assert [t["review"] for t in held[:4]] == ["right", "wrong", "right", "wrong"]
    assert sum(t["review"] == "wrong" for t in held) == len(held) // 2
    assert not any(t.get("solver_mistakes") for t in held)  # before and after judge the same inputs
    assert held == train.held_out_tasks(held_pairs, 0)  # seeded: the same every run
    assert all(t["a"] + t["b"] + t["offset"] >= 0 for t in tasks + held if t["review"] == "wrong")


def test_both_agents_train_their_own_adapter_on_their_own_calls(tmp_path: Path) -> None:
    train = load("multi_agent", "train")
    run_dir = tmp_path / "run"
    algorithm = train.main(["--tiny", "--max-steps", "2", "--run-dir", str(run_dir), "--runners", "2"])
    assert len(algorithm.history) == 2
    assert algorithm.engine is not None and sorted(algorithm.engine.adapters.names) == ["reviewer", "solver"]
    assert all(algorithm.engine.adapters.version(name) == "step-2" for name in ("solver", "reviewer"))
    for entry in algorithm.history:  # every rollout made one call of each agent; each step: one task of each kind
        assert entry["agents"]["solver"]["calls"] == entry["rollouts"] == entry["agents"]["reviewer"]["calls"]
        right, wrong = entry["strata"]["right"], entry["strata"]["wrong"]  # extra tasks continue the cycle
        assert min(right, wrong) >= 1 and abs(right - wrong) <= 1
    tokenizer = build_tiny_tokenizer()
    solver_prompts = [tokenizer.decode(s.prompt_ids) for s in algorithm.last_agent_samples["solver"]]
    assert solver_prompts, "the closeness reward varies even for a random model"
    assert all("Answer with just the number." in p and "Proposed answer" not in p for p in solver_prompts)
    reviewer_prompts = [tokenizer.decode(s.prompt_ids) for s in algorithm.last_agent_samples["reviewer"]]
    assert all("Proposed answer" in p for p in reviewer_prompts)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert set(summary["agents"]) == {"solver", "reviewer"}
    assert all(summary["agents"][a]["held_out_before"] is not None for a in ("solver", "reviewer"))
    for label in ("before", "after"):  # the per-kind accuracy reads the reviewer's own verdicts
        assert summary["reviewer_accuracy"][label]["all"] == pytest.approx(
            summary["agents"]["reviewer"][f"held_out_{label}"]
        )
        reward = summary["agents"]["reviewer"][f"held_out_{label}"]
        assert 0.0 <= summary["reviewer_correct_reviews"][label] <= reward  # a correct review is a reward of 1
    assert (run_dir / "checkpoints" / "step-000002" / "model" / "reviewer" / "adapter_model.safetensors").is_file()


def test_the_summary_counts_correct_reviews_of_the_answers_the_held_out_tasks_fix() -> None:
    train = load("multi_agent", "train")
    items = [
        {"task": {"a": 3, "b": 4, "review": "right"}, "answer": "3 + 4 = 7; 7 vs 7, so yes"},
        {"task": {"a": 3, "b": 4, "review": "wrong", "offset": 2}, "answer": "3 + 4 = 7; 7 vs 9, so yes"},
        {"task": {"a": 3, "b": 4, "review": "wrong", "offset": 2}, "answer": None},  # no reply: not correct
        {"task": {"a": 1, "b": 1, "review": "wrong", "offset": -1}, "answer": "1 + 1 = 2; 2 vs 1, so no"},
    ]
    assert train.correct_reviews(items) == 0.5


def test_the_single_pattern_form_trains_only_the_solver_as_one_policy(tmp_path: Path) -> None:
    train = load("multi_agent", "train")
    args = ["--tiny", "--max-steps", "2", "--run-dir", str(tmp_path / "run"), "--runners", "2", "--held-out", "0"]
    algorithm = train.main([*args, "--agents", "solver", "--single"])
    assert algorithm.agents is None and algorithm.agent_match == "solver"
    assert algorithm.last_samples, "the closeness reward varies even for a random model"
    tokenizer = build_tiny_tokenizer()
    prompts = [tokenizer.decode(sample.prompt_ids) for sample in algorithm.last_samples]
    assert all("Answer with just the number." in prompt for prompt in prompts)
    assert not any("Proposed answer" in prompt for prompt in prompts)
    assert len(algorithm.last_samples) <= algorithm.history[-1]["rollouts"]  # one (solver) call per rollout, never two


def test_failed_groups_are_trained_only_when_a_failed_group_reward_is_given() -> None:
    train = load("multi_agent", "train")
    assert train.failed_groups(train.parse_args([])) == {}
    args = train.parse_args(["--failed-group-reward", "0.5", "--failed-group-advantage", "-0.25"])
    settings = train.failed_groups(args)
    assert settings == {"failed_group_reward": 0.5, "failed_group_advantage": -0.25}
    algorithm = train.GRPO(lora_rank=4, **settings)
    assert algorithm.config.rewards.failed_group_reward == 0.5
    assert algorithm.config.rewards.failed_group_advantage == -0.25
