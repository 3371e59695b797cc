"""A run without an explicit learning rate gets one suited to it: 3e-4 with LoRA, 1e-5 for a full fine-tune; an
explicit one always wins, and the effective one is recorded with the settings."""

from __future__ import annotations

import pytest

from agentlightning.algorithm.grpo import GRPOConfig
from agentlightning.algorithm.grpo.config import FULL_FINE_TUNE_LEARNING_RATE, LORA_LEARNING_RATE


def test_a_lora_run_without_a_learning_rate_gets_the_lora_default() -> None:
    assert GRPOConfig(lora_rank=16).effective_learning_rate == LORA_LEARNING_RATE == 3e-4


def test_a_full_fine_tune_without_a_learning_rate_gets_the_full_fine_tune_default() -> None:
    assert GRPOConfig().effective_learning_rate == FULL_FINE_TUNE_LEARNING_RATE == 1e-5


def test_an_explicit_learning_rate_wins() -> None:
    assert GRPOConfig(lora_rank=16, learning_rate=1e-5).effective_learning_rate == 1e-5
    assert GRPOConfig(learning_rate=2e-6).effective_learning_rate == 2e-6


def test_the_default_follows_lora_when_a_base_config_is_overridden() -> None:
    config = GRPOConfig.from_kwargs(GRPOConfig(lora_rank=16), lora_rank=None)
    assert config.effective_learning_rate == 1e-5


def test_the_settings_record_the_effective_learning_rate() -> None:
    settings = GRPOConfig(lora_rank=8).to_dict()
    assert (settings["learning_rate"], settings["effective_learning_rate"]) == (None, 3e-4)


@pytest.mark.parametrize(("lora_rank", "expected"), [(4, 3e-4), (None, 1e-5)])
def test_the_optimizer_uses_the_effective_learning_rate(lora_rank: object, expected: float) -> None:
    pytest.importorskip("torch")
    from agentlightning.algorithm.grpo.learning.policy import Policy
    from agentlightning.inference.tiny import build_tiny_engine

    policy = Policy.from_engine(build_tiny_engine(seed=0), GRPOConfig(lora_rank=lora_rank, device="cpu"))  # type: ignore[arg-type]
    assert [group["lr"] for group in policy.optimizer.param_groups] == [expected]
