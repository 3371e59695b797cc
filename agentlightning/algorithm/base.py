"""`Algorithm`: the learning side of a training run.

An algorithm is handed a store, an adapter, an optional LLM proxy and the initial resources by the trainer, then
`run(train_dataset, val_dataset)` drives the run: it publishes resources, enqueues rollouts, waits for them, reads
their spans through the adapter and publishes better resources. It never talks to runners directly; the store is
the only thing the two sides share. Listeners (the Trainer's progress display) follow what it does through its events
(`add_event_listener`, `emit_event`).
"""

from __future__ import annotations

import inspect
import logging
import weakref
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Optional, Union

from agentlightning.types import Dataset, NamedResources

from .events import EventListener

if TYPE_CHECKING:
    from agentlightning.adapter.base import Adapter
    from agentlightning.llm_proxy import LLMProxy
    from agentlightning.store.base import LightningStore

__all__ = ["Algorithm", "EventListener"]

logger = logging.getLogger(__name__)


def _deref(ref: Optional[weakref.ReferenceType[Any]], what: str) -> Any:
    if ref is None:
        raise ValueError(f"The {what} has not been set for this algorithm")
    value = ref()
    if value is None:
        raise ValueError(f"The {what} of this algorithm has been garbage-collected")
    return value


class Algorithm:
    """Base class of every algorithm (Baseline, APO, GRPO, VERL, or your own).

    Subclasses implement `run`, either as a plain method or as a coroutine; `is_async()` tells the trainer which.
    The references below are class-level defaults, so a subclass need not call `super().__init__()`.
    The trainer, adapter and LLM proxy are held by weak reference (the trainer owns them); the store is held
    strongly because the execution strategy may hand in a wrapper (for example the HTTP server around the store)
    that nothing else keeps alive.
    """

    _trainer_ref: Optional[weakref.ReferenceType[Any]] = None
    _adapter_ref: Optional[weakref.ReferenceType[Any]] = None
    _llm_proxy_ref: Optional[weakref.ReferenceType[Any]] = None
    _store: Optional[LightningStore] = None
    _initial_resources: Optional[NamedResources] = None
    _event_listeners: tuple[EventListener, ...] = ()

    def is_async(self) -> bool:
        """Whether `run` is a coroutine function (the trainer awaits it) or a plain function (called directly)."""
        return inspect.iscoroutinefunction(self.run)

    # ------------------------------------------------------------------------------------------------ trainer
    def set_trainer(self, trainer: Any) -> None:
        """Remember the trainer that runs this algorithm (weak reference)."""
        self._trainer_ref = weakref.ref(trainer)

    def get_trainer(self) -> Any:
        """The trainer. Raises ValueError when unset or already collected."""
        return _deref(self._trainer_ref, "trainer")

    @property
    def trainer(self) -> Any:
        return self.get_trainer()

    # ------------------------------------------------------------------------------------------------- store
    def set_store(self, store: LightningStore) -> None:
        """The store this algorithm enqueues rollouts into and reads spans from (strong reference)."""
        self._store = store

    def get_store(self) -> LightningStore:
        """The store. Raises ValueError when unset."""
        if self._store is None:
            raise ValueError("The store has not been set for this algorithm")
        return self._store

    # ----------------------------------------------------------------------------------------------- adapter
    def set_adapter(self, adapter: Adapter[Any, Any]) -> None:
        """The adapter that turns a rollout's spans into training data (weak reference)."""
        self._adapter_ref = weakref.ref(adapter)

    def get_adapter(self) -> Adapter[Any, Any]:
        """The adapter. Raises ValueError when unset or already collected."""
        return _deref(self._adapter_ref, "adapter")

    # --------------------------------------------------------------------------------------------- llm proxy
    def set_llm_proxy(self, llm_proxy: Optional[LLMProxy]) -> None:
        """The LLM proxy the algorithm may publish as a resource (weak reference); None forgets it."""
        self._llm_proxy_ref = weakref.ref(llm_proxy) if llm_proxy is not None else None

    def get_llm_proxy(self) -> Optional[LLMProxy]:
        """The LLM proxy, or None when none was set. Raises ValueError when it was set but has been collected."""
        if self._llm_proxy_ref is None:
            return None
        return _deref(self._llm_proxy_ref, "LLM proxy")

    # ------------------------------------------------------------------------------------- initial resources
    def set_initial_resources(self, resources: Optional[NamedResources]) -> None:
        """The resources (prompt templates, LLM endpoints) the run starts from."""
        self._initial_resources = resources

    def get_initial_resources(self) -> Optional[NamedResources]:
        return self._initial_resources

    # ------------------------------------------------------------------------------------------------ events
    def add_event_listener(self, listener: EventListener) -> None:
        """Call `listener(kind, payload)` for each event this algorithm emits (GRPO: "resumed", "rollouts", "update",
        "step", "evaluation", "checkpoint"; see `agentlightning.algorithm.events`). The Trainer adds its progress
        display while `fit` runs."""
        self._event_listeners = (*self._event_listeners, listener)

    def remove_event_listener(self, listener: EventListener) -> None:
        """Stop calling `listener` (one added with `add_event_listener`; any other is ignored)."""
        self._event_listeners = tuple(known for known in self._event_listeners if known != listener)

    def emit_event(self, kind: str, payload: dict[str, Any]) -> None:
        """Tell every listener about an event. A listener that raises is logged and skipped: a broken display never
        stops training."""
        for listener in self._event_listeners:
            self._notify(listener, kind, payload)

    def _notify(self, listener: EventListener, kind: str, payload: dict[str, Any]) -> None:
        """Call one listener; what it raises is logged, never passed on."""
        try:
            listener(kind, payload)
        except Exception as exc:
            logger.warning("%s event listener %r failed on %s: %r", type(self).__name__, listener, kind, exc)

    # --------------------------------------------------------------------------------------------------- run
    def run(
        self,
        train_dataset: Optional[Dataset[Any]] = None,
        val_dataset: Optional[Dataset[Any]] = None,
    ) -> Union[Awaitable[None], None]:
        """Drive the training run over the datasets. Subclasses implement this (sync or async)."""
        raise NotImplementedError(f"{type(self).__name__} must implement run(train_dataset, val_dataset)")

    def __call__(self, *args: Any, **kwargs: Any) -> Union[Awaitable[None], None]:
        return self.run(*args, **kwargs)

    def get_client(self) -> Any:
        """The v0.1 `AgentLightningClient` of the legacy `fit_v0` path, which this implementation does not ship.

        See docs/compatibility.md for the migration path (a store URL and `Trainer.fit`).
        """
        raise NotImplementedError(
            "The legacy v0.1 client protocol is not supported; use Trainer.fit with a store (see docs/compatibility.md)"
        )
