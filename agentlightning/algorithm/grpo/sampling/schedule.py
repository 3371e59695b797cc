"""Which tasks each GRPO step trains on (a seeded shuffle of the dataset per epoch, read by `task_stream.TaskStream`),
what the run sampled, and when a run stops (step count, epochs or time budget)."""

from __future__ import annotations

import logging
import math
import random
import time
from dataclasses import asdict, dataclass
from typing import Optional

from ..config import GRPOConfig

__all__ = ["SamplingCounts", "StepBudget", "deadline", "max_steps", "tasks_at"]

# The trainer's logger (these records were written from grpo.py before the split; logging configs name it).
logger = logging.getLogger("agentlightning.algorithm.grpo.grpo")


@dataclass
class SamplingCounts:
    """What a run sampled to find informative groups (groups whose rewards vary)."""

    steps: int = 0
    tasks: int = 0  # tasks sampled for training, every round of every step
    extra_tasks: int = 0  # tasks beyond `tasks_per_step`, sampled because too few groups were informative
    steps_short: int = 0  # steps that spent their task budget with fewer informative groups than asked

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def tasks_at(seed: int, n: int, cursor: int, count: int) -> list[int]:
    """`count` dataset indices from position `cursor` of the task stream (a seeded shuffle per epoch)."""
    chosen: list[int] = []
    order: list[int] = []
    order_epoch = -1
    for position in range(cursor, cursor + count):
        epoch, offset = divmod(position, n)
        if epoch != order_epoch:
            order = list(range(n))
            random.Random(seed * 1_000_003 + epoch).shuffle(order)
            order_epoch = epoch
        chosen.append(order[offset])
    return chosen


def max_steps(config: GRPOConfig, n: int) -> Optional[int]:
    """The step count a run over `n` tasks stops at (None: only the time budget stops it)."""
    schedule = config.schedule
    if schedule.max_steps is not None:
        return schedule.max_steps
    if schedule.max_minutes is not None:
        return None
    return math.ceil(n * schedule.epochs / schedule.tasks_per_step)


def deadline(config: GRPOConfig, started: float) -> Optional[float]:
    """The `time.monotonic()` value at which a run started at `started` stops (None: no time budget)."""
    minutes = config.schedule.max_minutes
    return started + minutes * 60.0 if minutes is not None else None


class StepBudget:
    """Whether a run over `n_tasks` tasks starts another training step: not after `max_steps` (or the epochs' worth of
    steps), nor once `max_minutes` have passed since the budget was made (a step started in time finishes). The
    held-out evaluations are outside it; both the budget and its end are logged."""

    def __init__(self, config: GRPOConfig, n_tasks: int) -> None:
        self.minutes = config.schedule.max_minutes
        self.last_step = max_steps(config, n_tasks)
        self.stop_at = deadline(config, time.monotonic())
        if self.stop_at is not None:
            logger.info(
                "GRPO: max_minutes=%g bounds the training steps (a step started in time finishes); the held-out "
                "evaluations before and after are not counted in it",
                self.minutes,
            )

    def allows(self, step: int) -> bool:
        """True when a run that has completed `step` steps starts another one."""
        if self.last_step is not None and step >= self.last_step:
            return False
        if self.stop_at is not None and time.monotonic() >= self.stop_at:
            logger.info("GRPO: the time budget (%.1f min) is used up after step %d", self.minutes, step)
            return False
        return True
