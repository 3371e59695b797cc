"""The settings of a GRPO run: `GRPOConfig` (`grpo_config.py`) and its sections, one per concern (`sections.py`)."""

from .grpo_config import FULL_FINE_TUNE_LEARNING_RATE, LORA_LEARNING_RATE, GRPOConfig
from .sections import (
    CheckpointSettings,
    ComputeSettings,
    LoraSettings,
    LossSettings,
    OptimizerSettings,
    RewardSettings,
    SamplerSettings,
    SampleSettings,
    ScheduleSettings,
)

__all__ = [
    "FULL_FINE_TUNE_LEARNING_RATE",
    "LORA_LEARNING_RATE",
    "CheckpointSettings",
    "ComputeSettings",
    "GRPOConfig",
    "LoraSettings",
    "LossSettings",
    "OptimizerSettings",
    "RewardSettings",
    "SampleSettings",
    "SamplerSettings",
    "ScheduleSettings",
]
