"""A per-rollout budget for what an agent prints.

An agent that prints megabytes per rollout floods the terminal and log files and slows every runner sharing them.
While a rollout runs, writes to `sys.stdout` / `sys.stderr` from its thread or task go through a budget: output
passes unchanged until the rollout has printed `limit` characters, then one notice is written and the rest of that
rollout's output is dropped. Output outside rollouts (and from threads the agent started without copying the context
variables) is not affected. The streams are wrapped once per process, and unwrapped when no runner needs them.
"""

from __future__ import annotations

import contextvars
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Optional, TextIO

__all__ = ["OutputBudget", "output_budget"]

_BUDGET: contextvars.ContextVar[Optional[OutputBudget]] = contextvars.ContextVar("agl_output_budget", default=None)
_lock = threading.Lock()
_users = 0
_originals: dict[str, TextIO] = {}


class OutputBudget:
    """How much one rollout may still print."""

    def __init__(self, rollout_id: str, limit: int) -> None:
        self.rollout_id = rollout_id
        self.limit = limit
        self.written = 0
        self.dropped = 0
        self._lock = threading.Lock()

    def admit(self, text: str) -> tuple[str, Optional[str]]:
        """The part of `text` to write, and a notice to write once when the budget runs out."""
        with self._lock:
            if self.written >= self.limit:
                self.dropped += len(text)
                return "", None
            room = self.limit - self.written
            self.written += len(text)
            if len(text) <= room:
                return text, None
            self.dropped += len(text) - room
            self.written = self.limit
            notice = (
                f"\n[agentlightning] rollout {self.rollout_id} printed more than {self.limit} characters; "
                "the rest of its output is dropped\n"
            )
            return text[:room], notice


class _BudgetedStream:
    """Wraps a text stream; writes made inside a rollout are charged to its budget."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        budget = _BUDGET.get()
        if budget is None:
            return self._inner.write(text)
        admitted, notice = budget.admit(text)
        if admitted:
            self._inner.write(admitted)
        if notice:
            self._inner.write(notice)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _install() -> None:
    global _users
    with _lock:
        _users += 1
        if _users > 1:
            return
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            if stream is not None and not isinstance(stream, _BudgetedStream):
                _originals[name] = stream
                setattr(sys, name, _BudgetedStream(stream))


def _uninstall() -> None:
    global _users
    with _lock:
        _users = max(0, _users - 1)
        if _users:
            return
        for name, original in list(_originals.items()):
            current = getattr(sys, name)
            if isinstance(current, _BudgetedStream) and current._inner is original:
                setattr(sys, name, original)
            del _originals[name]


@contextmanager
def output_guard(enabled: bool) -> Iterator[None]:
    """Keep the budgeted streams installed while a runner works (a no-op when `enabled` is False)."""
    if not enabled:
        yield
        return
    _install()
    try:
        yield
    finally:
        _uninstall()


@contextmanager
def output_budget(rollout_id: str, limit: Optional[int]) -> Iterator[Optional[OutputBudget]]:
    """Charge what the code inside prints to a budget of `limit` characters (no budget when `limit` is None)."""
    if limit is None:
        yield None
        return
    budget = OutputBudget(rollout_id, limit)
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)
