"""GRPO: reinforcement learning of the model an agent calls (CPU or one GPU), through store, runners, proxy, adapter."""

from .config import (
    CheckpointSettings,
    ComputeSettings,
    GRPOConfig,
    LoraSettings,
    LossSettings,
    OptimizerSettings,
    RewardSettings,
    SamplerSettings,
    SampleSettings,
    ScheduleSettings,
)
from .grpo import GRPO, EvaluationReport
from .learning.advantages import GroupAdvantages, group_advantages
from .rollouts.reading import SkipCounts
from .serving.options import ProxyOptions, VllmOptions

__all__ = [
    "GRPO",
    "CheckpointSettings",
    "ComputeSettings",
    "EvaluationReport",
    "GRPOConfig",
    "GroupAdvantages",
    "LoraSettings",
    "LossSettings",
    "OptimizerSettings",
    "ProxyOptions",
    "RewardSettings",
    "SampleSettings",
    "SamplerSettings",
    "ScheduleSettings",
    "SkipCounts",
    "VllmOptions",
    "group_advantages",
]
