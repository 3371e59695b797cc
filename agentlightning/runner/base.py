"""`Runner`: the component that claims rollouts from a store and runs an agent on them.

Lifecycle (ParallelWorkerBase): `init(agent, hooks=...)` once, `init_worker(worker_id, store)` per worker, then
`iter()` (serve the queue) or `step(task)` (run one task now), then `teardown_worker` and `teardown`.
`run_context` does the whole lifecycle around a `with` block, for scripts and debugging.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Generic, Optional, TypeVar

from agentlightning.types import Hook, NamedResources, ParallelWorkerBase, Rollout, RolloutMode

if TYPE_CHECKING:
    from agentlightning.execution.events import ExecutionEvent
    from agentlightning.litagent.litagent import LitAgent
    from agentlightning.store.base import LightningStore

__all__ = ["Runner"]

logger = logging.getLogger(__name__)

T_task = TypeVar("T_task")


class Runner(ParallelWorkerBase, Generic[T_task]):
    """Abstract runner. Subclasses implement the lifecycle methods, `iter` and `step`."""

    def init(self, agent: LitAgent[T_task], *, hooks: Optional[Sequence[Hook]] = None, **kwargs: Any) -> None:
        """Prepare to run `agent` (once, before any worker starts)."""
        raise NotImplementedError()

    def init_worker(self, worker_id: int, store: LightningStore, **kwargs: Any) -> None:  # type: ignore[override]
        """Prepare worker `worker_id` to talk to `store`."""
        raise NotImplementedError()

    def teardown_worker(self, worker_id: int, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError()

    def teardown(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError()

    def run(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("Runner.run is not used; call iter() to serve the queue or step(task) for one task")

    async def iter(self, *, event: Optional[ExecutionEvent] = None) -> None:
        """Claim and run rollouts until `event` is set (or the runner's own limit is reached)."""
        raise NotImplementedError()

    async def step(
        self,
        input: T_task,
        *,
        resources: Optional[NamedResources] = None,
        mode: Optional[RolloutMode] = None,
        event: Optional[ExecutionEvent] = None,
    ) -> Rollout:
        """Run the agent on `input` now (outside the queue) and return the finished rollout."""
        raise NotImplementedError()

    @contextmanager
    def run_context(
        self,
        *,
        agent: LitAgent[T_task],
        store: LightningStore,
        hooks: Optional[Sequence[Hook]] = None,
        worker_id: Optional[int] = None,
    ) -> Iterator[Runner[T_task]]:
        """Initialise the runner for `agent` and `store` around a `with` block, then tear it down.

        Teardown runs even when the block raises; errors of the teardowns are logged, not raised.
        """
        worker = worker_id if worker_id is not None else 0
        initialized = worker_initialized = False
        try:
            self.init(agent=agent, hooks=hooks)
            initialized = True
            self.init_worker(worker_id=worker, store=store)
            worker_initialized = True
            yield self
        finally:
            if worker_initialized:
                try:
                    self.teardown_worker(worker)
                except Exception:
                    logger.exception("Runner teardown_worker(%s) failed", worker)
            if initialized:
                try:
                    self.teardown()
                except Exception:
                    logger.exception("Runner teardown failed")
