"""GRPO settings are validated when built; a bad value names the setting."""

from __future__ import annotations

import pytest

from agentlightning.algorithm.grpo import GRPOConfig


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("group_size", 1),
        ("group_size", 0),
        ("tasks_per_step", -1),
        ("learning_rate", 0.0),
        ("learning_rate", float("nan")),
        ("max_minutes", -5.0),
        ("kl_coef", -0.1),
        ("loss_aggregation", "mean"),
        ("lora_rank", 0),
        ("max_steps", True),
        ("temperature", 0.0),
        ("temperature", -0.5),
    ],
)
def test_invalid_setting_is_rejected_with_its_name(name: str, value: object) -> None:
    with pytest.raises(ValueError, match=name):
        GRPOConfig(**{name: value})  # type: ignore[arg-type]


def test_unknown_setting_is_a_type_error_naming_it() -> None:
    with pytest.raises(TypeError, match="group_sise"):
        GRPOConfig.from_kwargs(group_sise=4)


def test_keyword_settings_override_a_base_config() -> None:
    config = GRPOConfig.from_kwargs(GRPOConfig(group_size=4, seed=3), learning_rate=1e-4)
    assert (config.group_size, config.seed, config.learning_rate) == (4, 3, 1e-4)


def test_a_greedy_training_temperature_is_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="no group carries a learning signal"):
        GRPOConfig(temperature=0)
