"""Prompt prefixes whose keys and values are kept between requests, so their prefill is computed once.

An agent's calls share long prefixes: the system prompt, the tools' description and worked examples come first in
every call, and the calls of a GRPO group share the whole first prompt. When a prompt starts with a kept prefix, only
the rest of it is prefilled, attending to the kept keys and values (exactly what a full prefill computes for those
positions, up to float rounding of batched arithmetic).

What is kept is learned from traffic: each computed prompt is compared with the last few; when it shares at least
`min_length` leading ids with one of them and no kept prefix covers most of that, the shared part's keys and values
are cut out of the prefill that just ran (no extra forward) and kept. A bounded number of prefixes are kept (least
recently used first out), for one weights version: new weights drop them all.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from agentlightning.utils.token_prefix import common_prefix_length

__all__ = ["KeptPrefix", "PrefixCache"]


@dataclass
class KeptPrefix:
    """A prefix and its keys and values, one `(1, heads, length, dim)` pair per layer."""

    ids: tuple[int, ...]
    keys: list[Any]
    values: list[Any]

    @property
    def length(self) -> int:
        return len(self.ids)


class PrefixCache:
    """The kept prefixes of one engine (scheduler thread only; no locking)."""

    def __init__(self, *, capacity: int = 4, min_length: int = 64, history: int = 16) -> None:
        self.capacity = capacity
        self.min_length = min_length
        self.enabled = capacity > 0
        self._kept: OrderedDict[tuple[int, ...], KeptPrefix] = OrderedDict()
        self._recent: deque[tuple[int, ...]] = deque(maxlen=history)
        self._version: Optional[str] = None
        self.hits = 0  # prompts prefilled from a kept prefix
        self.saved_tokens = 0  # prompt tokens not computed thanks to them

    def __len__(self) -> int:
        return len(self._kept)

    def check_version(self, version: str) -> None:
        """Drop everything kept for other weights."""
        if version != self._version:
            self.clear()
            self._version = version

    def clear(self) -> None:
        """Forget every kept prefix (new weights; call only while the scheduler is not running a step)."""
        self._kept.clear()
        self._recent.clear()

    def find(self, prompts: Sequence[Sequence[int]]) -> Optional[KeptPrefix]:
        """The longest kept prefix that every prompt starts with and goes beyond."""
        if not self.enabled or not self._kept:
            return None
        best: Optional[KeptPrefix] = None
        shortest = min(len(p) for p in prompts)
        for prefix in self._kept.values():
            if prefix.length >= shortest or (best is not None and prefix.length <= best.length):
                continue
            if all(tuple(p[: prefix.length]) == prefix.ids for p in prompts):
                best = prefix
        if best is not None:
            self._kept.move_to_end(best.ids)
        return best

    def candidate(self, prompt: Sequence[int]) -> int:
        """How many leading ids of `prompt` are worth keeping (0: none): the longest part it shares with a recent
        prompt, when no kept prefix already covers most of it. Records `prompt` as recent."""
        if not self.enabled:
            return 0
        best = max((common_prefix_length(prompt, other) for other in self._recent), default=0)
        self._recent.append(tuple(prompt))
        best = min(best, len(prompt) - 1)
        if best < self.min_length:
            return 0
        for prefix in self._kept.values():
            if prefix.length >= 0.9 * best and tuple(prompt[: prefix.length]) == prefix.ids:
                return 0
        return best

    def keep(self, ids: Sequence[int], keys: list[Any], values: list[Any]) -> None:
        prefix = KeptPrefix(tuple(ids), keys, values)
        self._kept[prefix.ids] = prefix
        self._kept.move_to_end(prefix.ids)
        while len(self._kept) > self.capacity:
            self._kept.popitem(last=False)
