"""Which tasks each GRPO step trains on, and when a run stops (step count, epochs or time budget).

Tasks are taken from a seeded shuffle of the dataset per epoch through a cursor that only moves forward, so a run
resumed from a checkpoint (which records the cursor) continues with the tasks it would have taken next, however many
extra tasks earlier steps sampled while looking for informative groups.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass
from typing import Optional

from ..config import GRPOConfig

__all__ = ["SamplingCounts", "deadline", "max_steps", "task_indices", "tasks_at"]


@dataclass
class SamplingCounts:
    """What a run sampled to find informative groups (groups whose rewards vary)."""

    steps: int = 0
    tasks: int = 0  # tasks sampled for training, every round of every step
    extra_tasks: int = 0  # tasks beyond `tasks_per_step`, sampled because too few groups were informative
    steps_short: int = 0  # steps that spent their task budget with fewer informative groups than asked

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def tasks_at(config: GRPOConfig, n: int, cursor: int, count: int) -> list[int]:
    """`count` dataset indices from position `cursor` of the task stream (a seeded shuffle per epoch)."""
    chosen: list[int] = []
    order: list[int] = []
    order_epoch = -1
    for position in range(cursor, cursor + count):
        epoch, offset = divmod(position, n)
        if epoch != order_epoch:
            order = list(range(n))
            random.Random(config.seed * 1_000_003 + epoch).shuffle(order)
            order_epoch = epoch
        chosen.append(order[offset])
    return chosen


def task_indices(config: GRPOConfig, n: int, step: int) -> list[int]:
    """The first tasks of `step` when every step took `tasks_per_step` tasks (runs without extra sampling)."""
    return tasks_at(config, n, step * config.tasks_per_step, config.tasks_per_step)


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
