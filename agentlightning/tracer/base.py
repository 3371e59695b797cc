"""`Tracer`: the abstract component that records what an agent does as spans tied to a rollout attempt."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, TypeVar

from agentlightning.types import ParallelWorkerBase, Span, SpanCoreFields, SpanRecordingContext, TraceStatus

if TYPE_CHECKING:
    from agentlightning.store.base import LightningStore

__all__ = ["TraceTarget", "Tracer"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class TraceTarget:
    """Where the spans of one trace context go: a store and the rollout attempt they belong to (all optional)."""

    store: Optional[LightningStore] = None
    rollout_id: Optional[str] = None
    attempt_id: Optional[str] = None

    @property
    def writes_to_store(self) -> bool:
        return self.store is not None and bool(self.rollout_id) and bool(self.attempt_id)


class Tracer(ParallelWorkerBase):
    """Records spans while agent code runs inside `trace_context`.

    Lifecycle (from ParallelWorkerBase): `init()` once in the driver, `init_worker(worker_id, store)` in each worker,
    then any number of `trace_context(...)` blocks, then `teardown_worker(worker_id)` and `teardown()`.

    A trace context ties the spans created inside it to a rollout attempt. The store comes from `init_worker` (v0.3)
    or from the context itself (v0.2 form `trace_context(name, store=..., rollout_id=..., attempt_id=...)`). While a
    context is open the tracer is the *active tracer* that `emit_reward` and the other emitters use.
    """

    def __init__(self) -> None:
        super().__init__()
        self._store: Optional[LightningStore] = None

    # ------------------------------------------------------------------------------------------------- lifecycle
    def init_worker(self, worker_id: int, store: Optional[LightningStore] = None) -> None:  # type: ignore[override]
        """Prepare this worker; `store` (optional) receives the spans of every later trace context."""
        super().init_worker(worker_id)
        self._store = store

    def teardown_worker(self, worker_id: int) -> None:  # type: ignore[override]
        super().teardown_worker(worker_id)
        self._store = None

    @property
    def store(self) -> Optional[LightningStore]:
        """The store given to `init_worker`, if any."""
        return self._store

    @contextmanager
    def lifespan(self, store: Optional[LightningStore] = None) -> Iterator[Tracer]:
        """Run `init`, `init_worker(0, store)` and, on exit, the teardowns: handy for scripts and debugging."""
        self.init()
        try:
            self.init_worker(0, store)
            try:
                yield self
            finally:
                self.teardown_worker(0)
        finally:
            self.teardown()

    # -------------------------------------------------------------------------------------------------- contexts
    def resolve_target(
        self, *, store: Optional[LightningStore], rollout_id: Optional[str], attempt_id: Optional[str]
    ) -> TraceTarget:
        """Check the arguments of `trace_context` and decide where its spans go.

        Raises:
            ValueError: only one of rollout_id/attempt_id is given, or a store is passed without both ids.
        """
        if bool(rollout_id) != bool(attempt_id):
            raise ValueError(
                f"trace_context needs both rollout_id and attempt_id or neither (got rollout_id={rollout_id!r}, "
                f"attempt_id={attempt_id!r})"
            )
        if store is not None and not rollout_id:
            raise ValueError("trace_context was given a store but no rollout_id/attempt_id to write the spans under")
        return TraceTarget(
            store=store if store is not None else self._store, rollout_id=rollout_id, attempt_id=attempt_id
        )

    def trace_context(
        self,
        name: Optional[str] = None,
        *,
        store: Optional[LightningStore] = None,
        rollout_id: Optional[str] = None,
        attempt_id: Optional[str] = None,
    ) -> AbstractAsyncContextManager[Any]:
        """Async context manager: spans created inside belong to this trace (and to the attempt, when ids are given).

        On exit every span is handed to the store (when there is one) before the context returns.
        """
        raise NotImplementedError()

    def _trace_context_sync(
        self,
        name: Optional[str] = None,
        *,
        store: Optional[LightningStore] = None,
        rollout_id: Optional[str] = None,
        attempt_id: Optional[str] = None,
    ) -> AbstractContextManager[Any]:
        """Synchronous twin of `trace_context`, for code without an event loop."""
        raise NotImplementedError()

    def get_last_trace(self) -> list[Span]:
        """The spans of the most recently opened trace context, in the order they ended."""
        raise NotImplementedError()

    # ---------------------------------------------------------------------------------------------------- spans
    def create_span(
        self,
        name: str,
        attributes: Optional[Mapping[str, Any]] = None,
        timestamp: Optional[float] = None,
        status: Optional[TraceStatus] = None,
    ) -> SpanCoreFields:
        """Record a finished, zero-length span (fire and forget) and return its fields."""
        raise NotImplementedError()

    def operation_context(
        self,
        name: str,
        attributes: Optional[Mapping[str, Any]] = None,
        start_time: Optional[float] = None,
        end_time: Optional[float] = None,
    ) -> AbstractContextManager[SpanRecordingContext]:
        """A span that covers the `with` block; spans created inside become its children."""
        raise NotImplementedError()

    # -------------------------------------------------------------------------------------------- v0.2 helpers
    def trace_run(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Deprecated: run `func` inside a synchronous trace context named after it."""
        warnings.warn("Tracer.trace_run is deprecated; use trace_context", DeprecationWarning, stacklevel=2)
        with self._trace_context_sync(name=getattr(func, "__name__", None)):
            return func(*args, **kwargs)

    async def trace_run_async(self, func: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """Deprecated: await `func` inside a trace context named after it."""
        warnings.warn("Tracer.trace_run_async is deprecated; use trace_context", DeprecationWarning, stacklevel=2)
        async with self.trace_context(name=getattr(func, "__name__", None)):
            return await func(*args, **kwargs)

    def get_langchain_handler(self) -> Any:
        """A LangChain callback handler that records LangChain runs, or None when this tracer has none.

        With Agent Lightning's zero-code instrumentation (`instrument_all`) LangChain is traced without a handler.
        """
        logger.warning("%s has no LangChain callback handler; use agentlightning.instrument_all()", type(self).__name__)
        return None
