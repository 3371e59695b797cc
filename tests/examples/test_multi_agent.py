"""Two agents, one trained: the reviewer's calls never enter a training batch."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")

from agentlightning.inference.tiny import build_tiny_tokenizer

from ._load import load


def test_only_the_solver_calls_are_trained_on(tmp_path: Path) -> None:
    train = load("multi_agent", "train")
    algorithm = train.main(["--tiny", "--max-steps", "2", "--run-dir", str(tmp_path / "run"), "--runners", "2"])
    assert len(algorithm.history) == 2
    rollouts = sum(entry["rollouts"] for entry in algorithm.history)
    assert rollouts == 16
    assert algorithm.last_samples, "the closeness reward varies even for a random model"
    tokenizer = build_tiny_tokenizer()
    prompts = [tokenizer.decode(sample.prompt_ids) for sample in algorithm.last_samples]
    assert all("Answer with just the number." in prompt for prompt in prompts)
    assert not any("Review:" in prompt for prompt in prompts)
    assert len(algorithm.last_samples) <= 8  # at most one (solver) call per rollout of the step, never two
