"""Balanced task streams: each GRPO step draws its tasks evenly across strata of the dataset (`GRPO(balance_by=)`).

`balance_by(task)` names each training task's stratum (any hashable value: a kind, a tool, a difficulty). The
strata are visited in a seeded cyclic order, one task of the next stratum per position of the stream, so any
`k` consecutive positions hold each of the `k` strata once: a step of `tasks_per_step` tasks holds every stratum
`tasks_per_step // k` or one more times, and the extra tasks of dynamic sampling continue the cycle. Within a
stratum the tasks come in a seeded shuffle per pass over it; a small stratum repeats sooner than a large one (every
stratum is drawn equally often, whatever its size).

Position `p` of the stream is a pure function of `p`, the seed and the strata, so a run resumed from its checkpoint
(which records the stream's cursor) continues with the tasks it would have drawn next.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from agentlightning.types import Dataset

__all__ = ["Strata", "balanced_tasks_at", "stratify", "stratum_counts"]


@dataclass(frozen=True)
class Strata:
    """The dataset's tasks grouped by `balance_by`, the strata in the stream's cyclic order."""

    keys: tuple[Hashable, ...]  # each stratum's `balance_by` value
    members: tuple[tuple[int, ...], ...]  # each stratum's dataset indices, in dataset order
    stratum_of: tuple[int, ...]  # each dataset index's position in `keys`


def stratify(dataset: Dataset[Any], balance_by: Callable[[Any], Hashable], seed: int) -> Strata:
    """Group the tasks of `dataset` by `balance_by`; the strata's cyclic order is a seeded shuffle of their order of
    first appearance. A `balance_by` that raises is a ValueError, an unhashable value a TypeError, each naming the
    task's index."""
    found: dict[Hashable, list[int]] = {}
    for index in range(len(dataset)):
        try:
            key = balance_by(dataset[index])
        except Exception as exc:
            raise ValueError(f"balance_by raised on training task {index}: {exc!r}") from exc
        try:
            hash(key)
        except TypeError:
            raise TypeError(
                f"balance_by returned an unhashable {type(key).__name__} for training task {index} ({key!r}): "
                "return a str, int or tuple naming the task's stratum"
            ) from None
        found.setdefault(key, []).append(index)
    if not found:
        raise ValueError("balance_by needs a non-empty training dataset")
    keys = list(found)
    random.Random(f"balance:{seed}").shuffle(keys)
    stratum_of = [0] * len(dataset)
    for position, key in enumerate(keys):
        for index in found[key]:
            stratum_of[index] = position
    return Strata(tuple(keys), tuple(tuple(found[key]) for key in keys), tuple(stratum_of))


def balanced_tasks_at(strata: Strata, seed: int, cursor: int, count: int) -> list[int]:
    """`count` dataset indices from position `cursor` of the balanced stream."""
    k = len(strata.keys)
    orders: dict[tuple[int, int], list[int]] = {}
    chosen: list[int] = []
    for position in range(cursor, cursor + count):
        stratum, draw = position % k, position // k
        members = strata.members[stratum]
        epoch, offset = divmod(draw, len(members))
        order = orders.get((stratum, epoch))
        if order is None:
            order = list(members)
            random.Random(f"balance:{seed}:{stratum}:{epoch}").shuffle(order)
            orders[(stratum, epoch)] = order
        chosen.append(order[offset])
    return chosen


def stratum_counts(strata: Strata, indices: Sequence[int]) -> dict[str, int]:
    """How many of `indices` each stratum holds, keyed by `str` of its `balance_by` value (strata in cyclic order,
    absent ones left out)."""
    counts = [0] * len(strata.keys)
    for index in indices:
        counts[strata.stratum_of[index]] += 1
    found: dict[str, int] = {}
    for key, count in zip(strata.keys, counts, strict=True):
        if count:
            found[str(key)] = found.get(str(key), 0) + count
    return found
