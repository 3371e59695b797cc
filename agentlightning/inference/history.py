"""Exact ids for the assistant turns this server generated, so a conversation's next prompt extends the last one.

An agent sends its whole conversation again on every call. Rendering an earlier assistant turn from its message
(text decoded, tool calls parsed and re-serialised by the client) does not always give back the ids the model
generated: a sampled non-canonical tokenization, whitespace around a tool call, JSON re-serialised with other
spacing or key order. The next prompt then does not extend the previous prompt + response, and the calls cannot be
trained as one sequence (see `agentlightning.adapter.trajectory`).

So the server remembers, for each turn it generated, the prompt it answered and the ids it produced, keyed by what
the client will send back: the id of the first tool call it announced (unique per generation), or else the text of
the answer. When a later prompt holds that turn right after exactly that prompt, the turn is rendered as the
remembered ids instead of re-tokenized text. Nothing else changes: a turn the server does not know (written by
the user, generated elsewhere, or edited), or one whose preceding ids differ, renders from its message as before.
The memory is a bounded LRU (one entry per generated turn; a few hundred ids each).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Optional

__all__ = ["GeneratedTurns", "turn_key"]

TurnKey = tuple[str, str]


def turn_key(message: Mapping[str, Any]) -> Optional[TurnKey]:
    """What identifies an assistant turn the client sends back: its first tool call's id, or its text."""
    calls = message.get("tool_calls")
    if isinstance(calls, Sequence) and calls:
        first = calls[0]
        call_id = first.get("id") if isinstance(first, Mapping) else None
        return ("call", call_id) if isinstance(call_id, str) and call_id else None
    content = message.get("content")
    if isinstance(content, str) and content:
        return ("text", content)
    return None


def _prompt_digest(prompt_ids: Sequence[int]) -> int:
    return hash((len(prompt_ids), tuple(prompt_ids)))


class GeneratedTurns:
    """Bounded memory of generated turns: (prompt answered, turn key) -> the generated ids. Thread-safe."""

    def __init__(self, capacity: int = 8192) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self.capacity = capacity
        self._entries: OrderedDict[tuple[int, TurnKey], tuple[int, ...]] = OrderedDict()
        self._keys: dict[TurnKey, int] = {}  # how many entries hold each turn key
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def remember(
        self, prompt_ids: Sequence[int], content: Optional[str], call_ids: Sequence[str], token_ids: Sequence[int]
    ) -> None:
        """Record a finished generation: the prompt, the answer as returned (text and tool call ids) and its ids."""
        key = turn_key({"content": content, "tool_calls": [{"id": i} for i in call_ids]})
        if key is None or not token_ids:
            return
        entry = (_prompt_digest(prompt_ids), key)
        with self._lock:
            if entry not in self._entries:
                self._keys[key] = self._keys.get(key, 0) + 1
            self._entries[entry] = tuple(int(t) for t in token_ids)
            self._entries.move_to_end(entry)
            while len(self._entries) > self.capacity:
                (_, old_key), _ = self._entries.popitem(last=False)
                left = self._keys[old_key] - 1
                if left:
                    self._keys[old_key] = left
                else:
                    del self._keys[old_key]

    def lookup(self, prompt_ids: Sequence[int], message: Mapping[str, Any]) -> Optional[list[int]]:
        """The ids generated for `message` right after exactly `prompt_ids`, if this server generated it."""
        key = turn_key(message)
        if key is None:
            return None
        with self._lock:
            found = self._entries.get((_prompt_digest(prompt_ids), key))
        return list(found) if found is not None else None

    def knows(self, message: Mapping[str, Any]) -> bool:
        """Whether some remembered turn has `message`'s key (the cheap test before rendering piece by piece)."""
        key = turn_key(message)
        if key is None:
            return False
        with self._lock:
            return key in self._keys
