"""The LangChain variant of the arithmetic agent: zero-code capture supplies the calls GRPO trains on."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("langchain_openai")

from ._load import load


def test_langchain_agent_calls_are_captured_client_side_and_reach_grpo(tmp_path: Path) -> None:
    example = load("arithmetic_rl", "train_langchain")
    algorithm = example.main(["--tiny", "--max-steps", "2", "--run-dir", str(tmp_path / "run"), "--runners", "2"])
    assert len(algorithm.history) == 2
    # one call per rollout, every one captured client-side (a step may sample extra tasks for informative groups)
    sources = [(entry["calls_from"], entry["rollouts"]) for entry in algorithm.history]
    assert all(source["adapter"] == rollouts >= 8 and source["proxy"] == 0 for source, rollouts in sources), sources
    assert algorithm.skips.rollouts_without_token_ids == 0
