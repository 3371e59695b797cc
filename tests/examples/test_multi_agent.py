"""Two agents: trained one adapter each in one run, or one of them alone as a single policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from agentlightning.inference.tiny import build_tiny_tokenizer

from ._load import load


def test_both_agents_train_their_own_adapter_on_their_own_calls(tmp_path: Path) -> None:
    train = load("multi_agent", "train")
    run_dir = tmp_path / "run"
    algorithm = train.main(["--tiny", "--max-steps", "2", "--run-dir", str(run_dir), "--runners", "2"])
    assert len(algorithm.history) == 2
    assert algorithm.engine is not None and sorted(algorithm.engine.adapters.names) == ["reviewer", "solver"]
    assert all(algorithm.engine.adapters.version(name) == "step-2" for name in ("solver", "reviewer"))
    for entry in algorithm.history:  # every rollout made one call of each agent
        assert entry["agents"]["solver"]["calls"] == entry["rollouts"] == entry["agents"]["reviewer"]["calls"]
    tokenizer = build_tiny_tokenizer()
    solver_prompts = [tokenizer.decode(s.prompt_ids) for s in algorithm.last_agent_samples["solver"]]
    assert solver_prompts, "the closeness reward varies even for a random model"
    assert all("Answer with just the number." in p and "Proposed answer" not in p for p in solver_prompts)
    reviewer_prompts = [tokenizer.decode(s.prompt_ids) for s in algorithm.last_agent_samples["reviewer"]]
    assert all("Proposed answer" in p for p in reviewer_prompts)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert set(summary["agents"]) == {"solver", "reviewer"}
    assert all(summary["agents"][a]["held_out_before"] is not None for a in ("solver", "reviewer"))
    assert (run_dir / "checkpoints" / "step-000002" / "model" / "reviewer" / "adapter_model.safetensors").is_file()


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
