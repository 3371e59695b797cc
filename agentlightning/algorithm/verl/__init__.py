"""VERL integration: train the agent's model with VERL's PPO/GRPO on GPUs, rollouts coming from the store.

`VERL(config)` is the Algorithm (needs the `verl` extra). The conversion of rollouts into training rows (`batch`)
and the store-side daemon (`daemon`) need neither verl nor a GPU; the trainer, the Ray actor and the launch path
import verl, ray and torch only when used.
"""

from __future__ import annotations

from .batch import MissingTokenIdsError, RolloutTrace, TrainingRow, VerlBatch, build_batch
from .daemon import AgentModeDaemon
from .interface import VERL, compose_config, require_verl

__all__ = [
    "VERL",
    "AgentModeDaemon",
    "MissingTokenIdsError",
    "RolloutTrace",
    "TrainingRow",
    "VerlBatch",
    "build_batch",
    "compose_config",
    "require_verl",
]
