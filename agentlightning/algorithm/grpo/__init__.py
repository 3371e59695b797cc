"""GRPO: reinforcement learning of the model an agent calls (CPU or one GPU), through store, runners, proxy, adapter."""

from .config import GRPOConfig
from .grpo import GRPO, EvaluationReport
from .learning.advantages import GroupAdvantages, group_advantages
from .rollouts.reading import SkipCounts
from .serving.options import ProxyOptions, VllmOptions

__all__ = [
    "GRPO",
    "EvaluationReport",
    "GRPOConfig",
    "GroupAdvantages",
    "ProxyOptions",
    "SkipCounts",
    "VllmOptions",
    "group_advantages",
]
