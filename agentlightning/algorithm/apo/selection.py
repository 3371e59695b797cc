"""How APO picks parents and keeps its beam: pure functions over scores, tested without a store or a model.

Two selection rules: the reference's mean-score beam (keep the `width` best means), and a per-task Pareto rule
(keep every prompt that is best on at least one validation task and not dominated by another, as GEPA does).
Ties always keep the earlier entry, and APO lists the current beam before new candidates, so with all-equal scores
the beam stays as it was.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import Optional, TypeVar

__all__ = ["sample_parents", "select_by_mean", "select_pareto"]

T = TypeVar("T")

_TOLERANCE = 1e-9


def sample_parents(beam: Sequence[T], width: int, rng: random.Random) -> list[tuple[int, T]]:
    """`width` (index, prompt) parents: a random choice without repeats, or the beam repeated when it is smaller."""
    if not beam:
        raise ValueError("Cannot sample parents from an empty beam")
    if len(beam) < width:
        return [(index % len(beam), beam[index % len(beam)]) for index in range(width)]
    return [(index, beam[index]) for index in rng.sample(range(len(beam)), width)]


def _rank_key(scores: Sequence[Optional[float]], index: int) -> tuple[float, int]:
    score = scores[index]
    return (-score if score is not None else math.inf, index)


def select_by_mean(scores: Sequence[Optional[float]], width: int) -> list[int]:
    """Indices of the `width` best scores, best first; unknown scores (None) rank last; ties keep the earlier."""
    order = sorted(range(len(scores)), key=lambda index: _rank_key(scores, index))
    return order[:width]


def _dominates(first: Mapping[str, float], second: Mapping[str, float], tasks: Sequence[str]) -> bool:
    better = False
    for task in tasks:
        a, b = first.get(task, -math.inf), second.get(task, -math.inf)
        if a < b - _TOLERANCE:
            return False
        if a > b + _TOLERANCE:
            better = True
    return better


def select_pareto(per_task: Sequence[Mapping[str, float]], scores: Sequence[Optional[float]], width: int) -> list[int]:
    """Indices of the prompts that are best on at least one task and not dominated, by mean score, at most `width`.

    `per_task[i]` maps a task key to prompt i's reward on it (missing: no result). Falls back to `select_by_mean`
    when no prompt has any per-task result.
    """
    tasks = sorted({task for rewards in per_task for task in rewards})
    if not tasks:
        return select_by_mean(scores, width)
    winners: set[int] = set()
    for task in tasks:
        values = [rewards.get(task) for rewards in per_task]
        known = [value for value in values if value is not None]
        if not known:
            continue
        best = max(known)
        winners.update(i for i, value in enumerate(values) if value is not None and value >= best - _TOLERANCE)
    front = [
        i for i in sorted(winners) if not any(_dominates(per_task[j], per_task[i], tasks) for j in winners if j != i)
    ]
    front.sort(key=lambda index: _rank_key(scores, index))
    return front[:width]
