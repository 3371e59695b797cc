"""Which tasks each GRPO step trains on, and when a run stops (step count, epochs or time budget)."""

from __future__ import annotations

import math
import random
from typing import Optional

from .config import GRPOConfig

__all__ = ["deadline", "max_steps", "task_indices"]


def task_indices(config: GRPOConfig, n: int, step: int) -> list[int]:
    """The tasks of `step`: a seeded shuffle of the dataset per epoch, taken in order (reproducible on resume)."""
    per_step = config.tasks_per_step
    chosen: list[int] = []
    for cursor in range(step * per_step, (step + 1) * per_step):
        epoch, position = divmod(cursor, n)
        order = list(range(n))
        random.Random(config.seed * 1_000_003 + epoch).shuffle(order)
        chosen.append(order[position])
    return chosen


def max_steps(config: GRPOConfig, n: int) -> Optional[int]:
    """The step count a run over `n` tasks stops at (None: only the time budget stops it)."""
    if config.max_steps is not None:
        return config.max_steps
    if config.max_minutes is not None:
        return None
    return math.ceil(n * config.epochs / config.tasks_per_step)


def deadline(config: GRPOConfig, started: float) -> Optional[float]:
    """The `time.monotonic()` value at which a run started at `started` stops (None: no time budget)."""
    return started + config.max_minutes * 60.0 if config.max_minutes is not None else None
