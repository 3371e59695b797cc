"""`LitAgent`: the user's agent as the runner sees it.

An agent implements `rollout` (or `rollout_async`), or separate `training_rollout` / `validation_rollout` methods;
the runner picks the training method for rollouts in "train" mode and the validation method otherwise. Results are
normalised by the runner (see `agentlightning.runner.results`).

The agent is shared by every runner of a process (threads of the shared-memory strategy), so the runner that is
running the current rollout is tracked per thread/task: inside a rollout `self.runner` and `self.tracer` are the
ones executing it.
"""

from __future__ import annotations

import contextvars
import inspect
import warnings
import weakref
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Generic, Optional, TypeVar

from agentlightning.types import NamedResources, Rollout

if TYPE_CHECKING:
    from agentlightning.runner.base import Runner
    from agentlightning.tracer.base import Tracer

__all__ = ["LitAgent", "is_v0_1_rollout_api"]

T = TypeVar("T")

_ASYNC_METHODS = ("training_rollout_async", "validation_rollout_async", "rollout_async")

_CURRENT_RUNNER: contextvars.ContextVar[Optional[Runner[Any]]] = contextvars.ContextVar(
    "agentlightning_current_runner", default=None
)


def is_v0_1_rollout_api(func: Callable[..., Any]) -> bool:
    """True for the v0.1 signature `(task, rollout_id, resources)` (it has a `rollout_id` parameter)."""
    try:
        return "rollout_id" in inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False


def _deref(ref: Optional[weakref.ReferenceType[Any]], what: str) -> Any:
    if ref is None:
        raise ValueError(f"The {what} has not been set for this agent")
    value = ref()
    if value is None:
        raise ValueError(f"The {what} of this agent has been garbage-collected")
    return value


@contextmanager
def running_rollout(runner: Runner[Any]) -> Iterator[None]:
    """Mark `runner` as the runner of the code running in this thread/task (used by runners around a rollout)."""
    token = _CURRENT_RUNNER.set(runner)
    try:
        yield
    finally:
        _CURRENT_RUNNER.reset(token)


class LitAgent(Generic[T]):
    """Base class of agents trained with Agent Lightning.

    Subclasses override `rollout` (sync) or `rollout_async` (async), or the training/validation variants. A rollout
    method receives the task input, the resources (e.g. `{"main_llm": LLM(...)}`) and the rollout being run, and
    returns None (spans and rewards were emitted while it ran), a reward (a number), a list of spans, or a list of
    `SpanCoreFields`.

    Args:
        trained_agents: deprecated; select trained agents with the adapter's `agent_match` instead.
    """

    def __init__(self, *, trained_agents: Optional[str] = None) -> None:
        if trained_agents is not None:
            warnings.warn(
                "LitAgent(trained_agents=...) is deprecated; pass agent_match to the adapter instead",
                DeprecationWarning,
                stacklevel=2,
            )
        self.trained_agents = trained_agents
        self._trainer_ref: Optional[weakref.ReferenceType[Any]] = None
        self._runner_ref: Optional[weakref.ReferenceType[Any]] = None

    def __getstate__(self) -> dict[str, Any]:
        # Sent to runner processes: references to the trainer and runner stay behind (a weakref cannot be pickled).
        state = self.__dict__.copy()
        state["_trainer_ref"] = None
        state["_runner_ref"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    # ------------------------------------------------------------------------------------------------ trainer
    def set_trainer(self, trainer: Any) -> None:
        """Remember the trainer running this agent (weak reference)."""
        self._trainer_ref = weakref.ref(trainer)

    def get_trainer(self) -> Any:
        """The trainer. Raises ValueError when unset or already collected."""
        return _deref(getattr(self, "_trainer_ref", None), "trainer")

    @property
    def trainer(self) -> Any:
        return self.get_trainer()

    # ------------------------------------------------------------------------------------------------- runner
    def set_runner(self, runner: Runner[T]) -> None:
        """Remember the runner running this agent (weak reference)."""
        self._runner_ref = weakref.ref(runner)

    def get_runner(self) -> Runner[T]:
        """The runner running the current rollout (else the one set last). Raises ValueError when there is none."""
        current = _CURRENT_RUNNER.get()
        if current is not None:
            return current
        return _deref(getattr(self, "_runner_ref", None), "runner")

    @property
    def runner(self) -> Runner[T]:
        return self.get_runner()

    # ------------------------------------------------------------------------------------------------- tracer
    def get_tracer(self) -> Tracer:
        """The runner's tracer when the runner has one, else the trainer's."""
        try:
            runner = self.get_runner()
        except ValueError:
            runner = None
        tracer = getattr(runner, "tracer", None) if runner is not None else None
        if tracer is not None:
            return tracer
        return self.get_trainer().tracer

    @property
    def tracer(self) -> Tracer:
        return self.get_tracer()

    # ---------------------------------------------------------------------------------------------- rollouts
    def is_async(self) -> bool:
        """True when the subclass implements the async rollout methods."""
        for name in _ASYNC_METHODS:
            method = getattr(type(self), name, None)
            if method is not None and method is not getattr(LitAgent, name):
                return True
        return False

    def rollout(self, task: T, resources: NamedResources, rollout: Rollout) -> Any:
        """Run the agent on `task` (sync). Override this or `rollout_async`."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement rollout(task, resources, rollout) or rollout_async(...)"
        )

    def rollout_async(self, task: T, resources: NamedResources, rollout: Rollout) -> Awaitable[Any]:
        """Run the agent on `task` (async). Override this or `rollout`."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement rollout_async(task, resources, rollout) or rollout(...)"
        )

    def training_rollout(self, task: T, resources: NamedResources, rollout: Rollout) -> Any:
        """Rollouts in "train" mode; defaults to `rollout`."""
        return self.rollout(task, resources, rollout)

    def validation_rollout(self, task: T, resources: NamedResources, rollout: Rollout) -> Any:
        """Rollouts in "val"/"test" mode (or without a mode); defaults to `rollout`."""
        return self.rollout(task, resources, rollout)

    def training_rollout_async(self, task: T, resources: NamedResources, rollout: Rollout) -> Awaitable[Any]:
        """Async rollouts in "train" mode; defaults to `rollout_async`."""
        return self.rollout_async(task, resources, rollout)

    def validation_rollout_async(self, task: T, resources: NamedResources, rollout: Rollout) -> Awaitable[Any]:
        """Async rollouts in "val"/"test" mode; defaults to `rollout_async`."""
        return self.rollout_async(task, resources, rollout)

    # ------------------------------------------------------------------------------------- deprecated hooks
    def on_rollout_start(self, task: Any, runner: Any, tracer: Any) -> None:
        """Deprecated (v0.1); use a `Hook`. Not called by LitAgentRunner."""

    def on_rollout_end(self, task: Any, rollout: Any, runner: Any, tracer: Any) -> None:
        """Deprecated (v0.1); use a `Hook`. Not called by LitAgentRunner."""
