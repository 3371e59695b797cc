"""`TaskStream`: the run's stream of training tasks, read through a cursor that only moves forward.

Position `p` of the stream is a pure function of `p` (a seeded shuffle of the dataset per epoch, `schedule.tasks_at`,
or with `balance_by` the balanced cycle over the strata, `balance.balanced_tasks_at`), so a run resumed with the
cursor its checkpoint recorded continues with the tasks it would have taken next, however many extra tasks earlier
steps sampled while looking for informative groups.
"""

from __future__ import annotations

from typing import Optional

from .balance import Strata, balanced_tasks_at
from .schedule import tasks_at

__all__ = ["TaskStream"]


class TaskStream:
    """The dataset indices of a run's training tasks, `count` at a time from `cursor` on."""

    def __init__(self, n: int, seed: int, *, strata: Optional[Strata] = None, cursor: int = 0) -> None:
        self.n, self.seed, self.strata = n, seed, strata
        self.cursor = cursor  # position of the next task (what a checkpoint records as `task_cursor`)

    def take(self, count: int) -> list[int]:
        """The next `count` tasks' dataset indices; the cursor moves past them."""
        if self.strata is not None:
            indices = balanced_tasks_at(self.strata, self.seed, self.cursor, count)
        else:
            indices = tasks_at(self.seed, self.n, self.cursor, count)
        self.cursor += count
        return indices
