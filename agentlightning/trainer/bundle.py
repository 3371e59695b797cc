"""`AgentRunnerBundle`: what the Trainer hands a strategy as its runner bundle.

A strategy calls the bundle once per runner (`bundle(store, worker_id, event)`), in threads, processes or Ray actors.
Each call runs its own deep copy of the runner template, so runners sharing a process never share state; a runner that
cannot be copied is refused rather than shared. Each runner's worker id names its host and process, so runners of
several machines never collide in the store (their heartbeats and claims stay apart).
"""

from __future__ import annotations

import copy
import os
import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentlightning.execution.events import ExecutionEvent
    from agentlightning.litagent.litagent import LitAgent
    from agentlightning.runner.base import Runner
    from agentlightning.store.base import LightningStore
    from agentlightning.types import Hook

__all__ = ["DEFAULT_WORKER_ID_PREFIX", "AgentRunnerBundle", "process_worker_id_prefix"]

DEFAULT_WORKER_ID_PREFIX = "Worker-"
"""`LitAgentRunner`'s own prefix ("Worker-<n>"), which is the same in every process of every machine."""


def process_worker_id_prefix() -> str:
    """The worker id prefix of runners in this process: "<host>-<pid>-runner-"."""
    return f"{socket.gethostname()}-{os.getpid()}-runner-"


class AgentRunnerBundle:
    """The runner bundle of one agent: a fresh copy of the runner per worker, initialised for the agent.

    Picklable (runner processes receive it).
    """

    def __init__(self, runner: Runner[Any], agent: LitAgent[Any], hooks: Sequence[Hook]) -> None:
        self.runner = runner
        self.agent = agent
        self.hooks = tuple(hooks)

    def runner_for_worker(self, worker_id: int) -> Runner[Any]:
        """A copy of the runner template for worker `worker_id`, with a worker id naming this host and process.

        Raises:
            TypeError: the runner cannot be deep-copied (runners of one process must not share one instance).
        """
        try:
            runner = copy.deepcopy(self.runner)
        except Exception as exc:
            raise TypeError(
                f"The runner ({type(self.runner).__name__}) cannot be copied for worker {worker_id} "
                f"({type(exc).__name__}: {exc}). Every runner gets its own copy so that runners sharing a process do "
                "not share state: make it deep-copyable (e.g. create locks, clients and threads in init_worker, or "
                "define __deepcopy__), or run one runner per process."
            ) from exc
        if getattr(runner, "worker_id_prefix", None) == DEFAULT_WORKER_ID_PREFIX:
            runner.worker_id_prefix = process_worker_id_prefix()  # type: ignore[attr-defined]
        return runner

    async def __call__(self, store: LightningStore, worker_id: int, event: ExecutionEvent) -> None:
        runner = self.runner_for_worker(worker_id)
        with runner.run_context(agent=self.agent, store=store, hooks=self.hooks, worker_id=worker_id):
            await runner.iter(event=event)
