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


def test_sections_and_flat_settings_are_the_same_settings() -> None:
    from agentlightning.algorithm.grpo import LoraSettings, ScheduleSettings

    sectioned = GRPOConfig(schedule=ScheduleSettings(group_size=4, seed=3), lora=LoraSettings(lora_rank=8))
    assert sectioned == GRPOConfig(group_size=4, seed=3, lora_rank=8)
    assert (sectioned.group_size, sectioned.schedule.group_size, sectioned.lora.lora_rank) == (4, 4, 8)


def test_a_flat_setting_overrides_its_given_section() -> None:
    from agentlightning.algorithm.grpo import ScheduleSettings

    config = GRPOConfig(schedule=ScheduleSettings(group_size=4, seed=3), seed=5)
    assert (config.group_size, config.seed) == (4, 5)
    assert GRPOConfig.from_kwargs(config, schedule=ScheduleSettings(tasks_per_step=3)).schedule == ScheduleSettings(
        tasks_per_step=3
    )


def test_every_section_field_is_a_flat_setting_once() -> None:
    from dataclasses import fields

    from agentlightning.algorithm.grpo.config.grpo_config import FLAT_SETTINGS, SECTIONS

    in_sections = {field.name: name for name, kind in SECTIONS.items() for field in fields(kind)}
    assert in_sections == FLAT_SETTINGS
    assert list(GRPOConfig().to_dict()) == [*FLAT_SETTINGS, "effective_learning_rate"]


def test_a_flat_setting_read_on_the_class_is_its_default() -> None:
    assert (GRPOConfig.saturation_reward, GRPOConfig.group_size, GRPOConfig.learning_rate) == (0.9, 8, None)


def test_a_section_validates_its_settings_and_a_flat_write_is_validated() -> None:
    from agentlightning.algorithm.grpo import SamplerSettings

    with pytest.raises(ValueError, match="tis_cap"):
        SamplerSettings(tis_cap=0.5)
    config = GRPOConfig()
    config.group_size = 4
    assert config.schedule.group_size == 4
    with pytest.raises(ValueError, match="group_size"):
        config.group_size = 1


def test_a_section_of_the_wrong_kind_or_an_unknown_name_is_a_type_error() -> None:
    from agentlightning.algorithm.grpo import LossSettings

    with pytest.raises(TypeError, match="schedule must be a ScheduleSettings"):
        GRPOConfig(schedule=LossSettings())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="group_sise"):
        GRPOConfig(group_sise=4)
