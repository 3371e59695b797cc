"""How many leading token ids sequences share (binary search over slice comparisons, which run in C)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["common_prefix_length", "shared_prefix_length"]


def common_prefix_length(a: Sequence[int], b: Sequence[int], limit: int | None = None) -> int:
    """How many leading ids `a` and `b` share (at most `limit`). Lists and tuples compare alike."""
    length = min(len(a), len(b)) if limit is None else max(min(limit, len(a), len(b)), 0)
    head_a, head_b = list(a[:length]), list(b[:length])
    if head_a == head_b:
        return length
    low, high = 0, length  # invariant: the first `low` ids agree, the first `high` do not
    while high - low > 1:
        middle = (low + high) // 2
        if head_a[:middle] == head_b[:middle]:
            low = middle
        else:
            high = middle
    return low


def shared_prefix_length(rows: Sequence[Sequence[int]], limit: int | None = None) -> int:
    """How many leading ids all `rows` share (at most `limit`; 0 without rows)."""
    if not rows:
        return 0
    first = rows[0]
    length = len(first) if limit is None else max(min(limit, len(first)), 0)
    for other in rows[1:]:
        length = common_prefix_length(first, other, length)
    return length
