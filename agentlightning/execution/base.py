"""`ExecutionStrategy`: where the algorithm and the runners run (threads, processes, a Ray cluster).

A strategy receives two opaque bundles from the trainer: the algorithm bundle `async (store, event) -> None` and the
runner bundle `async (store, worker_id, event) -> None`, plus the store. It decides where each bundle runs, what
store object each side gets (the store itself, a thread-safe wrapper, an HTTP client of a server), and how everything
stops: the shared `ExecutionEvent` asks for a cooperative stop; strategies escalate when that is not enough.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar

from agentlightning.env_var import resolve_managed_store_flag

from .events import ExecutionEvent

if TYPE_CHECKING:
    from agentlightning.store.base import LightningStore

__all__ = ["AlgorithmBundle", "ExecutionStrategy", "RunnerBundle", "resolve_managed_store_flag"]

AlgorithmBundle = Callable[["LightningStore", ExecutionEvent], Awaitable[None]]
"""Runs the algorithm side against a store until it is done (or the event is set)."""

RunnerBundle = Callable[["LightningStore", int, ExecutionEvent], Awaitable[None]]
"""Runs runner number `worker_id` against a store until the event is set."""


class ExecutionStrategy:
    """Base class of execution strategies. `execute` blocks until the run is over."""

    alias: ClassVar[str] = ""
    n_runners: int = 1
    interrupted: bool = False
    """Set by `execute` when a Ctrl-C (or a KeyboardInterrupt raised by a bundle) ended the run. `execute` handles
    it without raising (the 0.2/0.3 contract); the Trainer raises it again once everything has stopped."""

    def execute(self, algorithm: AlgorithmBundle, runner: RunnerBundle, store: LightningStore) -> None:
        """Run the algorithm and `n_runners` runners against `store` until the algorithm is done.

        Must stop every thread or process it started before returning, also on errors and KeyboardInterrupt. A
        KeyboardInterrupt is not raised: `interrupted` is set instead.
        """
        raise NotImplementedError()

    def describe(self) -> dict[str, Any]:
        """What a progress display or a log line says about this strategy."""
        return {"strategy": self.alias or type(self).__name__, "n_runners": self.n_runners}
